// The sidebar: all mail, unread, each status and each label, with their
// counts (GET /v1/emails/stats). Choosing one searches for it.
import { h, replace, formatCount } from './dom.js';
import { quote } from './search.js';

const STATUSES = [['received', 'Received'], ['processed', 'Processed'], ['archived', 'Archived']];

export class Sidebar {
  /**
   * onChoose(q) runs when the person picks an entry; onClose() when they
   * close the sidebar where it is a drawer.
   */
  constructor(onChoose, onClose) {
    this.onChoose = onChoose;
    this.stats = null;
    this.query = '';
    this.fixed = h('ul', { class: 'folders' });
    this.labels = h('ul', { class: 'folders', id: 'label-folders' });
    this.labelsTitle = h('h2', { class: 'folders-title', id: 'labels-title' }, 'Labels');
    this.el = h('nav', {
      class: 'sidebar', id: 'sidebar', 'aria-label': 'Mailboxes',
      onkeydown: (ev) => {
        if (ev.key === 'Escape') onClose();
      },
    },
    h('div', { class: 'drawer-head' },
      h('span', {}, 'Mailboxes'),
      h('button', { type: 'button', class: 'link', id: 'sidebar-close', 'aria-label': 'Close the mailboxes', onclick: () => onClose() }, '×')),
    this.fixed, this.labelsTitle, this.labels);
    this.render();
  }

  /** Shows the counts of stats, or none when the server has no stats (null). */
  setStats(stats) {
    this.stats = stats;
    this.render();
  }

  /** Marks the entry whose search is q as the current one. */
  setQuery(q) {
    this.query = q;
    for (const a of this.el.querySelectorAll('a[data-q]')) {
      if (a.dataset.q === q) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
  }

  /** One entry: its search q, its name, how many emails it has and how many of them are unread. */
  entry(q, label, total, unread, id) {
    const counted = typeof total === 'number';
    const many = (n) => `${formatCount(n)} ${n === 1 ? 'message' : 'messages'}`;
    return h('li', {}, h('a', {
      href: '#/', class: 'folder', id, dataset: { q },
      title: counted && typeof unread === 'number' ? `${many(total)}, ${formatCount(unread)} unread` : null,
      onclick: (ev) => {
        ev.preventDefault();
        this.onChoose(q);
      },
    },
    h('span', { class: 'folder-name' }, label),
    counted ? h('span', { class: unread > 0 ? 'folder-count has-unread' : 'folder-count' }, formatCount(total)) : null));
  }

  render() {
    const s = this.stats;
    this.fill(this.fixed, [
      ['', 'All mail', s?.total, s?.unread, 'folder-all'],
      ['is:unread', 'Unread', s?.unread, s?.unread, 'folder-unread'],
      ...STATUSES.map(([status, label]) => [`status:${status}`, label, s?.statuses?.[status], undefined, `folder-${status}`])]);
    const labels = s?.labels || [];
    this.labelsTitle.hidden = labels.length === 0;
    this.fill(this.labels, labels.map((l) => [`label:${quote(l.name)}`, l.name, l.total, l.unread]));
    this.setQuery(this.query);
  }

  /**
   * Shows entries (the arguments of entry) in list. An entry already there
   * keeps its link, with its name and count brought up to date: counts
   * change with every new message, and a link drawn again under the
   * pointer or the keyboard focus would lose the click or the focus.
   */
  fill(list, entries) {
    const have = new Map([...list.children].map((li) => [li.firstChild.dataset.q, li]));
    const want = entries.map((args) => {
      const fresh = this.entry(...args);
      const li = have.get(args[0]);
      if (!li) return fresh;
      const a = li.firstChild, b = fresh.firstChild;
      a.replaceChildren(...b.childNodes);
      if (b.hasAttribute('title')) a.setAttribute('title', b.getAttribute('title'));
      else a.removeAttribute('title');
      return li;
    });
    if (want.length !== list.children.length || want.some((li, i) => list.children[i] !== li)) replace(list, want);
  }
}
