// The dashboard: sign-in, then the filters and message list beside the
// message view, kept live by the account's event stream.
import { h } from './dom.js';
import { Client } from './api.js';
import * as keys from './keys.js';
import { showSignIn, refusedMessage } from './signin.js';
import { Filters } from './filters.js';
import { MessageList } from './message-list.js';
import { MessageView } from './message-view.js';
import { askRecipients, releaseEach } from './release.js';
import { helpDialog, listen } from './shortcuts.js';

const PAGE = 50;
const root = document.getElementById('app');
/** The signed-in dashboard, or null on the sign-in page. */
let current = null;

listen({
  next: () => current && current.list.moveCursor(1),
  previous: () => current && current.list.moveCursor(-1),
  open: () => current && current.openCursor(),
  remove: () => current && current.removeOpen(),
  search: () => current && current.filters.focusSearch(),
  help: () => current && current.help.showModal(),
});
window.addEventListener('hashchange', () => {
  // A sign-in link pasted into a tab that already shows the dashboard.
  if (location.hash.startsWith('#key=')) start();
  else if (current) current.route();
});
start();

function start() {
  // A sign-in link carries the key in the fragment, which the browser
  // never sends: take it, and take it out of the address bar at once.
  let key = '';
  if (location.hash.startsWith('#key=')) {
    key = new URLSearchParams(location.hash.slice(1)).get('key') || '';
    history.replaceState(null, '', location.pathname + location.search);
  }
  const remember = !!key || keys.isSaved(keys.currentKey());
  key = key || keys.currentKey();
  if (!key) {
    signInPage('');
    return;
  }
  signIn(key, remember).catch((err) => {
    if (err.status === 401) keys.setCurrentKey('');
    signInPage(refusedMessage(err));
  });
}

async function signIn(key, remember) {
  const client = new Client(key);
  const account = await client.signIn();
  keys.setCurrentKey(key);
  if (remember || keys.isSaved(key)) keys.saveKey(key, account);
  if (current) current.close();
  current = new Dashboard(client, account);
}

function signInPage(message) {
  if (current) current.close();
  current = null;
  document.body.classList.remove('has-message');
  document.title = 'Sign in · mailsink';
  showSignIn(root, {
    message,
    onSignIn: async (key, remember) => {
      try {
        await signIn(key, remember);
      } catch (err) {
        throw new Error(refusedMessage(err));
      }
    },
  });
}

