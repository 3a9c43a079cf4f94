// The dashboard: sign-in, then the sidebar, the search box and the message
// list beside the message view, kept live by the account's event stream.
import { h, messages } from './dom.js';
import { Client } from './api.js';
import * as keys from './keys.js';
import { showSignIn, refusedMessage } from './signin.js';
import { SearchBox, matches } from './search.js';
import { Sidebar } from './sidebar.js';
import { MessageList } from './message-list.js';
import { MessageView } from './message-view.js';
import { askRecipients, releaseEach } from './release.js';
import { helpDialog, listen } from './shortcuts.js';
import { UndoBar } from './undo.js';
import { applyTheme, settingsMenu } from './settings.js';
import { showUnread, notifyNew } from './notifications.js';

const PAGE = 50;
const root = document.getElementById('app');
/** The signed-in dashboard, or null on the sign-in page. */
let current = null;

/** Whether opening a message marks it read: the page's mailsink-mark-read setting. */
const MARK_READ = document.querySelector('meta[name="mailsink-mark-read"]')?.content !== 'false';

applyTheme();
listen({
  next: () => current && current.list.moveCursor(1),
  previous: () => current && current.list.moveCursor(-1),
  open: () => current && current.openCursor(),
  remove: () => current && current.removeOpen(),
  undo: () => current && current.undo.finish('undo'),
  toggleRead: () => current && current.toggleRead(),
  search: () => current && current.search.focus(),
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
  document.body.classList.remove('has-message', 'sidebar-open');
  showUnread(null, 'Sign in · mailsink');
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
    this.statsTimer = 0;
    this.refreshTimer = 0;
    this.wasLive = false;
    this.during = null;
    /** Emails deleted in the page whose DELETE waits for the undo to pass. */
    this.pending = new Set();
    /** Whether the server has the stats endpoint (and so read state and search); null until asked. */
    this.stats = null;
    this.title = `${account.name} · mailsink`;

    this.search = new SearchBox(() => this.reload());
    this.sidebar = new Sidebar((q) => {
      this.toggleSidebar(false);
      // A drawer that closes takes the focus out with it, at once: left
      // on a hidden link, the next Enter would choose it again.
      if (matchMedia('(max-width: 1099px)').matches) this.sidebarToggle.focus();
      this.search.set(q);
      if (location.hash !== '#/' && matchMedia('(max-width: 800px)').matches) location.hash = '#/';
    }, () => {
      this.toggleSidebar(false);
      this.sidebarToggle.focus();
    });
    this.list = new MessageList({
      onLoadMore: () => this.loadMore(),
      onDelete: (ids) => this.removeMany(ids),
      onSetStatus: (ids, status) => this.update(ids, { status }, `marked ${status}`).then(() => this.list.toggleAll(false)),
      onSetRead: (ids, read) => this.update(ids, { read }, read ? 'marked read' : 'marked unread').then(() => this.list.toggleAll(false)),
      onRelease: (ids) => this.releaseMany(ids),
      onDeleteMatching: () => this.removeMatching(),
    });
    this.view = new MessageView(client, {
      onChanged: (item) => this.changed(item),
      onDelete: (id) => this.removeMany([id]),
      onClose: () => {
        location.hash = '#/';
      },
      onStep: (delta) => this.step(delta),
      neighbours: (id) => ({ newer: !!this.list.neighbour(id, -1), older: !!this.list.neighbour(id, 1) || !this.list.more.hidden }),
      onSetRead: (ids, read) => this.update(ids, { read }, read ? 'marked read' : 'marked unread'),
      onUnauthorized: () => this.unauthorized(),
    });
    this.help = helpDialog();
    this.undo = new UndoBar();
    this.live = h('span', { class: 'live', id: 'live', role: 'status' }, 'Connecting…');
    this.live.title = 'Whether new mail shows up here at once';
    this.announce = h('p', { class: 'announce', role: 'status', id: 'announce' });
    this.sidebarToggle = h('button', {
      type: 'button', class: 'sidebar-toggle', id: 'sidebar-toggle', 'aria-controls': 'sidebar', 'aria-expanded': 'false',
      onclick: () => this.toggleSidebar(),
    }, h('span', { 'aria-hidden': 'true' }, '☰'), h('span', { class: 'toggle-text' }, ' Mailboxes'));

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
        this.sidebarToggle,
        h('h1', {}, 'mailsink'),
        switcher,
        this.search.el,
        this.live,
        h('span', { class: 'top-actions' },
          settingsMenu(),
          h('button', { type: 'button', class: 'link shortcuts-button', 'aria-haspopup': 'dialog', onclick: () => this.help.showModal() }, 'Shortcuts (?)'),
          h('button', { type: 'button', class: 'link', id: 'sign-out', onclick: () => this.signOut() }, 'Sign out'))),
      h('main', { class: 'layout', id: 'main' },
        this.sidebar.el,
        h('div', { class: 'list-pane' }, this.list.el),
        this.view.el),
      this.undo.el,
      this.announce,
      this.help);
    document.title = this.title;

    // A click into the preview frame gives it the keyboard, and keys typed
    // there never reach the page. Taking the keyboard back at once would
    // cancel the click (a link) or a selection about to be copied: it comes
    // back to the message when the pointer comes back to the page, or the
    // person back to this tab (from the one a link opened).
    const giveBack = (ev) => {
      if (document.activeElement?.id === 'preview-frame' && ev.target?.id !== 'preview-frame') this.view.el.focus({ preventScroll: true });
    };
    document.addEventListener('pointermove', giveBack, { signal: this.abort.signal, passive: true });
    window.addEventListener('focus', giveBack, { signal: this.abort.signal });
    // A deletion waiting for its undo goes when the page does.
    window.addEventListener('pagehide', () => {
      this.leaving = true;
      this.undo.finish('go');
    }, { signal: this.abort.signal });

    client.events((ev) => this.event(ev), (on, resumed) => this.connected(on, resumed), this.abort.signal);
    this.reload();
    this.route();
  }

  close() {
    this.undo.finish('go');
    this.abort.abort();
    clearTimeout(this.countTimer);
    clearTimeout(this.statsTimer);
    clearTimeout(this.refreshTimer);
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

  /** Opens or closes the sidebar where it is a drawer (narrow screens). */
  toggleSidebar(open = !document.body.classList.contains('sidebar-open')) {
    document.body.classList.toggle('sidebar-open', open);
    this.sidebarToggle.setAttribute('aria-expanded', String(open));
    if (open) this.sidebar.el.querySelector('a')?.focus();
  }

  /** Shows the message named in the address (#/emails/ID), if any, and marks it read. */
  route() {
    const m = location.hash.match(/^#\/emails\/([0-9a-fA-F-]{36})$/);
    const id = m ? m[1].toLowerCase() : '';
    document.body.classList.toggle('has-message', !!id);
    this.list.setOpen(id);
    if (!id) {
      this.view.showEmpty();
      return;
    }
    if (id === this.view.id) return;
    this.view.show(id).then((item) => {
      if (item && MARK_READ && item.read === false) this.update([id], { read: true }, '', true);
    }).catch((err) => this.failed(err, 'Could not open the message'));
  }

  openCursor() {
    const id = this.list.cursorId();
    if (!id) return;
    if (location.hash === `#/emails/${id}`) this.route();
    else location.hash = `#/emails/${id}`;
    this.view.el.focus({ preventScroll: true });
  }

  /** Opens the newer (-1) or older (1) message than the open one, loading more when needed. */
  async step(delta) {
    const id = this.view.id;
    if (!id) return;
    let next = this.list.neighbour(id, delta);
    if (!next && delta > 0 && !this.list.more.hidden) {
      await this.loadMore();
      next = this.list.neighbour(id, delta);
    }
    if (!next) return;
    location.hash = `#/emails/${next}`;
    this.list.focusRow(next);
  }

  /** The search's answer to whether item belongs in the list: true, false, or null (ask the server). */
  fits(item) {
    if (!this.search.current) return true;
    const terms = this.search.terms();
    // A search that does not parse lists nothing, only its error.
    if (terms === null) return false;
    return matches(terms, item);
  }

  /** Lists the first page for the search again. */
  async reload() {
    const token = ++this.query;
    const q = this.search.current;
    this.sidebar.setQuery(q);
    clearTimeout(this.refreshTimer);
    // Events that arrive while the list is loading are applied to it
    // again afterwards: the answer may predate them.
    this.during = [];
    this.statsNow();
    try {
      const data = await this.client.list(q, undefined, PAGE);
      if (token !== this.query) return;
      const during = this.during;
      this.during = null;
      this.search.showError('');
      this.list.setEmptyText(q ? 'No message matches this search.' : 'No messages yet. Send mail to the SMTP port and it shows up here at once.');
      this.list.setItems(data.items.filter((e) => !this.pending.has(e.id)), data.items.length === PAGE);
      for (const ev of during) this.event(ev);
      this.list.setOpen(this.view.id || this.list.openId);
      this.view.updateSteps();
      this.countNow();
    } catch (err) {
      if (token !== this.query) return;
      this.during = null;
      if (err.status === 400) {
        const q = err.body?.error?.fieldErrors?.q;
        this.search.showError(q ? `This search does not work: ${[].concat(q).join(', ')}` : err.message);
        this.list.setEmptyText('Fix the search to see messages.');
        this.list.setItems([], false);
        this.list.setCount(0);
      } else this.failed(err, 'Could not list the messages');
    }
  }

  /** Reads the first page of the search again soon and takes it into the list. */
  refreshSoon(delay = 300) {
    if (this.refreshTimer) return;
    this.refreshTimer = setTimeout(async () => {
      this.refreshTimer = 0;
      const token = this.query;
      try {
        const data = await this.client.list(this.search.current, undefined, PAGE);
        if (token !== this.query) return;
        this.list.reconcile(data.items.filter((e) => !this.pending.has(e.id)), data.items.length === PAGE);
        this.view.updateSteps();
      } catch {
        // The next event or reload catches up.
      }
    }, delay);
  }

  /** The next page, after the last email shown (the before cursor). */
  async loadMore() {
    const last = this.list.last();
    if (!last) return;
    const token = this.query;
    try {
      const data = await this.client.list(this.search.current, last.id, PAGE);
      if (token !== this.query) return;
      this.list.merge(data.items.filter((e) => !this.pending.has(e.id)));
      this.list.setHasMore(data.items.length === PAGE);
      this.view.updateSteps();
    } catch (err) {
      if (err.status === 404) this.reload(); // the last email was deleted meanwhile
      else this.failed(err, 'Could not load more messages');
    }
  }

  /** Counts the matching emails and the account's stats soon, once for a burst of events. */
  countSoon() {
    clearTimeout(this.countTimer);
    this.countTimer = setTimeout(() => {
      this.countNow();
      this.statsNow();
    }, 200);
  }

  /**
   * Counts the matching emails. settle, when given, runs just before the
   * answer is shown, in the same step: a deletion stops leaving its emails
   * out of the count only when a count without them arrives.
   */
  async countNow(settle) {
    const token = this.query;
    const seq = this.countSeq = (this.countSeq || 0) + 1;
    let count = null;
    try {
      count = (await this.client.count(this.search.current)).count;
    } catch {
      // Shown as unknown.
    }
    settle?.();
    // An answer to an earlier question, or to another search, is not shown.
    if (token === this.query && seq === this.countSeq) this.list.setCount(count);
    else if (settle) this.list.update();
  }

  /** Reads the sidebar's counts; a server without them (404) hides them. */
  async statsNow() {
    try {
      const stats = await this.client.stats();
      this.stats = true;
      this.sidebar.setStats(stats);
      this.list.setReadable(true);
      showUnread(stats.unread, this.title);
    } catch (err) {
      if (err.status !== 404) return; // the next change asks again
      this.stats = false;
      this.sidebar.setStats(null);
      this.list.setReadable(false);
      showUnread(null, this.title);
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
        if (!item || this.pending.has(item.id)) break;
        if (!this.during) notifyNew(item);
        this.arrived(item);
        break;
      case 'email.updated':
        if (item && !this.pending.has(item.id)) this.changed(item);
        break;
      case 'email.deleted':
        this.gone(data.emailId);
        break;
      default:
        return;
    }
    this.countSoon();
  }

  /** Takes new mail into the list when the search wants it. */
  arrived(item) {
    const fits = this.fits(item);
    if (fits === true && this.inLoadedRange(item)) this.list.merge([item]);
    else if (fits === null) this.refreshSoon();
    // The server reads the body (sender's name, snippet, attachments) just
    // after the mail is stored: read the row again then.
    if (item.snippet === null && fits !== false) this.refreshSoon(1500);
  }

  /** Takes a changed email into the list and the view. */
  changed(item) {
    const fits = this.fits(item);
    if (fits === false && item.id !== this.view.id) this.list.remove(item.id);
    else if (!this.list.replaceItem(item) && this.inLoadedRange(item)) {
      if (fits === true) this.list.merge([item]);
      else this.refreshSoon();
    }
    this.view.refresh(item);
  }

  gone(id) {
    this.list.remove(id);
    if (this.view.id === id) this.view.showGone();
    this.view.updateSteps();
  }

  /** Marks the open message read or unread. */
  toggleRead() {
    const e = this.view.email;
    if (e && typeof e.read === 'boolean') this.update([e.id], { read: !e.read }, e.read ? 'marked unread' : 'marked read');
  }

  /** Deletes the open message (or the one under the cursor). */
  removeOpen() {
    const id = this.view.id || this.list.cursorId();
    if (id) this.removeMany([id]);
  }

  /**
   * Deletes emails with a way back: they leave the list at once, and the
   * DELETE waits while the undo bar offers to bring them back.
   */
  removeMany(ids) {
    ids = ids.filter((id) => !this.pending.has(id));
    if (!ids.length) return;
    this.undo.finish('go'); // an earlier deletion goes now
    const openId = this.view.id;
    const gone = new Set(ids);
    let after = '';
    if (gone.has(openId)) {
      const i = this.list.items.findIndex((e) => e.id === openId);
      const rest = (from, step) => {
        for (let j = from; j >= 0 && j < this.list.items.length; j += step) if (!gone.has(this.list.items[j].id)) return this.list.items[j].id;
        return '';
      };
      after = rest(i + 1, 1) || rest(i - 1, -1);
    }
    const items = ids.map((id) => this.list.get(id)).filter(Boolean);
    for (const id of ids) {
      this.pending.add(id);
      this.list.remove(id);
    }
    this.hidden();
    if (gone.has(openId)) {
      location.hash = after ? `#/emails/${after}` : '#/';
      if (after) requestAnimationFrame(() => this.list.focusRow(after));
    }
    this.undo.offer(ids.length === 1 ? 'Message deleted.' : `${messages(ids.length)} deleted.`,
      () => this.restore(ids, items, gone.has(openId) ? openId : ''),
      () => this.commitDelete(ids));
  }

  /** Tells the list how many counted emails wait to be deleted. */
  hidden() {
    this.list.hiddenCount = this.pending.size;
    this.list.update();
  }

  /** Undoes a deletion: the emails come back, and the open one opens again. */
  restore(ids, items, openId) {
    for (const id of ids) this.pending.delete(id);
    this.list.merge(items);
    this.hidden();
    if (openId) location.hash = `#/emails/${openId}`;
    this.view.updateSteps();
    this.say(ids.length === 1 ? 'Message restored.' : `${messages(ids.length)} restored.`);
  }

  async commitDelete(ids) {
    const keepalive = !!this.leaving;
    const results = await Promise.allSettled(ids.map((id) => this.client.remove(id, keepalive)));
    // The count the list has was taken with these emails: they stay left
    // out of it until the server counts without them.
    await this.countNow(() => {
      for (const id of ids) this.pending.delete(id);
      this.list.hiddenCount = this.pending.size;
    });
    const failure = results.find((r) => r.status === 'rejected' && r.reason.status !== 404);
    if (failure) {
      this.failed(failure.reason, 'Some messages were not deleted');
      this.reload();
    }
    this.countSoon();
  }

  /** PATCHes the emails with changes and takes the answers; says done unless quiet. */
  async update(ids, changes, done, quiet = false) {
    const results = await Promise.allSettled(ids.map((id) => this.client.update(id, changes)));
    let n = 0;
    for (const r of results) {
      if (r.status === 'fulfilled') {
        n++;
        this.changed(r.value.item);
      }
    }
    const failure = results.find((r) => r.status === 'rejected');
    if (failure) this.failed(failure.reason, 'Some messages were not changed');
    else if (!quiet) this.say(`${messages(n)} ${done}.`);
    this.countSoon();
  }

  /** Asks for recipients and releases the selected messages to them. */
  async releaseMany(ids) {
    const to = await askRecipients(`the ${messages(ids.length)} selected`);
    if (!to) return;
    this.say(`Releasing ${messages(ids.length)}…`);
    const { released, error } = await releaseEach(this.client, ids, to);
    if (error) this.failed(error, released ? `${messages(released)} released, then stopped` : 'Not released');
    else this.say(`${messages(released)} released to ${to.join(', ')}.`);
  }

  async removeMatching() {
    const q = this.search.current;
    // The number the list's count shows, deletions still undoable left out.
    const n = this.list.count();
    const what = q ? `all ${messages(n)} matching “${q}”` : `all ${messages(n)} of ${this.account.name}`;
    if (!(await confirmDialog(`Delete ${what}? This cannot be undone.`, 'Delete them'))) return;
    try {
      const data = await this.client.removeMatching(q);
      this.say(`${messages(data.deleted)} deleted.`);
    } catch (err) {
      this.failed(err, 'Could not delete the messages');
    }
    this.reload();
  }
}
