// An AI agent's MCP client, the official TypeScript SDK (@modelcontextprotocol/sdk),
// uses mailsink's /mcp as a third-party client would: configured from
// docs/agents.md, it lists the tools, waits for a sign-up code that arrives
// over SMTP (nodemailer), uses every tool, cancels a held wait, and sees only
// its own account. The SDK also checks each structured answer against the
// tool's output schema.
//
// Run: npm ci && npm test (in e2e/node). It builds the mailsink binary with
// `go build` unless MAILSINK_BIN names one.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import nodemailer from 'nodemailer';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { stop } from './stop.mjs';

const repo = fileURLToPath(new URL('../..', import.meta.url));
const acme = 'node-mcp-acme-key';
const globex = 'node-mcp-globex-key';
let proc, dir, http, smtpPort, logs = '';
let exited; // resolves when mailsink has exited

const clients = [];

function freePort() {
  return new Promise((ok, fail) => {
    const srv = createServer();
    srv.on('error', fail);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => ok(port));
    });
  });
}

// poll calls check every 20 ms until it returns a truthy value.
async function poll(what, check, deadlineMs = 10_000) {
  const end = Date.now() + deadlineMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}\n${logs}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mailsink-node-mcp-'));
  let bin = process.env.MAILSINK_BIN;
  if (!bin) {
    bin = join(dir, 'mailsink');
    execFileSync('go', ['build', '-o', bin, './cmd/mailsink'], { cwd: repo, stdio: 'inherit' });
  }
  const accounts = join(dir, 'accounts.yaml');
  writeFileSync(accounts, `accounts:
  - {slug: acme, name: Acme, apiKeys: [${acme}], domains: [acme.test]}
  - {slug: globex, name: Globex, apiKeys: [${globex}], domains: [globex.test]}
`);
  const httpPort = await freePort();
  smtpPort = await freePort();
  http = `http://127.0.0.1:${httpPort}`;
  proc = spawn(bin, ['serve'], {
    env: {
      PATH: process.env.PATH,
      MAILSINK_DATA_DIR: join(dir, 'data'),
      MAILSINK_HTTP_ADDR: `127.0.0.1:${httpPort}`,
      MAILSINK_SMTP_ADDR: `127.0.0.1:${smtpPort}`,
      MAILSINK_ACCOUNTS_FILE: accounts,
      // One held request per account: a held wait shows as a 429 for the next.
      MAILSINK_MAX_HELD_PER_ACCOUNT: '1',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  exited = new Promise((r) => proc.once('exit', r));
  proc.stdout.on('data', (b) => { logs = (logs + b).slice(-65536); });
  proc.stderr.on('data', (b) => { logs = (logs + b).slice(-65536); });
  await poll('mailsink to be ready', async () => {
    if (proc.exitCode !== null) throw new Error(`mailsink exited (${proc.exitCode}):\n${logs}`);
    try { return (await fetch(`${http}/readyz`)).status === 200; } catch { return false; }
  }, 30_000);
});

after(async () => {
  for (const c of clients) await c.close().catch(() => {});
  try {
    await stop(proc, exited, () => logs);
  } finally {
    if (dir) rmSync(dir, { recursive: true, force: true });
  }
});

// agentConfig is docs/agents.md's HTTP configuration for this mailsink and key.
function agentConfig(key) {
  const page = readFileSync(join(repo, 'docs', 'agents.md'), 'utf8');
  for (const block of page.split('```json\n').slice(1)) {
    const json = block.split('```')[0];
    if (!json.includes('"mcpServers"')) continue;
    const server = JSON.parse(json.replaceAll('http://localhost:8025', http).replaceAll('YOUR_API_KEY', key)).mcpServers.mailsink;
    if (server.type === 'http') return server;
  }
  throw new Error('docs/agents.md has no HTTP configuration');
}

async function connect(key) {
  const cfg = agentConfig(key);
  const client = new Client({ name: 'mailsink-node-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(cfg.url), { requestInit: { headers: cfg.headers } }));
  clients.push(client);
  return client;
}

// call calls a tool that must succeed and returns its structured output.
async function call(client, name, args = {}, options = {}) {
  const res = await client.callTool({ name, arguments: args }, undefined, options);
  assert.ok(!res.isError, `${name}: ${JSON.stringify(res.content)}`);
  assert.match(res.content[0].text, /<email-data>\n/);
  return res.structuredContent;
}

// fails calls a tool that must answer a tool error and returns its text.
async function fails(client, name, args) {
  const res = await client.callTool({ name, arguments: args });
  assert.ok(res.isError, `${name}(${JSON.stringify(args)}) succeeded: ${JSON.stringify(res.content)}`);
  return res.content[0].text;
}

function send(to, subject, text, html) {
  return nodemailer.createTransport({ host: '127.0.0.1', port: smtpPort, secure: false, ignoreTLS: true })
    .sendMail({ from: 'app@example.com', to, subject, text, html });
}

// listWait answers the status of a list request with wait for the key's
// account: 429 while a held tool call takes the account's only place.
async function listWait(key) {
  const resp = await fetch(`${http}/v1/emails?wait=1&limit=1`, { headers: { Authorization: `Bearer ${key}` } });
  await resp.arrayBuffer();
  return resp.status;
}

let signUp; // the sign-up email's id

test('an agent connects and lists the tools', async () => {
  const client = await connect(acme);
  assert.equal(client.getServerVersion().name, 'mailsink');
  const { tools } = await client.listTools();
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  assert.deepEqual(Object.keys(byName).sort(), ['delete_emails', 'get_codes', 'get_email', 'get_links', 'mark_email',
    'search_emails', 'wait_for_code', 'wait_for_email', 'wait_for_link']);
  for (const name of ['search_emails', 'get_email', 'wait_for_code', 'wait_for_link', 'get_codes', 'get_links']) {
    assert.equal(byName[name].annotations.readOnlyHint, true, name);
  }
  assert.equal(byName.delete_emails.annotations.destructiveHint, true);
  assert.ok(byName.search_emails.inputSchema.properties.q);
  assert.equal(byName.wait_for_code.inputSchema.properties.timeoutSeconds.maximum, 60);
});

test('wait_for_code answers when the sign-up email arrives over SMTP', async () => {
  const client = await connect(acme);
  // A first email, so that the probing list requests below answer at once.
  await send('seed@acme.test', 'Seed', 'nothing here');
  const waiting = call(client, 'wait_for_code', { recipient: 'signup@acme.test', timeoutSeconds: 30 });
  await poll('the wait to be held', async () => (await listWait(acme)) === 429);
  await send('signup@acme.test', 'Confirm your sign-up', 'Your verification code is 482913.',
    '<p>Your verification code is <b>482913</b>. <a href="https://app.example/confirm?t=1">Confirm</a></p>');
  const out = await waiting;
  assert.equal(out.code, '482913');
  assert.deepEqual(out.codes, ['482913']);
  assert.equal(out.email.recipient, 'signup@acme.test');
  assert.equal(out.emailId, out.email.id);
  signUp = out.emailId;
});

test('every other tool works on the email', async () => {
  const client = await connect(acme);
  const links = await call(client, 'wait_for_link', { recipient: 'signup@acme.test', since: '2000-01-01T00:00:00Z', linkContains: '/confirm' });
  assert.equal(links.emailId, signUp);
  assert.deepEqual(links.links, [{ url: 'https://app.example/confirm?t=1', text: 'Confirm' }]);
  assert.equal((await call(client, 'wait_for_email', { recipient: 'signup@acme.test', since: '2000-01-01T00:00:00Z' })).emailId, signUp);
  assert.deepEqual((await call(client, 'get_codes', { id: signUp })).codes, ['482913']);
  assert.equal((await call(client, 'get_links', { id: signUp })).links.length, 1);
  const view = await call(client, 'get_email', { id: signUp });
  assert.match(view.text, /Your verification code is 482913\./);
  assert.match(view.htmlText, /Your verification code is 482913\./);
  assert.equal(view.headers.subject, 'Confirm your sign-up');
  const found = await call(client, 'search_emails', { recipient: 'signup@acme.test', limit: 5 });
  assert.deepEqual(found.items.map((e) => e.id), [signUp]);
  const marked = await call(client, 'mark_email', { id: signUp, status: 'processed', labels: ['used'] });
  assert.equal(marked.email.status, 'processed');
  assert.deepEqual(marked.email.labels, ['used']);
  const resource = await client.readResource({ uri: `mailsink://emails/${signUp}` });
  assert.equal(resource.contents.length, 2);
  assert.match(resource.contents[0].text, /not instructions/);
  assert.equal(resource.contents[1].mimeType, 'message/rfc822');
  const deleted = await call(client, 'delete_emails', { label: 'used' });
  assert.deepEqual(deleted.ids, [signUp]);
  assert.equal((await call(client, 'search_emails', { recipient: 'signup@acme.test' })).items.length, 0);
});

test('bad input is a tool error that says what is wrong', async () => {
  const client = await connect(acme);
  assert.match(await fails(client, 'get_email', { id: 'nope' }), /id must be an email id/);
  assert.match(await fails(client, 'get_email', { id: '0190b6d2-7c3e-7a1b-8c2d-1234567890ab' }), /no email with id/);
  assert.match(await fails(client, 'wait_for_code', { recipient: 'a@acme.test', timeoutSeconds: 120 }), /timeoutSeconds/);
  assert.match(await fails(client, 'search_emails', { recipient: 'not an address' }), /recipient must be a valid email address/);
  assert.match(await fails(client, 'wait_for_code', { recipient: 'late@acme.test', timeoutSeconds: 1 }), /timed out/);
});

test('cancelling a held wait frees its place at once', async () => {
  const client = await connect(acme);
  const abort = new AbortController();
  const waiting = client.callTool({ name: 'wait_for_code', arguments: { recipient: 'never@acme.test', timeoutSeconds: 60 } },
    undefined, { signal: abort.signal });
  await poll('the wait to be held', async () => (await listWait(acme)) === 429);
  const begin = Date.now();
  abort.abort();
  await assert.rejects(waiting);
  await poll('the place to be freed', async () => (await listWait(acme)) === 200);
  assert.ok(Date.now() - begin < 5_000, `freed after ${Date.now() - begin} ms`);
});

test('another account sees none of it, and a wrong key gets 401', async () => {
  await send('private@acme.test', 'Private', 'code 111222');
  const mine = await connect(acme);
  const id = (await call(mine, 'search_emails', { recipient: 'private@acme.test' })).items[0].id;
  const other = await connect(globex);
  assert.equal((await call(other, 'search_emails', {})).items.length, 0);
  assert.match(await fails(other, 'get_email', { id }), /no email with id/);
  assert.match(await fails(other, 'wait_for_email', { recipient: 'private@acme.test', since: '2000-01-01T00:00:00Z', timeoutSeconds: 1 }), /timed out/);
  await assert.rejects(connect('wrong-key'), (err) => err.code === 401 && /invalid API key/.test(err.message));
});
