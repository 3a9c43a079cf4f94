// The message view beside the list: the message's details, editing of
// status, labels and notes, and tabs for the HTML preview, text, headers,
// raw source, attachments and links, and its checks (message-checks.js). Captured mail is hostile: its HTML is
// only ever shown in the sandboxed preview frame, everything else as text.
import { h, replace, formatBytes, formatDate } from './dom.js';
import { CHECK_TABS, fillCheck } from './message-checks.js';
import { askRecipients } from './release.js';

const STATUSES = ['received', 'processed', 'archived'];
const TABS = [
  ['html', 'HTML'], ['text', 'Text'], ['headers', 'Headers'], ['raw', 'Raw'], ['attachments', 'Attachments'], ['links', 'Links'],
  ...CHECK_TABS.map(([name, label]) => [name, label]),
];
const WIDTHS = [['phone', 'Phone', '375px'], ['tablet', 'Tablet', '768px'], ['desktop', 'Desktop', '100%']];
const RAW_SHOWN = 512 * 1024;
const ATTACHMENTS_SHOWN = 200;
const IMAGE_TYPES = /^image\/(png|jpe?g|gif|webp|bmp|svg\+xml|avif)\b/i;

export class MessageView {
  /** actions: onChanged(item), onDelete(id), onClose(). */
  constructor(client, actions) {
    this.client = client;
    this.actions = actions;
    this.tab = 'html';
    this.width = 'desktop';
    this.email = null;
    this.remote = false;
    this.el = h('section', { class: 'message-view', id: 'message-view', 'aria-label': 'Message', tabindex: '-1' });
    this.showEmpty();
  }

  showEmpty() {
    this.email = null;
    replace(this.el, h('p', { class: 'empty' }, 'Select a message to read it. Press ? for keyboard shortcuts.'));
  }

  showGone(text = 'This message was deleted.') {
    this.email = null;
    replace(this.el, h('p', { class: 'empty', role: 'status' }, text));
  }

  /** Loads and shows email id. */
  async show(id) {
    const token = (this.loading = {});
    replace(this.el, h('p', { class: 'empty', role: 'status' }, 'Loading…'));
    let data;
    try {
      data = await this.client.get(id);
    } catch (err) {
      if (this.loading !== token) return;
      if (err.status === 401) throw err;
      this.showGone(err.status === 404 || err.status === 400 ? 'This message does not exist (it may have been deleted).' : `Could not load the message: ${err.message}`);
      return;
    }
    if (this.loading !== token) return;
    if (!this.email || this.email.id !== id) this.remote = false;
    this.email = data.item;
    this.links = null;
    this.render();
  }

  get id() {
    return this.email ? this.email.id : '';
  }

  /** Takes a newer summary of the open email (status, labels, notes). */
  refresh(item) {
    if (!this.email || item.id !== this.email.id) return;
    Object.assign(this.email, item);
    this.updateDetails();
  }

  render() {
    const e = this.email;
    this.notice = h('p', { class: 'notice', role: 'status', id: 'view-notice' });
    this.details = h('div', { class: 'details' });
    this.tabButtons = new Map();
    this.panels = new Map();
    const tablist = h('div', { class: 'tabs', role: 'tablist', 'aria-label': 'Message parts', onkeydown: (ev) => this.tabKeys(ev) });
    for (const [name, label] of TABS) {
      let text = label;
      if (name === 'attachments') text = `${label} (${e.body.attachments.length})`;
      const button = h('button', {
        type: 'button', role: 'tab', id: `tab-${name}`, 'aria-controls': `panel-${name}`,
        onclick: () => this.select(name),
      }, text);
      this.tabButtons.set(name, button);
      tablist.append(button);
      this.panels.set(name, h('div', { role: 'tabpanel', id: `panel-${name}`, class: `panel panel-${name}`, 'aria-labelledby': `tab-${name}` }));
    }
    replace(this.el,
      h('div', { class: 'view-head' },
        h('button', { type: 'button', class: 'back link', onclick: () => this.actions.onClose() }, '← Messages'),
        h('h2', { id: 'message-subject' }, e.subject || '(no subject)'),
        this.details),
      truncatedNote(e.body.truncated),
      this.notice,
      tablist,
      [...this.panels.values()]);
    this.renderDetails();
    this.select(this.tab, false);
  }

