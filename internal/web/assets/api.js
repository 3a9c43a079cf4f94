// The dashboard's client of the /v1 API: the key travels in the
// Authorization header only, never in a URL.

/** An answer of the API that is not a success. */
export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

/** Turns the API's error envelope into one readable line. */
function describe(status, body) {
  const err = body && body.error;
  if (typeof err === 'string') return err;
  if (err && typeof err === 'object') {
    const parts = [...(err.formErrors || [])];
    for (const [field, msgs] of Object.entries(err.fieldErrors || {})) {
      parts.push(`${field}: ${[].concat(msgs).join(', ')}`);
    }
    if (parts.length) return parts.join('; ');
  }
  return `the server answered ${status}`;
}

export class Client {
  constructor(key) {
    this.key = key;
    /** The path under which the account's session cookie reads (previews, downloads). */
    this.base = '';
  }

  headers(extra = {}) {
    return { Authorization: `Bearer ${this.key}`, ...extra };
  }

  /** Sends one request and returns the decoded JSON answer (null for 204). */
  async request(method, path, { query, body, keepalive } = {}) {
    let url = path;
    if (query) {
      const params = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== '') params.set(k, v);
      const s = params.toString();
      if (s) url += `?${s}`;
    }
    const init = { method, headers: this.headers(), cache: 'no-store', keepalive: !!keepalive };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const res = await fetch(url, init);
    if (res.status === 204) return null;
    let data = null;
    try {
      data = await res.json();
    } catch {
      data = null;
    }
    if (!res.ok) throw new ApiError(res.status, describe(res.status, data), data);
    return data;
  }

  /**
   * Mints the account's dashboard session cookie (the one session of this
   * account in this browser, shared by its tabs) and returns the key's account.
   */
  async signIn() {
    const data = await this.request('POST', '/ui/session');
    this.base = data.base;
    return data.account;
  }

  /**
   * Makes sure the session cookie works before the page shows a preview or
   * offers a download, and mints a new one when it was lost (a restart, an
   * expiry, another tab signing out). Rejects when mailsink cannot be reached.
   */
  async ensureSession() {
    const res = await fetch(`${this.base}session`, { cache: 'no-store' });
    if (res.status === 401) {
      await this.signIn();
      return;
    }
    if (res.status !== 204) throw new ApiError(res.status, `the dashboard session could not be checked (the server answered ${res.status})`, null);
  }

  async signOut() {
    try {
      await this.request('DELETE', `${this.base}session`);
    } catch {
      // The cookie expires by itself.
    }
  }

  /** The emails matching the search q, newest first, after the email before. */
  list(q, before, limit = 50) {
    return this.request('GET', '/v1/emails', { query: { q, before, limit } });
  }

  count(q) {
    return this.request('GET', '/v1/emails/count', { query: { q } });
  }

  /** The account's counts: total, unread, per status and per label. */
  stats() {
    return this.request('GET', '/v1/emails/stats');
  }

  get(id) {
    return this.request('GET', `/v1/emails/${encodeURIComponent(id)}`);
  }

  update(id, changes) {
    return this.request('PATCH', `/v1/emails/${encodeURIComponent(id)}`, { body: changes });
  }

  /** Deletes an email; keepalive lets the request outlive the page. */
  remove(id, keepalive = false) {
    return this.request('DELETE', `/v1/emails/${encodeURIComponent(id)}`, { keepalive });
  }

  /** Deletes every email matching the search q; with none, all of them. */
  removeMatching(q) {
    return this.request('DELETE', '/v1/emails', { query: q ? { q } : { all: 'true' } });
  }

  /** Sends the email, as received, to the addresses of to through the account's relay. */
  release(id, to) {
    return this.request('POST', `/v1/emails/${encodeURIComponent(id)}/release`, { body: { to } });
  }

  links(id) {
    return this.request('GET', `/v1/emails/${encodeURIComponent(id)}/links`);
  }

  /** A check of an email (html, links, spam, auth); refresh runs it again. */
  check(id, name, refresh = false) {
    return this.request('GET', `/v1/emails/${encodeURIComponent(id)}/checks/${name}`, { query: { refresh: refresh ? '1' : '' } });
  }

  /**
   * Reads the account's event stream until signal aborts, calling onEvent
   * with {type, data} for each event. EventSource cannot send the
   * Authorization header, so the stream is read with fetch; after a drop it
   * reconnects with Last-Event-ID. onStatus(connected, resumed) tells the
   * page; resumed is true when the stream replays what was missed.
   */
  async events(onEvent, onStatus, signal) {
    let lastId = '';
    let retry = 1000;
    while (!signal.aborted) {
      try {
        const headers = this.headers({ Accept: 'text/event-stream' });
        if (lastId) headers['Last-Event-ID'] = lastId;
        const res = await fetch('/v1/events', { headers, signal, cache: 'no-store' });
        if (res.status === 401) {
          onEvent({ type: 'unauthorized' });
          return;
        }
        if (!res.ok || !res.body) throw new Error(`events: ${res.status}`);
        onStatus(true, !!lastId);
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = '';
        let event = { type: 'message', data: '', id: '' };
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let nl;
          while ((nl = buffer.indexOf('\n')) >= 0) {
            const line = buffer.slice(0, nl).replace(/\r$/, '');
            buffer = buffer.slice(nl + 1);
            if (line === '') {
              if (event.id) lastId = event.id;
              if (event.data) {
                let data = null;
                try {
                  data = JSON.parse(event.data);
                } catch {
                  data = null;
                }
                onEvent({ type: event.type, data });
              }
              event = { type: 'message', data: '', id: '' };
              continue;
            }
            if (line.startsWith(':')) continue;
            const colon = line.indexOf(':');
            const field = colon < 0 ? line : line.slice(0, colon);
            const val = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
            if (field === 'data') event.data += (event.data ? '\n' : '') + val;
            else if (field === 'event') event.type = val;
            else if (field === 'id') event.id = val;
            else if (field === 'retry' && /^\d+$/.test(val)) retry = Math.min(Number(val), 5000);
          }
        }
      } catch (err) {
        if (signal.aborted) return;
      }
      onStatus(false);
      await new Promise((resolve) => setTimeout(resolve, retry));
    }
  }
}
