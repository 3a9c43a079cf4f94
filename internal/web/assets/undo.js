// The undo bar: a deleted message is gone from the list at once, but the
// DELETE waits a few seconds, while the bar offers to undo it.
import { h } from './dom.js';

/** How long a deletion can be undone. */
export const UNDO_MS = 5000;

export class UndoBar {
  constructor() {
    this.text = h('span', { id: 'undo-text' });
    this.undoButton = h('button', { type: 'button', id: 'undo', class: 'link', onclick: () => this.finish('undo') }, 'Undo');
    this.el = h('div', { class: 'undo-bar', id: 'undo-bar', role: 'status', hidden: true },
      this.text, this.undoButton,
      h('button', { type: 'button', id: 'undo-dismiss', class: 'link', 'aria-label': 'Delete now', title: 'Delete now', onclick: () => this.finish('go') }, '×'));
    this.pending = null;
  }

  /**
   * Offers to undo: onUndo() runs when the person undoes, onGo() when the
   * time is up, the bar is dismissed, or another undo is offered.
   */
  offer(text, onUndo, onGo) {
    this.finish('go');
    this.pending = { onUndo, onGo, timer: setTimeout(() => this.finish('go'), UNDO_MS) };
    this.text.textContent = `${text} `;
    this.el.hidden = false;
  }

  /** Ends the offer: 'undo' or 'go'. */
  finish(how) {
    const p = this.pending;
    if (!p) return;
    this.pending = null;
    clearTimeout(p.timer);
    this.el.hidden = true;
    if (how === 'undo') p.onUndo();
    else p.onGo();
  }
}