  /** The header block: addresses, date, status, labels, notes, delete. */
  renderDetails() {
    const e = this.email;
    this.status = h('select', {
      id: 'message-status', onchange: () => this.save({ status: this.status.value }),
    }, STATUSES.map((s) => h('option', { value: s }, s)));
    const labelInput = h('input', {
      id: 'label-input', type: 'text', placeholder: 'Add a label', autocomplete: 'off', maxlength: 64,
      onkeydown: (ev) => {
        if (ev.key !== 'Enter') return;
        ev.preventDefault();
        const l = labelInput.value.trim();
        if (l && !this.email.labels.includes(l)) this.save({ labels: [...this.email.labels, l] });
        labelInput.value = '';
      },
    });
    this.labels = h('span', { class: 'label-list' });
    this.notes = h('textarea', { id: 'message-notes', rows: 2 });
    this.savedNotes = null;
    replace(this.details,
      h('dl', { class: 'meta' },
        h('dt', {}, 'From'), h('dd', { class: 'sender' }, e.sender),
        h('dt', {}, 'To'), h('dd', { class: 'recipient' }, e.recipient),
        h('dt', {}, 'Date'), h('dd', {}, h('time', { datetime: e.receivedAt }, formatDate(e.receivedAt))),
        h('dt', {}, 'Size'), h('dd', {}, formatBytes(e.rawSize))),
      h('div', { class: 'edit' },
        h('div', { class: 'field inline' }, h('label', { for: 'message-status' }, 'Status'), this.status),
        h('div', { class: 'labels', role: 'group', 'aria-label': 'Labels' }, this.labels,
          h('label', { for: 'label-input', class: 'visually-hidden' }, 'Add a label'), labelInput),
        h('div', { class: 'actions' },
          h('button', { type: 'button', id: 'copy-link', title: 'A link to this message, for a bug report', onclick: () => this.copyLink() }, 'Copy link'),
          h('button', { type: 'button', id: 'release-message', title: 'Send this message, as received, to a real inbox', onclick: () => this.release() }, 'Release…'),
          h('button', { type: 'button', class: 'danger', id: 'delete-message', onclick: () => this.actions.onDelete(e.id) }, 'Delete'))),
      h('details', { class: 'notes', open: !!e.notes },
        h('summary', {}, 'Notes'),
        h('label', { for: 'message-notes', class: 'visually-hidden' }, 'Notes'),
        this.notes,
        h('button', { type: 'button', id: 'save-notes', onclick: () => this.save({ notes: this.notes.value || null }) }, 'Save notes')));
    this.updateDetails();
  }

  /**
   * Shows the open email's status, labels and notes, leaving notes that
   * are being edited alone.
   */
  updateDetails() {
    const e = this.email;
    this.status.value = e.status;
    replace(this.labels, e.labels.map((l) => h('span', { class: 'badge label' }, l,
      h('button', {
        type: 'button', class: 'remove-label', 'aria-label': `Remove label ${l}`,
        onclick: () => this.save({ labels: this.email.labels.filter((x) => x !== l) }),
      }, '×'))));
    const notes = e.notes || '';
    if (this.savedNotes === null || this.notes.value === this.savedNotes) this.notes.value = notes;
    this.savedNotes = notes;
  }

  /** Copies the message's address, or shows it when the browser will not. */
  async copyLink() {
    const url = `${location.origin}/#/emails/${this.email.id}`;
    try {
      await navigator.clipboard.writeText(url);
      this.notice.textContent = 'Link copied.';
    } catch {
      this.notice.textContent = `Link: ${url}`;
    }
  }

