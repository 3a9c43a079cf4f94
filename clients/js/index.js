// Client of the mailsink API (see the OpenAPI document at /v1/openapi.json).
// No dependencies: it needs a global fetch (Node 18+, browsers, Deno, Bun).

/** An error answer of the API: its status, message and, for a 400, field errors. */
export class MailsinkError extends Error {
  constructor(status, message, fieldErrors = {}, formErrors = []) {
    super(`mailsink: ${status} ${message}`);
    this.name = 'MailsinkError';
    this.status = status;
    this.fieldErrors = fieldErrors;
    this.formErrors = formErrors;
  }
}

const FILTERS = ['q', 'recipient', 'sender', 'status', 'subject', 'label', 'since'];
const MAX_WAIT_SECONDS = 60;

function query(params, names) {
  const q = new URLSearchParams();
  for (const name of names) {
    let v = params?.[name];
    if (v === undefined || v === null || v === '') continue;
    if (v instanceof Date) v = v.toISOString();
    q.set(name, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

export class Mailsink {
  /**
   * @param {{baseUrl: string, apiKey: string, fetch?: typeof fetch}} options
   */
  constructor({ baseUrl, apiKey, fetch: f = globalThis.fetch }) {
    if (!baseUrl) throw new TypeError('baseUrl is required');
    this.baseUrl = baseUrl.replace(/\/+$/, '');
    this.apiKey = apiKey;
    this.fetch = f;
  }

  /** A page of the account's emails, newest first. */
  async list(params = {}) {
    const q = query(params, ['limit', 'offset', 'before', ...FILTERS]);
    return (await this.#json('GET', `/v1/emails${q}`)).items;
  }

  /** How many emails the filters (and before) select. */
  async count(params = {}) {
    return (await this.#json('GET', `/v1/emails/count${query(params, ['before', ...FILTERS])}`)).count;
  }

  /**
   * Waits until an email matching the filter is stored and returns the
   * newest one, using the server-held wait (one held request after another).
   * Rejects with an error named TimeoutError after `timeout` ms (30000).
   */
  async waitForEmail(filter = {}, { timeout = 30000, signal } = {}) {
    const deadline = Date.now() + timeout;
    const timer = AbortSignal.timeout(timeout);
    const both = signal ? AbortSignal.any([signal, timer]) : timer;
    for (;;) {
      const left = deadline - Date.now();
      const wait = Math.min(MAX_WAIT_SECONDS, Math.max(1, Math.ceil(left / 1000)));
      const q = query({ ...filter, limit: 1, wait }, ['limit', 'wait', ...FILTERS]);
      let items;
      try {
        items = (await this.#json('GET', `/v1/emails${q}`, { signal: both })).items;
      } catch (err) {
        if (!timer.aborted || signal?.aborted) throw err;
        const e = new Error(`mailsink: no email matching ${JSON.stringify(filter)} within ${timeout} ms`);
        e.name = 'TimeoutError';
        throw e;
      }
      if (items.length > 0) return items[0];
    }
  }

  /** An email with its stored body. */
  async get(id) {
    return (await this.#json('GET', `/v1/emails/${encodeURIComponent(id)}`)).item;
  }

  /** The account's counts: total, unread, by status and by label. */
  async stats() {
    return this.#json('GET', '/v1/emails/stats');
  }

  /** Changes labels, notes, status, subject or read; returns the email. */
  async update(id, patch) {
    return (await this.#json('PATCH', `/v1/emails/${encodeURIComponent(id)}`, { body: patch })).item;
  }

  /** Deletes an email. */
  async delete(id) {
    await this.#request('DELETE', `/v1/emails/${encodeURIComponent(id)}`);
  }

  /** Deletes the emails the filter selects ({all: true} for all); returns how many. */
  async deleteMany(filter) {
    return (await this.#json('DELETE', `/v1/emails${query(filter, [...FILTERS, 'all'])}`)).deleted;
  }

  /** The raw message, as text (UTF-8 decoded). */
  async raw(id) {
    return (await this.#request('GET', `/v1/emails/${encodeURIComponent(id)}/raw`)).text();
  }

  /** The decoded content of an attachment (index from 0). */
  async attachment(id, index) {
    const resp = await this.#request('GET', `/v1/emails/${encodeURIComponent(id)}/attachments/${index}`);
    const cd = resp.headers.get('content-disposition') ?? '';
    const m = /filename\*?=(?:UTF-8'')?"?([^";]*)"?/i.exec(cd);
    return {
      contentType: resp.headers.get('content-type') ?? '',
      filename: m ? decodeURIComponent(m[1]) : null,
      data: new Uint8Array(await resp.arrayBuffer()),
    };
  }

  /** The links of an email: the HTML part's, then the text part's not already listed. */
  async links(id) {
    return (await this.#json('GET', `/v1/emails/${encodeURIComponent(id)}/links`)).items;
  }

  /** The one-time codes of an email, as typed ("123 456" in the message is "123456"). */
  async codes(id) {
    return (await this.#json('GET', `/v1/emails/${encodeURIComponent(id)}/codes`)).items.map((c) => c.value);
  }

  /**
   * A check of an email: 'html' (client compatibility), 'links' (what its
   * links and images answer), 'spam' (spamd's score) or 'auth' (DKIM, SPF,
   * DMARC). The result is kept with the email; refresh runs it again.
   */
  async check(id, name, { refresh = false } = {}) {
    const query = refresh ? '?refresh=1' : '';
    return this.#json('GET', `/v1/emails/${encodeURIComponent(id)}/checks/${encodeURIComponent(name)}${query}`);
  }

  /**
   * Sends an email, its raw source as stored, to real recipients through
   * the account's relay; resolves with the upstream's reply {code, text}.
   * Rejects with 400 for a recipient the relay does not allow (nothing is
   * sent), 409 without a relay, 429 past the account's rate, 502 when the
   * upstream refuses or cannot be reached.
   */
  async release(id, to) {
    return (await this.#json('POST', `/v1/emails/${encodeURIComponent(id)}/release`, { body: { to: [].concat(to) } })).item;
  }

  /**
   * Sends the emails a list query selects (one page: limit, at most 100)
   * through the account's relay; resolves with what became of each,
   * newest first: [{id, released, code, text}].
   */
  async releaseMany(params, to) {
    const q = query(params, ['limit', 'offset', 'before', ...FILTERS]);
    return (await this.#json('POST', `/v1/emails/release${q}`, { body: { to: [].concat(to) } })).items;
  }

  /** Stores a new email from JSON. */
  async create(email) {
    return (await this.#json('POST', '/v1/emails', { body: email })).item;
  }

  /** Stores a raw RFC 5322 message, one email per recipient. */
  async inbound(raw, { from, to } = {}) {
    const headers = { 'content-type': 'message/rfc822' };
    if (from) headers['x-envelope-from'] = from;
    if (to && to.length) headers['x-envelope-to'] = [].concat(to).join(',');
    return (await this.#json('POST', '/v1/inbound', { rawBody: raw, headers })).items;
  }

  async #json(method, path, opts) {
    return (await this.#request(method, path, opts)).json();
  }

  async #request(method, path, { body, rawBody, headers = {}, signal } = {}) {
    const init = { method, headers: { authorization: `Bearer ${this.apiKey}`, ...headers }, signal };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers['content-type'] = 'application/json';
    } else if (rawBody !== undefined) {
      init.body = rawBody;
    }
    const resp = await this.fetch(`${this.baseUrl}${path}`, init);
    if (resp.ok) return resp;
    let message = resp.statusText;
    let fieldErrors = {};
    let formErrors = [];
    try {
      const { error } = await resp.json();
      if (typeof error === 'string') {
        message = error;
      } else if (error && typeof error === 'object') {
        fieldErrors = error.fieldErrors ?? {};
        formErrors = error.formErrors ?? [];
        const parts = [...formErrors, ...Object.entries(fieldErrors).map(([k, v]) => `${k}: ${v.join(', ')}`)];
        if (parts.length) message = parts.join('; ');
      }
    } catch {
      // Not JSON: keep the status text.
    }
    throw new MailsinkError(resp.status, message, fieldErrors, formErrors);
  }
}
