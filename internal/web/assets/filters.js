// The filters above the message list: recipient, sender, subject, status
// and label, applied as the person types.
import { h } from './dom.js';

const STATUSES = ['received', 'processed', 'archived'];

export class Filters {
  /** onChange(values) runs when the filters change. */
  constructor(onChange) {
    this.onChange = onChange;
    this.timer = 0;
    const field = (name, label, type = 'search', placeholder = '') => {
      const input = h('input', {
        id: `filter-${name}`, name, type, placeholder, autocomplete: 'off', spellcheck: false,
        oninput: () => this.changed(),
      });
      this[name] = input;
      return h('div', { class: 'field' }, h('label', { for: input.id }, label), input);
    };
    this.status = h('select', { id: 'filter-status', name: 'status', onchange: () => this.changed(true) },
      h('option', { value: '' }, 'Any'), STATUSES.map((s) => h('option', { value: s }, s)));
    this.error = h('p', { class: 'filter-error', role: 'status', id: 'filter-error' });
    this.el = h('form', {
      class: 'filters', role: 'search', 'aria-label': 'Filter messages',
      onsubmit: (e) => {
        e.preventDefault();
        this.changed(true);
      },
    },
    field('subject', 'Subject', 'search', 'Search subjects'),
    field('recipient', 'To', 'search', 'exact address'),
    field('sender', 'From', 'search', 'exact address'),
    field('label', 'Label'),
    h('div', { class: 'field' }, h('label', { for: 'filter-status' }, 'Status'), this.status),
    h('button', { type: 'button', class: 'link', onclick: () => this.clear() }, 'Clear filters'),
    this.error);
  }

  /** The filters as API query parameters (empty ones left out). */
  values() {
    const v = {};
    for (const name of ['subject', 'recipient', 'sender', 'label', 'status']) {
      const s = this[name].value.trim();
      if (s) v[name] = s;
    }
    return v;
  }

  changed(now = false) {
    clearTimeout(this.timer);
    if (now) this.onChange(this.values());
    else this.timer = setTimeout(() => this.onChange(this.values()), 300);
  }

  clear() {
    for (const name of ['subject', 'recipient', 'sender', 'label', 'status']) this[name].value = '';
    this.changed(true);
  }

  showError(message) {
    this.error.textContent = message || '';
  }

  focusSearch() {
    this.subject.focus();
    this.subject.select();
  }

  /** Whether an email summary passes the filters, as the API would judge. */
  matches(item) {
    const v = this.values();
    const lower = (s) => (s || '').toLowerCase();
    if (v.recipient && lower(item.recipient) !== lower(v.recipient)) return false;
    if (v.sender && lower(item.sender) !== lower(v.sender)) return false;
    if (v.subject && !lower(item.subject).includes(lower(v.subject))) return false;
    if (v.status && item.status !== v.status) return false;
    if (v.label && !(item.labels || []).includes(v.label)) return false;
    return true;
  }
}