  /** Asks for recipients and releases the open email to them. */
  async release() {
    const id = this.email.id;
    const to = await askRecipients('this message');
    if (!to) return;
    this.notice.textContent = 'Releasing…';
    try {
      const { item } = await this.client.release(id, to);
      if (this.id === id) this.notice.textContent = `Released to ${to.join(', ')}. The mail server answered: ${item.code} ${item.text}`;
    } catch (err) {
      if (err.status === 401) this.actions.onUnauthorized();
      else if (this.id === id) this.notice.textContent = `Not released: ${err.message}`;
    }
  }

  /** PATCHes the open email and shows the result. */
  async save(changes) {
    const id = this.email.id;
    try {
      const data = await this.client.update(id, changes);
      if (!this.email || this.email.id !== id) return;
      if ('notes' in changes) this.savedNotes = null;
      Object.assign(this.email, data.item);
      this.updateDetails();
      this.notice.textContent = 'Saved.';
      this.actions.onChanged(data.item);
    } catch (err) {
      if (err.status === 401) this.actions.onUnauthorized();
      else this.notice.textContent = `Not saved: ${err.message}`;
    }
  }

  tabKeys(ev) {
    const names = TABS.map((t) => t[0]);
    let i = names.indexOf(this.tab);
    if (ev.key === 'ArrowRight') i = (i + 1) % names.length;
    else if (ev.key === 'ArrowLeft') i = (i + names.length - 1) % names.length;
    else if (ev.key === 'Home') i = 0;
    else if (ev.key === 'End') i = names.length - 1;
    else return;
    ev.preventDefault();
    this.select(names[i]);
    this.tabButtons.get(names[i]).focus();
  }

  /** Shows tab name, filling its panel the first time. */
  select(name, focus = false) {
    this.tab = name;
    for (const [n, button] of this.tabButtons) {
      const on = n === name;
      button.setAttribute('aria-selected', String(on));
      button.tabIndex = on ? 0 : -1;
      this.panels.get(n).hidden = !on;
    }
    const panel = this.panels.get(name);
    if (!panel.firstChild) this.fill(name, panel);
    if (focus) this.tabButtons.get(name).focus();
  }

  fill(name, panel) {
    const e = this.email;
    const body = e.body;
    switch (name) {
      case 'html':
        this.fillPreview(panel);
        break;
      case 'text':
        panel.append(body.text ? h('pre', { class: 'text-body' }, body.text) : h('p', { class: 'empty' }, 'This message has no text part.'));
        break;
      case 'headers': {
        const names = Object.keys(body.headers || {}).sort();
        panel.append(h('table', { class: 'headers' },
          h('caption', { class: 'visually-hidden' }, 'Message headers'),
          h('tbody', {}, names.map((k) => h('tr', {}, h('th', { scope: 'row' }, k), h('td', {}, body.headers[k]))))));
        break;
      }
      case 'raw': {
        const raw = body.raw || '';
        panel.append(
          h('p', { class: 'toolbar' },
            h('a', { href: `/ui/emails/${e.id}/raw`, download: `${e.id}.eml`, class: 'button', id: 'download-raw' }, 'Download .eml'),
            raw.length > RAW_SHOWN ? ` Showing the first ${formatBytes(RAW_SHOWN)} of ${formatBytes(raw.length)}.` : null),
          h('pre', { class: 'raw', tabindex: '0', 'aria-label': 'Raw source' }, raw.length > RAW_SHOWN ? raw.slice(0, RAW_SHOWN) : raw));
        break;
      }
      case 'attachments':
        if (!body.attachments.length) {
          panel.append(h('p', { class: 'empty' }, 'No attachments.'));
          break;
        }
        if (body.attachments.length > ATTACHMENTS_SHOWN) {
          panel.append(h('p', { class: 'hint' }, `Showing the first ${ATTACHMENTS_SHOWN} of ${body.attachments.length} attachments; the raw source has them all.`));
        }
        panel.append(h('ul', { class: 'attachments' }, body.attachments.slice(0, ATTACHMENTS_SHOWN).map((a, i) => {
          const url = `/ui/emails/${e.id}/attachments/${i}`;
          const name = a.filename || `attachment-${i}`;
          return h('li', {},
            IMAGE_TYPES.test(a.contentType || '') ? h('img', { src: url, alt: name, loading: 'lazy', class: 'thumb' }) : h('span', { class: 'thumb file', 'aria-hidden': 'true' }, '📄'),
            h('span', { class: 'att-name' }, name),
            h('span', { class: 'att-meta' }, `${a.contentType || 'unknown type'}, ${formatBytes(a.size)}`),
            h('a', { href: url, download: name, class: 'button' }, 'Download', h('span', { class: 'visually-hidden' }, ` ${name}`)));
        })));
        break;
      case 'links':
        this.fillLinks(panel);
        break;
      default:
        fillCheck(this.client, panel, name, e.id, () => this.id === e.id);
    }
  }

