// The message list: dense rows newest first (sender, subject, snippet,
// attachments, size, time; unread in bold), a toolbar of one steady height
// with the count and the selection's actions, "load more" paging, and a
// keyboard cursor.
import { h, replace, formatBytes, formatShortDate, formatDate, formatCount, messages } from './dom.js';

const STATUSES = ['received', 'processed', 'archived'];

/** Orders like the API: receivedAt, then id, both descending. */
export function newerFirst(a, b) {
  if (a.receivedAt !== b.receivedAt) return a.receivedAt < b.receivedAt ? 1 : -1;
  if (a.id === b.id) return 0;
  return a.id < b.id ? 1 : -1;
}

export class MessageList {
  /**
   * actions: onLoadMore(), onDelete(ids), onSetStatus(ids, status),
   * onSetRead(ids, read), onRelease(ids), onDeleteMatching().
   */
  constructor(actions) {
    this.actions = actions;
    this.items = [];
    this.rows = new Map();
    this.selected = new Set();
    this.openId = '';
    this.total = null;
    /** How many of the emails counted are deleted, waiting for their undo to pass. */
    this.hiddenCount = 0;

    this.countEl = h('p', { class: 'count', id: 'message-count', 'aria-live': 'polite' });
    this.selectAll = h('input', {
      type: 'checkbox', id: 'select-all', 'aria-label': 'Select all shown messages',
      onchange: () => this.toggleAll(this.selectAll.checked),
    });
    this.statusSelect = h('select', {
      id: 'bulk-status', 'aria-label': 'Set the status of the selected messages',
      onchange: () => {
        const s = this.statusSelect.value;
        this.statusSelect.value = '';
        if (s) this.actions.onSetStatus([...this.selected], s);
      },
    }, h('option', { value: '' }, 'Status…'), STATUSES.map((s) => h('option', { value: s }, s)));
    const action = (id, label, onclick, extra = {}) => h('button', { type: 'button', id, onclick, ...extra }, label);
    this.readButtons = [
      action('read-selected', 'Mark read', () => this.actions.onSetRead([...this.selected], true)),
      action('unread-selected', 'Mark unread', () => this.actions.onSetRead([...this.selected], false)),
    ];
    this.bulk = h('div', { class: 'bulk', role: 'group', 'aria-label': 'Selected messages' },
      action('delete-selected', 'Delete', () => this.actions.onDelete([...this.selected]), { class: 'danger' }),
      this.readButtons,
      this.statusSelect,
      action('release-selected', 'Release…', () => this.actions.onRelease([...this.selected])));
    this.deleteMatching = h('button', {
      type: 'button', id: 'delete-matching', class: 'link danger-text',
      onclick: () => this.actions.onDeleteMatching(),
    }, 'Delete all matching…');
    this.listEl = h('ol', { class: 'rows', id: 'message-list', 'aria-label': 'Messages' });
    this.empty = h('p', { class: 'empty' }, 'No messages yet. Send mail to the SMTP port and it shows up here at once.');
    this.more = h('button', { type: 'button', id: 'load-more', onclick: () => this.actions.onLoadMore() }, 'Load more');
    this.el = h('section', { class: 'message-list', 'aria-labelledby': 'list-title' },
      h('h2', { id: 'list-title', class: 'visually-hidden' }, 'Message list'),
      h('div', { class: 'list-toolbar' }, this.selectAll, this.countEl, this.bulk, this.deleteMatching),
      h('div', { class: 'list-scroll' }, this.listEl, this.empty, this.more));
    this.setHasMore(false);
    this.update();
  }

  /** Hides the read actions when the server keeps no read state. */
  setReadable(readable) {
    for (const b of this.readButtons) b.hidden = !readable;
  }

  /** Replaces the list with a first page. */
  setItems(items, hasMore) {
    this.items = [];
    this.selected.clear();
    this.merge(items);
    this.setHasMore(hasMore);
  }

  /** Adds a further page (or live mail), keeping the order. */
  merge(items) {
    const known = new Map(this.items.map((e) => [e.id, e]));
    for (const e of items) {
      const was = known.get(e.id);
      known.set(e.id, e);
      if (was && JSON.stringify(was) !== JSON.stringify(e)) this.replaceItem(e);
    }
    this.items = [...known.values()].sort(newerFirst);
    this.render();
  }

  /**
   * Takes a fresh first page of the search: the rows from the newest to
   * the page's last become the page's (plus the open one, so that reading
   * it does not make it vanish); older rows stay. full tells whether the
   * page was a whole one (more may follow).
   */
  reconcile(items, full) {
    const last = items[items.length - 1];
    const keep = this.items.filter((e) => e.id === this.openId || (full && last && newerFirst(e, last) > 0));
    this.items = [];
    this.merge([...keep, ...items]);
    for (const id of this.selected) if (!this.has(id)) this.selected.delete(id);
    this.update();
    if (!full) this.setHasMore(false);
  }

  setHasMore(hasMore) {
    this.more.hidden = !hasMore;
  }

  /** Updates an email already shown; reports whether it was shown. */
  replaceItem(item) {
    const i = this.items.findIndex((e) => e.id === item.id);
    if (i < 0) return false;
    this.items[i] = item;
    const old = this.rows.get(item.id);
    if (old) {
      const li = this.row(item);
      const focused = old.contains(document.activeElement) ? document.activeElement.tagName : '';
      old.replaceWith(li);
      this.rows.set(item.id, li);
      if (focused) li.querySelector(focused === 'INPUT' ? 'input' : 'a').focus();
    }
    return true;
  }

