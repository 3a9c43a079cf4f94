// The search box: one field for the search language of GET /v1/emails?q=
// (README, "Search"), a popover that lists its operators, and the page's
// own reading of a query, which tells whether mail that arrives live
// belongs in the list.
import { h } from './dom.js';

/** The operators, as the help popover lists them: [example, what it finds]. */
export const OPERATORS = [
  ['from:shop.example', 'the sender’s address or name contains it'],
  ['to:ada', 'a recipient’s address or name contains it'],
  ['subject:invoice', 'the subject contains it'],
  ['label:vip', 'has the label'],
  ['status:processed', 'received, processed or archived'],
  ['is:unread', 'not read yet (is:read: read)'],
  ['has:attachment', 'has an attachment'],
  ['after:2026-01-31', 'received after that day (UTC) or time'],
  ['before:2026-02-01', 'received before it'],
  ['larger:100KB', 'larger than that (smaller: smaller)'],
  ['message-id:abc@shop', 'the Message-ID'],
  ['"reset your password"', 'these words in a row, in the subject, addresses, names or text'],
  ['-label:checked', 'a - before a term leaves out what it finds'],
];

const KINDS = {
  from: 'from', to: 'to', subject: 'subject', label: 'label', status: 'status', is: 'is',
  has: 'has', before: 'before', after: 'after', larger: 'larger', smaller: 'smaller', 'message-id': 'messageId',
};
const STATUSES = ['received', 'processed', 'archived'];
const UNITS = [['KB', 1024], ['MB', 1024 ** 2], ['GB', 1024 ** 3], ['K', 1024], ['M', 1024 ** 2], ['G', 1024 ** 3], ['B', 1]];

/** The words of s, lower-cased: runs of letters and digits, as the server splits them. */
export function tokens(s) {
  return (s || '').toLowerCase().match(/[\p{L}\p{N}\p{Mn}]+/gu) || [];
}

/**
 * Reads a query into terms, as the server does; returns null when it does
 * not parse (the server says where), as when only words with no letters or
 * digits were left out of it.
 */
export function parse(q) {
  const terms = [];
  let i = 0;
  let dropped = false;
  const space = (c) => /\s/u.test(c);
  const quoted = () => {
    let out = '';
    i++;
    while (i < q.length) {
      const c = q[i];
      if (c === '\\' && (q[i + 1] === '"' || q[i + 1] === '\\')) {
        out += q[i + 1];
        i += 2;
      } else if (c === '"') {
        i++;
        return out;
      } else {
        out += c;
        i++;
      }
    }
    return null;
  };
  const bare = () => {
    const start = i;
    while (i < q.length && !space(q[i])) i++;
    return q.slice(start, i);
  };
  for (;;) {
    while (i < q.length && space(q[i])) i++;
    if (i >= q.length) return terms.length === 0 && dropped ? null : terms;
    let not = false;
    if (q[i] === '-') {
      not = true;
      i++;
      if (i >= q.length || space(q[i])) return null;
    }
    if (q[i] === '"') {
      const text = quoted();
      if (text === null) return null;
      const words = tokens(text);
      if (words.length) terms.push({ kind: 'words', not, words });
      else dropped = true;
      continue;
    }
    const op = /^([A-Za-z-]+):/.exec(q.slice(i));
    const kind = op && KINDS[op[1].toLowerCase()];
    if (kind) {
      i += op[0].length;
      const value = q[i] === '"' ? quoted() : bare();
      if (!value) return null;
      const term = operatorTerm(kind, value);
      if (!term) return null;
      term.not = not;
      terms.push(term);
      continue;
    }
    const words = tokens(bare());
    if (words.length) terms.push({ kind: 'words', not, words });
    else dropped = true;
  }
}

function operatorTerm(kind, value) {
  const lower = value.toLowerCase();
  switch (kind) {
    case 'from': case 'to': case 'subject':
      return { kind, text: lower };
    case 'messageId':
      return { kind, text: lower.trim().replace(/^<+|>+$/g, '') };
    case 'label':
      return { kind, text: value };
    case 'status':
      return STATUSES.includes(lower) ? { kind, text: lower } : null;
    case 'is':
      return lower === 'read' || lower === 'unread' ? { kind: lower } : null;
    case 'has':
      return lower === 'attachment' || lower === 'attachments' ? { kind: 'attachment' } : null;
    case 'before': case 'after': {
      const day = /^\d{4}-\d{2}-\d{2}$/.test(value);
      let t = Date.parse(day ? `${value}T00:00:00Z` : value);
      if (Number.isNaN(t) || (!day && !/^\d{4}-\d{2}-\d{2}T/.test(value))) return null;
      if (day && kind === 'after') t += 24 * 3600 * 1000 - 1;
      return { kind, time: t };
    }
    case 'larger': case 'smaller': {
      let s = value.toUpperCase();
      let mult = 1;
      for (const [suffix, m] of UNITS) {
        if (s.endsWith(suffix)) {
          s = s.slice(0, -suffix.length);
          mult = m;
          break;
        }
      }
      const n = Number(s);
      if (s === '' || Number.isNaN(n) || n < 0) return null;
      return { kind, size: Math.floor(n * mult) };
    }
  }
  return null;
}

