// Keyboard shortcuts and the help dialog that lists them.
import { h } from './dom.js';

export const SHORTCUTS = [
  ['j', 'Next message'],
  ['k', 'Previous message'],
  ['Enter or o', 'Open the message under the cursor'],
  ['# or Delete', 'Delete the open message (Undo follows)'],
  ['z', 'Undo the delete'],
  ['u', 'Mark the open message read or unread'],
  ['/', 'Search'],
  ['?', 'Show this help'],
  ['Esc', 'Close a dialog, leave a field'],
];

/** The help dialog; call showModal() on it. */
export function helpDialog() {
  const dialog = h('dialog', { class: 'help', id: 'help', 'aria-labelledby': 'help-title' },
    h('h2', { id: 'help-title' }, 'Keyboard shortcuts'),
    h('dl', {}, SHORTCUTS.map(([k, what]) => [h('dt', {}, h('kbd', {}, k)), h('dd', {}, what)])),
    h('form', { method: 'dialog' }, h('button', { class: 'primary' }, 'Close')));
  return dialog;
}

/**
 * Listens for the shortcuts on document. handlers: next, previous, open,
 * remove, undo, toggleRead, search, help. Keys typed into a field are left
 * alone.
 */
export function listen(handlers) {
  document.addEventListener('keydown', (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.defaultPrevented) return;
    const t = ev.target;
    const typing = t instanceof HTMLElement && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));
    if (typing) {
      if (ev.key === 'Escape') t.blur();
      return;
    }
    if (document.querySelector('dialog[open]')) return;
    const run = (name) => {
      ev.preventDefault();
      handlers[name]();
    };
    switch (ev.key) {
      case 'j': return run('next');
      case 'k': return run('previous');
      case 'o': return run('open');
      case 'Enter':
        // A focused button or link does its own thing.
        if (t instanceof HTMLElement && t.closest('button, a:not(.row-link), [role=tab]')) return;
        return run('open');
      case '#':
      case 'Delete': return run('remove');
      case 'z': return run('undo');
      case 'u': return run('toggleRead');
      case '/': return run('search');
      case '?': return run('help');
    }
  });
}