  fillPreview(panel) {
    const e = this.email;
    const frame = h('iframe', {
      title: 'HTML preview of the message', referrerpolicy: 'no-referrer', id: 'preview-frame',
      src: `/ui/preview/${e.id}${this.remote ? '?remote=1' : ''}`,
    });
    // No allow-scripts, no allow-same-origin: the captured HTML runs no
    // code and cannot reach the dashboard.
    frame.setAttribute('sandbox', '');
    const holder = h('div', { class: `preview-holder width-${this.width}` }, frame);
    const widths = h('div', { class: 'widths', role: 'group', 'aria-label': 'Preview width' }, WIDTHS.map(([name, label, css]) => h('button', {
      type: 'button', 'aria-pressed': String(name === this.width), dataset: { width: name }, title: css,
      onclick: (ev) => {
        this.width = name;
        holder.className = `preview-holder width-${name}`;
        for (const b of widths.children) b.setAttribute('aria-pressed', String(b === ev.currentTarget));
      },
    }, label)));
    const remote = h('button', {
      type: 'button', id: 'load-remote', disabled: this.remote,
      onclick: () => {
        this.remote = true;
        replace(panel);
        this.fillPreview(panel);
      },
    }, this.remote ? 'Remote images shown' : 'Load remote images');
    panel.append(h('div', { class: 'toolbar' }, widths, remote,
      e.body.html ? null : h('span', { class: 'hint' }, ' This message has no HTML part; its text is shown.')), holder);
  }

  async fillLinks(panel) {
    const id = this.email.id;
    panel.append(h('p', { class: 'empty' }, 'Loading links…'));
    let items;
    try {
      items = (await this.client.links(id)).items || [];
    } catch (err) {
      if (this.id === id) replace(panel, h('p', { class: 'empty' }, `Could not load the links: ${err.message}`));
      return;
    }
    if (this.id !== id) return;
    if (!items.length) {
      replace(panel, h('p', { class: 'empty' }, 'No links in this message.'));
      return;
    }
    replace(panel, h('ol', { class: 'links' }, items.map((l) => {
      const safe = /^https?:\/\//i.test(l.url);
      return h('li', {},
        l.text ? h('span', { class: 'link-text' }, l.text) : null,
        safe ? h('a', { href: l.url, target: '_blank', rel: 'noopener noreferrer', class: 'link-url' }, l.url) : h('span', { class: 'link-url' }, l.url));
    })));
  }
}

/** What the parser's limits left out of a message, or null. */
function truncatedNote(truncated) {
  if (!truncated || !truncated.length) return null;
  const n = (x) => x.toLocaleString('en-US');
  const says = {
    headerFields: (l) => `a header has more than ${n(l)} fields: only the first ${n(l)} are shown`,
    parts: (l) => `it has more than ${n(l)} parts: the ones after them are not shown`,
    depth: (l) => `its parts nest more than ${n(l)} levels deep: the deeper ones are not shown`,
  };
  const what = truncated.map((t) => (says[t.what] ? says[t.what](t.limit) : t.what));
  return h('p', { class: 'truncated', id: 'message-truncated', role: 'note' },
    `Not all of this message was read: ${what.join('; ')}. The raw source has it all.`);
}
