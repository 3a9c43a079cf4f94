// Compiled by `npm run typecheck` (tsc --noEmit): the declarations are valid
// and read as a test writer uses them.
import { Mailsink, MailsinkError, type EmailSummary, type EmailLink } from '../index.js';

export async function example(): Promise<[EmailSummary, EmailLink[], string[], number]> {
  const ms = new Mailsink({ baseUrl: 'http://127.0.0.1:8025', apiKey: 'dev-key' });
  const email = await ms.waitForEmail({ recipient: 'a@example.com', since: new Date() }, { timeout: 1000 });
  const detail = await ms.get(email.id);
  const text: string | null = detail.body ? detail.body.text : null;
  await ms.update(email.id, { labels: ['x'], status: 'processed', notes: text });
  const page = await ms.list({ label: 'x', limit: 10, before: email.id });
  try {
    await ms.delete(page[0].id);
  } catch (e) {
    if (e instanceof MailsinkError && e.status === 404) return [email, [], [], 0];
  }
  return [email, await ms.links(email.id), await ms.codes(email.id), await ms.count({ status: 'received' })];
}

export async function checks(ms: Mailsink, id: string): Promise<[string[], boolean, number | null]> {
  const html = await ms.check(id, 'html');
  const spam = await ms.check(id, 'spam', { refresh: true });
  const links = await ms.check(id, 'links');
  const auth = await ms.check(id, 'auth');
  return [html.warnings.map((w) => w.feature), spam.isSpam && auth.dmarc.result === 'pass', links.items[0]?.status ?? null];
}

export async function release(ms: Mailsink, id: string): Promise<number> {
  const reply = await ms.release(id, ['stakeholder@example.com']);
  const results = await ms.releaseMany({ recipient: 'a@example.com', limit: 100 }, 'stakeholder@example.com');
  const codes: (number | null)[] = results.filter((r) => r.released).map((r) => r.code);
  return reply.code + codes.length;
}

export async function search(ms: Mailsink): Promise<[number, boolean, number]> {
  const unread = await ms.list({ q: 'from:shop is:unread "your order"', limit: 10 });
  const marked = unread.length > 0 ? (await ms.update(unread[0].id, { read: true })).read : false;
  const stats = await ms.stats();
  return [unread.length, marked, stats.unread + stats.labels.length];
}
