import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Mailsink, MailsinkError } from '../index.js';
import { startMailsink, sendSMTP } from './mailsink.js';

let server;
let ms;
before(async () => {
  server = await startMailsink();
  ms = new Mailsink({ baseUrl: server.baseUrl, apiKey: server.apiKey });
});
after(async () => { await server?.stop(); });

test('create, list, count, get, update, delete', async () => {
  const a = await ms.create({ recipient: 'a@js.test', sender: 'app@example.com', subject: 'Welcome', text: 'Hello' });
  const b = await ms.create({ recipient: 'b@js.test', sender: 'app@example.com', subject: 'Receipt' });
  assert.equal(a.status, 'received');
  const all = await ms.list({ sender: 'app@example.com' });
  assert.deepEqual(all.map((e) => e.id), [b.id, a.id]);
  assert.deepEqual((await ms.list({ sender: 'app@example.com', before: b.id, limit: 1 })).map((e) => e.id), [a.id]);
  assert.equal(await ms.count({ subject: 'welc' }), 1);
  const detail = await ms.get(a.id);
  assert.equal(detail.body.text, 'Hello');
  const updated = await ms.update(a.id, { labels: ['signup'], status: 'processed', notes: 'seen' });
  assert.deepEqual(updated.labels, ['signup']);
  assert.deepEqual((await ms.list({ label: 'signup', since: new Date(Date.now() - 60000) })).map((e) => e.id), [a.id]);
  await ms.delete(a.id);
  await assert.rejects(ms.get(a.id), (e) => e instanceof MailsinkError && e.status === 404);
  assert.equal(await ms.deleteMany({ recipient: 'b@js.test' }), 1);
});

test('errors carry the status and field errors', async () => {
  await assert.rejects(ms.list({ limit: 1000 }), (e) => {
    assert.ok(e instanceof MailsinkError);
    assert.equal(e.status, 400);
    assert.ok(e.fieldErrors.limit.length > 0);
    return true;
  });
  await assert.rejects(ms.deleteMany({}), (e) => e.status === 400);
  const wrong = new Mailsink({ baseUrl: server.baseUrl, apiKey: 'wrong' });
  await assert.rejects(wrong.list(), (e) => e.status === 401 && typeof e.message === 'string');
});

test('waitForEmail waits for a mail sent over SMTP; links and codes', async () => {
  const since = new Date(Date.now() - 1000);
  const waiting = ms.waitForEmail({ recipient: 'wait@js.test', since }, { timeout: 15000 });
  await sendSMTP(server.smtpPort, 'app@example.com', 'wait@js.test',
    'From: app@example.com\nTo: wait@js.test\nSubject: Your code: 482 913\nContent-Type: text/html\n\n' +
    '<p><a href="https://app.example/confirm?t=1">Confirm</a></p>\n');
  const email = await waiting;
  assert.equal(email.recipient, 'wait@js.test');
  assert.deepEqual(await ms.links(email.id), [{ url: 'https://app.example/confirm?t=1', text: 'Confirm' }]);
  assert.deepEqual(await ms.codes(email.id), ['482913']);
  assert.match(await ms.raw(email.id), /Subject: Your code: 482 913\r\n/);
});

test('checks of an email: html, links, auth, and spam without spamd', async () => {
  const email = await ms.create({
    recipient: 'checks@js.test', sender: 'news@shop.example',
    html: '<div style="display:flex"><video src="https://cdn.example/v.mp4"></video></div>',
  });
  const html = await ms.check(email.id, 'html');
  assert.ok(html.warnings.some((w) => w.feature === 'css-display-flex'));
  assert.ok(html.warnings.some((w) => w.feature === 'html-video'));
  const again = await ms.check(email.id, 'html');
  assert.equal(again.checkedAt, html.checkedAt);
  await assert.rejects(ms.check(email.id, 'spam'), (e) => e.status === 409 && /MAILSINK_SPAMD_ADDR/.test(e.message));
  await assert.rejects(ms.check(email.id, 'virus'), (e) => e.status === 404);
});