  remove(id) {
    const before = this.items.length;
    this.items = this.items.filter((e) => e.id !== id);
    this.selected.delete(id);
    if (this.items.length !== before) this.render();
  }

  has(id) {
    return this.items.some((e) => e.id === id);
  }

  get(id) {
    return this.items.find((e) => e.id === id);
  }

  last() {
    return this.items[this.items.length - 1];
  }

  setCount(n) {
    this.total = n;
    this.update();
  }

  setOpen(id) {
    this.openId = id;
    for (const [rowId, li] of this.rows) {
      if (rowId === id) li.setAttribute('aria-current', 'true');
      else li.removeAttribute('aria-current');
    }
  }

  /** The id after (delta 1) or before (-1) id in the list, or ''. */
  neighbour(id, delta) {
    const i = this.items.findIndex((e) => e.id === id);
    if (i < 0) return '';
    const e = this.items[i + delta];
    return e ? e.id : '';
  }

  /** Moves the keyboard cursor (the focused row) by delta; returns its id. */
  moveCursor(delta) {
    if (!this.items.length) return '';
    const focused = document.activeElement && document.activeElement.closest('.row');
    let from = focused ? this.items.findIndex((e) => e.id === focused.dataset.id) : -1;
    if (from < 0) from = this.items.findIndex((e) => e.id === this.openId);
    const to = from < 0 ? 0 : Math.max(0, Math.min(this.items.length - 1, from + delta));
    const id = this.items[to].id;
    this.focusRow(id);
    return id;
  }

  /** Puts the keyboard cursor on the row of id. */
  focusRow(id) {
    const link = this.rows.get(id)?.querySelector('a');
    if (!link) return;
    link.focus({ preventScroll: true });
    link.scrollIntoView({ block: 'nearest' });
  }

  /** The row under the keyboard cursor, else the open one. */
  cursorId() {
    const focused = document.activeElement && document.activeElement.closest('.row');
    return focused ? focused.dataset.id : this.openId;
  }

  toggleAll(on) {
    this.selected.clear();
    if (on) for (const e of this.items) this.selected.add(e.id);
    for (const [id, li] of this.rows) li.querySelector('input').checked = this.selected.has(id);
    this.update();
  }

  /** Draws the rows, reusing those already drawn so focus stays put. */
  render() {
    const ids = new Set(this.items.map((e) => e.id));
    for (const [id, li] of this.rows) {
      if (!ids.has(id)) {
        li.remove();
        this.rows.delete(id);
      }
    }
    let at = this.listEl.firstChild;
    for (const e of this.items) {
      let li = this.rows.get(e.id);
      if (!li) {
        li = this.row(e);
        this.rows.set(e.id, li);
      }
      if (li === at) at = at.nextSibling;
      else this.listEl.insertBefore(li, at);
    }
    this.update();
  }

  row(e) {
    const subject = e.subject || '(no subject)';
    const unread = e.read === false;
    const check = h('input', {
      type: 'checkbox', checked: this.selected.has(e.id), 'aria-label': `Select: ${subject}`,
      onchange: () => {
        if (check.checked) this.selected.add(e.id);
        else this.selected.delete(e.id);
        this.update();
      },
    });
    const attachments = typeof e.attachmentCount === 'number' && e.attachmentCount > 0 ? e.attachmentCount : 0;
    const li = h('li', { class: `row status-${e.status}${unread ? ' unread' : ''}`, dataset: { id: e.id } },
      check,
      h('a', { href: `#/emails/${e.id}`, class: 'row-link' },
        h('span', { class: 'line' },
          unread ? h('span', { class: 'visually-hidden' }, 'Unread: ') : null,
          h('span', { class: 'from', title: e.sender }, e.fromName || e.sender),
          h('span', { class: 'to' }, `to ${e.recipient}`),
          h('span', { class: 'facts' },
            attachments ? h('span', { class: 'clip', role: 'img', title: `${formatCount(attachments)} ${attachments === 1 ? 'attachment' : 'attachments'}`, 'aria-label': `${formatCount(attachments)} ${attachments === 1 ? 'attachment' : 'attachments'}` }) : null,
            h('span', { class: 'size' }, formatBytes(e.rawSize)),
            h('time', { class: 'date', datetime: e.receivedAt, title: formatDate(e.receivedAt) }, formatShortDate(e.receivedAt)))),
        h('span', { class: 'line' },
          h('span', { class: 'badges' },
            e.status !== 'received' ? h('span', { class: 'badge status' }, e.status) : null,
            (e.labels || []).map((l) => h('span', { class: 'badge label' }, l))),
          h('span', { class: 'subject' }, subject),
          e.snippet ? h('span', { class: 'snippet' }, ` — ${e.snippet}`) : null)));
    if (e.id === this.openId) li.setAttribute('aria-current', 'true');
    return li;
  }

  /** How many messages the list has: the total less those hidden while their deletion can be undone. */
  count() {
    const shown = this.items.length;
    return this.total === null ? shown : Math.max(this.total - this.hiddenCount, shown);
  }

  /** Updates the count, the toolbar and the empty state; the toolbar keeps its height. */
  update() {
    const shown = this.items.length;
    let text = messages(this.count());
    if (this.selected.size) text += `, ${formatCount(this.selected.size)} selected`;
    this.countEl.textContent = text;
    this.bulk.hidden = this.selected.size === 0;
    this.deleteMatching.hidden = shown === 0 || this.selected.size > 0;
    this.selectAll.checked = shown > 0 && this.selected.size === shown;
    this.selectAll.disabled = shown === 0;
    this.empty.hidden = shown > 0;
  }

  /** Shows a short note in place of the empty state (a search error). */
  setEmptyText(text) {
    replace(this.empty, text);
  }
}