/** Asks a yes/no question in a modal dialog; resolves true for yes. */
function confirmDialog(question, yes) {
  return new Promise((resolve) => {
    const dialog = h('dialog', { class: 'confirm', 'aria-labelledby': 'confirm-text', id: 'confirm' },
      h('p', { id: 'confirm-text' }, question),
      h('form', { method: 'dialog', class: 'buttons' },
        h('button', { value: 'no', class: 'primary', autofocus: true }, 'Cancel'),
        h('button', { value: 'yes', class: 'danger', id: 'confirm-yes' }, yes)));
    dialog.addEventListener('close', () => {
      dialog.remove();
      resolve(dialog.returnValue === 'yes');
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}

class Dashboard {
  constructor(client, account) {
    this.client = client;
    this.account = account;
    this.abort = new AbortController();
    this.query = 0;
    this.countTimer = 0;
    this.wasLive = false;
    this.during = null;

    this.filters = new Filters(() => this.reload());
    this.list = new MessageList({
      onLoadMore: () => this.loadMore(),
      onDelete: (ids) => this.removeMany(ids),
      onSetStatus: (ids, status) => this.setStatus(ids, status),
      onRelease: (ids) => this.releaseMany(ids),
      onDeleteMatching: () => this.removeMatching(),
    });
    this.view = new MessageView(client, {
      onChanged: (item) => this.changed(item),
      onDelete: (id) => this.removeMany([id]),
      onClose: () => {
        location.hash = '#/';
      },
      onUnauthorized: () => this.unauthorized(),
    });
    this.help = helpDialog();
    this.live = h('span', { class: 'live', id: 'live', role: 'status' }, 'Connecting…');
    this.announce = h('p', { class: 'announce', role: 'status', id: 'announce' });

    const others = keys.savedKeys().filter((s) => s.key !== client.key);
    const switcher = h('select', {
      id: 'account-switch', 'aria-label': 'Account',
      onchange: () => {
        const v = switcher.value;
        if (v === 'other') signInPage('');
        else if (v.startsWith('saved:')) {
          const s = others[Number(v.slice(6))];
          signIn(s.key, true).catch((err) => signInPage(refusedMessage(err)));
        }
      },
    },
    h('option', { value: '' }, `${account.name} (${account.slug})`),
    others.map((s, i) => h('option', { value: `saved:${i}` }, `Switch to ${s.account.name} (${s.account.slug})`)),
    h('option', { value: 'other' }, 'Sign in with another key…'));

    root.replaceChildren(
      h('a', { href: '#message-list', class: 'skip' }, 'Skip to the messages'),
      h('header', { class: 'top' },
        h('h1', {}, 'mailsink'),
        switcher,
        this.live,
        h('span', { class: 'spacer' }),
        h('button', { type: 'button', class: 'link', 'aria-haspopup': 'dialog', onclick: () => this.help.showModal() }, 'Shortcuts (?)'),
        h('button', { type: 'button', class: 'link', id: 'sign-out', onclick: () => this.signOut() }, 'Sign out')),
      h('main', { class: 'layout', id: 'main' },
        h('div', { class: 'list-pane' }, this.filters.el, this.list.el),
        this.view.el),
      this.announce,
      this.help);
    document.title = `${account.name} · mailsink`;

    client.events((ev) => this.event(ev), (on) => this.connected(on), this.abort.signal);
    this.reload();
    this.route();
  }

  close() {
    this.abort.abort();
    clearTimeout(this.countTimer);
  }

  say(text) {
    this.announce.textContent = text;
    clearTimeout(this.sayTimer);
    this.sayTimer = setTimeout(() => {
      this.announce.textContent = '';
    }, 4000);
  }

  unauthorized() {
    keys.setCurrentKey('');
    signInPage(refusedMessage({ status: 401 }));
  }

  /** Handles a failed request; 401 goes back to the sign-in page. */
  failed(err, what) {
    if (err.status === 401) this.unauthorized();
    else this.say(`${what}: ${err.message}`);
  }

  async signOut() {
    this.close();
    await this.client.signOut();
    keys.setCurrentKey('');
    signInPage('You are signed out.');
  }

  /** Shows the message named in the address (#/emails/ID), if any. */
  route() {
    const m = location.hash.match(/^#\/emails\/([0-9a-fA-F-]{36})$/);
    const id = m ? m[1].toLowerCase() : '';
    document.body.classList.toggle('has-message', !!id);
    this.list.setOpen(id);
    if (!id) {
      this.view.showEmpty();
      return;
    }
    if (id !== this.view.id) {
      this.view.show(id).catch((err) => this.failed(err, 'Could not open the message'));
    }
  }

  openCursor() {
    const id = this.list.cursorId();
    if (!id) return;
    if (location.hash === `#/emails/${id}`) this.route();
    else location.hash = `#/emails/${id}`;
    this.view.el.focus({ preventScroll: true });
  }

  /** Lists the first page for the filters again. */
  async reload() {
    const token = ++this.query;
    const filters = this.filters.values();
    // Events that arrive while the list is loading are applied to it
    // again afterwards: the answer may predate them.
    this.during = [];
    try {
      const data = await this.client.list(filters, undefined, PAGE);
      if (token !== this.query) return;
      const during = this.during;
      this.during = null;
      this.filters.showError('');
      this.list.setEmptyText(Object.keys(filters).length ? 'No message matches these filters.' : 'No messages yet. Send mail to the SMTP port and it shows up here at once.');
      this.list.setItems(data.items, data.items.length === PAGE);
      for (const ev of during) this.event(ev);
      this.list.setOpen(this.view.id || this.list.openId);
      this.countNow();
    } catch (err) {
      if (token !== this.query) return;
      this.during = null;
      if (err.status === 400) {
        this.filters.showError(err.message);
        this.list.setEmptyText('Fix the filters to see messages.');
        this.list.setItems([], false);
        this.list.setCount(0);
      } else this.failed(err, 'Could not list the messages');
    }
  }

  /** The next page, after the last email shown (the before cursor). */
  async loadMore() {
    const last = this.list.last();
    if (!last) return;
    const token = this.query;
    try {
      const data = await this.client.list(this.filters.values(), last.id, PAGE);
      if (token !== this.query) return;
      this.list.merge(data.items);
      this.list.setHasMore(data.items.length === PAGE);
    } catch (err) {
      if (err.status === 404) this.reload(); // the last email was deleted meanwhile
      else this.failed(err, 'Could not load more messages');
    }
  }

  /** Counts the matching emails soon, once for a burst of events. */
  countSoon() {
    clearTimeout(this.countTimer);
    this.countTimer = setTimeout(() => this.countNow(), 200);
  }

  async countNow() {
    const token = this.query;
    try {
      const data = await this.client.count(this.filters.values());
      if (token === this.query) this.list.setCount(data.count);
    } catch {
      this.list.setCount(null);
    }
  }

  connected(on, resumed) {
    this.live.textContent = on ? 'Live' : 'Reconnecting…';
    this.live.dataset.live = String(on);
    // After a drop the stream replays what was missed from Last-Event-ID
    // (or says resync); without an event id yet, a new list catches up.
    if (on && this.wasLive === false && this.everLive && !resumed) this.reload();
    // The first list may have been read before the stream opened: read it
    // again now that no change can fall between the two.
    if (on && !this.everLive) this.reload();
    this.everLive = this.everLive || on;
    this.wasLive = on;
  }

  /** Whether an email belongs in the part of the list that is loaded. */
  inLoadedRange(item) {
    const last = this.list.last();
    return this.list.more.hidden || !last || item.receivedAt >= last.receivedAt;
  }

  event(ev) {
    const { type, data } = ev;
    if (this.during) this.during.push(ev);
    if (type === 'unauthorized') {
      this.unauthorized();
      return;
    }
    if (type === 'resync') {
      this.reload();
      return;
    }
    if (!data) return;
    const item = data.item;
    switch (type) {
      case 'email.created':
        if (item && this.filters.matches(item) && this.inLoadedRange(item)) this.list.merge([item]);
        break;
      case 'email.updated':
        if (item) this.changed(item);
        break;
      case 'email.deleted':
        this.gone(data.emailId);
        break;
      default:
        return;
    }
    this.countSoon();
  }

  /** Takes a changed email into the list and the view. */
  changed(item) {
    if (!this.filters.matches(item)) this.list.remove(item.id);
    else if (!this.list.replaceItem(item) && this.inLoadedRange(item)) this.list.merge([item]);
    this.view.refresh(item);
  }

  gone(id) {
    this.list.remove(id);
    if (this.view.id === id) this.view.showGone();
  }

  /** Deletes the open message (or the one under the cursor). */
  removeOpen() {
    const id = this.view.id || this.list.cursorId();
    if (id) this.removeMany([id]);
  }

  async removeMany(ids) {
    if (!ids.length) return;
    const openId = this.view.id;
    const after = ids.includes(openId) ? (this.list.neighbour(openId, 1) || this.list.neighbour(openId, -1)) : '';
    const results = await Promise.allSettled(ids.map((id) => this.client.remove(id)));
    let deleted = 0;
    results.forEach((r, i) => {
      if (r.status === 'fulfilled' || r.reason.status === 404) {
        deleted++;
        this.list.remove(ids[i]);
      }
    });
    const failure = results.find((r) => r.status === 'rejected' && r.reason.status !== 404);
    if (failure) this.failed(failure.reason, 'Some messages were not deleted');
    else this.say(deleted === 1 ? 'Message deleted.' : `${deleted} messages deleted.`);
    this.list.update();
    this.countSoon();
    if (ids.includes(openId)) {
      location.hash = after ? `#/emails/${after}` : '#/';
      if (after) requestAnimationFrame(() => this.list.rows.get(after)?.querySelector('a').focus());
    }
  }

  async setStatus(ids, status) {
    const results = await Promise.allSettled(ids.map((id) => this.client.update(id, { status })));
    let n = 0;
    for (const r of results) {
      if (r.status === 'fulfilled') {
        n++;
        this.changed(r.value.item);
      }
    }
    const failure = results.find((r) => r.status === 'rejected');
    if (failure) this.failed(failure.reason, 'Some messages were not changed');
    else this.say(`${n} ${n === 1 ? 'message' : 'messages'} marked ${status}.`);
    this.list.toggleAll(false);
    this.countSoon();
  }

  /** Asks for recipients and releases the selected messages to them. */
  async releaseMany(ids) {
    const many = (n) => `${n} ${n === 1 ? 'message' : 'messages'}`;
    const to = await askRecipients(`the ${many(ids.length)} selected`);
    if (!to) return;
    this.say(`Releasing ${many(ids.length)}…`);
    const { released, error } = await releaseEach(this.client, ids, to);
    if (error) this.failed(error, released ? `${many(released)} released, then stopped` : 'Not released');
    else this.say(`${many(released)} released to ${to.join(', ')}.`);
  }

  async removeMatching() {
    const filters = this.filters.values();
    const n = this.list.total ?? this.list.items.length;
    const what = Object.keys(filters).length ? `all ${n} messages matching the filters` : `all ${n} messages of ${this.account.name}`;
    if (!(await confirmDialog(`Delete ${what}? This cannot be undone.`, 'Delete them'))) return;
    try {
      const data = await this.client.removeMatching(filters);
      this.say(`${data.deleted} ${data.deleted === 1 ? 'message' : 'messages'} deleted.`);
    } catch (err) {
      this.failed(err, 'Could not delete the messages');
    }
    this.reload();
  }
}