const has = (s, sub) => (s || '').toLowerCase().includes(sub);
const phrase = (words, p) => {
  for (let i = 0; i + p.length <= words.length; i++) {
    if (p.every((w, j) => words[i + j] === w)) return true;
  }
  return false;
};

/**
 * Whether the email summary item matches one term: true, false, or null
 * when only the server can tell (the body's words, header addresses).
 */
function test(term, item) {
  switch (term.kind) {
    case 'from':
      return has(item.sender, term.text) || has(item.fromName, term.text) ? true : null;
    case 'to':
      return has(item.recipient, term.text) ? true : null;
    case 'subject':
      return has(item.subject, term.text);
    case 'label':
      return (item.labels || []).includes(term.text);
    case 'status':
      return item.status === term.text;
    case 'read': case 'unread':
      return typeof item.read === 'boolean' ? item.read === (term.kind === 'read') : null;
    case 'attachment':
      return typeof item.attachmentCount === 'number' ? item.attachmentCount > 0 : null;
    case 'before':
      return Date.parse(item.receivedAt) < term.time;
    case 'after':
      return Date.parse(item.receivedAt) > term.time;
    case 'larger':
      return item.rawSize > term.size;
    case 'smaller':
      return item.rawSize < term.size;
    case 'messageId':
      return (item.messageId || '').replace(/^<+|>+$/g, '').toLowerCase() === term.text;
    case 'words':
      return [item.subject, item.sender, item.recipient, item.fromName].some((f) => phrase(tokens(f), term.words)) ? true : null;
  }
  return null;
}

/**
 * Whether item matches every term: true, false, or null when the server
 * must be asked.
 */
export function matches(terms, item) {
  let result = true;
  for (const term of terms || []) {
    let r = test(term, item);
    if (r !== null && term.not) r = !r;
    if (r === false) return false;
    if (r === null) result = null;
  }
  return result;
}

/** Quotes a label or a value for a query when it needs it. */
export function quote(value) {
  return /^[^\s"]+$/.test(value) ? value : `"${value.replace(/[\\"]/g, '\\$&')}"`;
}

export class SearchBox {
  /** onChange(q) runs when the search changes: at once on Enter, else after a pause in typing. */
  constructor(onChange) {
    this.onChange = onChange;
    this.timer = 0;
    this.current = '';
    this.input = h('input', {
      id: 'search', type: 'search', name: 'q', autocomplete: 'off', spellcheck: false,
      placeholder: 'Search (from:, to:, is:unread, has:attachment…)', 'aria-describedby': 'search-error',
      oninput: () => this.changed(false),
    });
    this.error = h('p', { class: 'search-error', id: 'search-error', role: 'status' });
    const help = h('div', { id: 'search-help', class: 'search-help', popover: 'auto', role: 'dialog', 'aria-labelledby': 'search-help-title' },
      h('h2', { id: 'search-help-title' }, 'Search operators'),
      h('p', { class: 'hint' }, 'Terms combine: all must match. Quote values with spaces: from:"Ada Lovelace". Choose one to add it.'),
      h('ul', {}, OPERATORS.map(([example, what]) => h('li', {},
        h('button', {
          type: 'button', class: 'operator',
          onclick: () => {
            this.add(example);
            help.hidePopover();
          },
        }, h('code', {}, example)),
        h('span', {}, what)))));
    this.el = h('form', {
      class: 'search', role: 'search', 'aria-label': 'Search messages',
      onsubmit: (e) => {
        e.preventDefault();
        this.changed(true);
      },
    },
    h('label', { for: 'search', class: 'visually-hidden' }, 'Search messages'),
    this.input,
    h('button', { type: 'button', class: 'search-help-button', id: 'search-help-button', popovertarget: 'search-help', 'aria-label': 'Search operators', title: 'Search operators' }, '?'),
    help,
    this.error);
  }

  /** The search as typed, trimmed. */
  value() {
    return this.input.value.trim();
  }

  /** The terms of the search the list shows; null when it does not parse. */
  terms() {
    return parse(this.current);
  }

  changed(now) {
    clearTimeout(this.timer);
    const fire = () => {
      this.current = this.value();
      this.onChange(this.current);
    };
    if (now) fire();
    else this.timer = setTimeout(fire, 300);
  }

  /** Searches for q, as if typed. */
  set(q) {
    this.input.value = q;
    this.changed(true);
  }

  /** Adds a term to the search and runs it. */
  add(term) {
    const v = this.value();
    this.set(v ? `${v} ${term}` : term);
    this.input.focus();
  }

  showError(message) {
    this.error.textContent = message || '';
    if (message) this.input.setAttribute('aria-invalid', 'true');
    else this.input.removeAttribute('aria-invalid');
  }

  focus() {
    this.input.focus();
    this.input.select();
  }
}