test('waitForEmail times out', async () => {
  const start = Date.now();
  await assert.rejects(ms.waitForEmail({ recipient: 'nobody@js.test' }, { timeout: 1200 }), { name: 'TimeoutError' });
  assert.ok(Date.now() - start >= 1000);
});

test('inbound and attachment', async () => {
  const raw = 'From: app@example.com\r\nTo: x@js.test\r\nSubject: Report\r\nMIME-Version: 1.0\r\n' +
    'Content-Type: multipart/mixed; boundary=XX\r\n\r\n--XX\r\nContent-Type: text/plain\r\n\r\nSee attached.\r\n' +
    '--XX\r\nContent-Type: text/csv\r\nContent-Disposition: attachment; filename="report.csv"\r\n\r\na,b\r\n--XX--\r\n';
  const items = await ms.inbound(raw, { from: 'bounce@example.com', to: ['y@js.test', 'z@js.test'] });
  assert.deepEqual(items.map((e) => e.recipient).sort(), ['y@js.test', 'z@js.test']);
  const att = await ms.attachment(items[0].id, 0);
  assert.equal(att.filename, 'report.csv');
  assert.match(att.contentType, /^text\/csv/);
  assert.equal(new TextDecoder().decode(att.data), 'a,b');
});

test('release sends a captured email to a real mail server, and releaseMany a page', async () => {
  const upstream = await startMailsink({ apiKey: 'upstream-key' });
  const source = await startMailsink({
    apiKey: 'releasing-key',
    accounts: `accounts:
  - slug: qa
    name: QA
    apiKeys: [releasing-key]
    relay: {host: 127.0.0.1, port: ${upstream.smtpPort}, tls: none, allowedRecipients: ['.*@review\\.test']}
`,
  });
  try {
    const src = new Mailsink({ baseUrl: source.baseUrl, apiKey: source.apiKey });
    const up = new Mailsink({ baseUrl: upstream.baseUrl, apiKey: upstream.apiKey });
    const raw = 'From: app@example.com\r\nSubject: Review me\r\n\r\n.Hello\r\n';
    const [a] = await src.inbound(raw, { from: 'app@example.com', to: 'signup@js.test' });
    const [b] = await src.inbound(raw, { from: 'app@example.com', to: 'signup@js.test' });

    const reply = await src.release(a.id, 'boss@review.test');
    assert.equal(reply.code, 250);
    const [arrived] = await up.list({ recipient: 'boss@review.test' });
    assert.equal(await up.raw(arrived.id), raw);
    await assert.rejects(src.release(a.id, 'someone@example.com'), (e) => e.status === 400 && e.fieldErrors.to.length === 1);

    const results = await src.releaseMany({ recipient: 'signup@js.test' }, ['team@review.test']);
    assert.deepEqual(results.map((r) => [r.id, r.released, r.code]), [[b.id, true, 250], [a.id, true, 250]]);
    assert.equal((await up.list({ recipient: 'team@review.test' })).length, 2);
  } finally {
    await source.stop();
    await upstream.stop();
  }
});

test('search, read state and the counts', async () => {
  const a = await ms.create({ recipient: 'search@js.test', sender: 'app@example.com', subject: 'Invoice 9', text: 'your order' });
  await ms.create({ recipient: 'search@js.test', sender: 'app@example.com', subject: 'Hello' });
  assert.deepEqual((await ms.list({ q: 'subject:invoice is:unread', recipient: 'search@js.test' })).map((e) => e.id), [a.id]);
  const read = await ms.update(a.id, { read: true });
  assert.equal(read.read, true);
  assert.equal(await ms.count({ q: 'is:unread', recipient: 'search@js.test' }), 1);
  const stats = await ms.stats();
  assert.ok(stats.total >= 2 && typeof stats.unread === 'number' && Array.isArray(stats.labels));
  await assert.rejects(ms.list({ q: 'is:maybe' }), (e) => e.status === 400 && e.fieldErrors.q.length > 0);
});
