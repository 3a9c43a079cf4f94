// nodemailer, as applications use it, delivers to mailsink over STARTTLS
// (requireTLS: true) and over implicit TLS (secure: true), trusting the
// self-signed certificate mailsink makes for MAILSINK_SMTP_TLS_AUTO, fetched
// from GET /tls/certificate.pem the way a client in another container would.
//
// Run: npm ci && npm test (in e2e/node). It builds the mailsink binary with
// `go build` unless MAILSINK_BIN names one.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import nodemailer from 'nodemailer';
import { stop } from './stop.mjs';

const repo = fileURLToPath(new URL('../..', import.meta.url));
const key = 'node-test-key';
let proc, dir, http, smtpPort, smtpsPort, certPEM, logs = '';
let exited; // resolves when mailsink has exited


// freePort asks the kernel for a free port on loopback.
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

async function waitReady(deadlineMs) {
  const end = Date.now() + deadlineMs;
  for (;;) {
    try {
      const resp = await fetch(`${http}/readyz`);
      if (resp.status === 200) return;
    } catch { /* not listening yet */ }
    if (proc.exitCode !== null) throw new Error(`mailsink exited (${proc.exitCode}):\n${logs}`);
    if (Date.now() > end) throw new Error(`mailsink not ready:\n${logs}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mailsink-node-'));
  let bin = process.env.MAILSINK_BIN;
  if (!bin) {
    bin = join(dir, 'mailsink');
    execFileSync('go', ['build', '-o', bin, './cmd/mailsink'], { cwd: repo, stdio: 'inherit' });
  }
  const [httpPort, s, ss] = [await freePort(), await freePort(), await freePort()];
  smtpPort = s;
  smtpsPort = ss;
  http = `http://127.0.0.1:${httpPort}`;
  proc = spawn(bin, ['serve'], {
    env: {
      PATH: process.env.PATH,
      MAILSINK_DATA_DIR: join(dir, 'data'),
      MAILSINK_HTTP_ADDR: `127.0.0.1:${httpPort}`,
      MAILSINK_SMTP_ADDR: `127.0.0.1:${smtpPort}`,
      MAILSINK_SMTPS_ADDR: `127.0.0.1:${smtpsPort}`,
      MAILSINK_SMTP_TLS_AUTO: 'mailsink.test',
      MAILSINK_SMTP_REQUIRE_TLS: 'true',
      MAILSINK_SMTP_AUTH_ALLOW_INSECURE: 'false',
      MAILSINK_API_KEY: key,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  exited = new Promise((r) => proc.once('exit', r));
  proc.stdout.on('data', (b) => { logs = (logs + b).slice(-65536); });
  proc.stderr.on('data', (b) => { logs = (logs + b).slice(-65536); });
  await waitReady(30_000);
  const resp = await fetch(`${http}/tls/certificate.pem`);
  assert.equal(resp.status, 200);
  certPEM = await resp.text();
  assert.match(certPEM, /^-----BEGIN CERTIFICATE-----/);
  assert.doesNotMatch(certPEM, /PRIVATE KEY/);
});

after(async () => {
  try {
    await stop(proc, exited, () => logs);
  } finally {
    if (dir) rmSync(dir, { recursive: true, force: true });
  }
});

async function received(recipient) {
  const resp = await fetch(`${http}/v1/emails?recipient=${encodeURIComponent(recipient)}`, {
    headers: { Authorization: `Bearer ${key}` },
  });
  assert.equal(resp.status, 200);
  return (await resp.json()).items;
}

function transport(options) {
  return nodemailer.createTransport({
    host: '127.0.0.1',
    auth: { user: 'ci', pass: key },
    tls: { ca: certPEM, servername: 'mailsink.test' },
    ...options,
  });
}

async function sendAndFind(t, options, recipient) {
  const info = await t.sendMail({
    from: 'app@example.com',
    to: recipient,
    subject: `Hello over ${JSON.stringify(options)}`,
    text: 'Sent by nodemailer.',
  });
  assert.deepEqual(info.accepted, [recipient]);
  const items = await received(recipient);
  assert.equal(items.length, 1);
  assert.equal(items[0].sender, 'app@example.com');
}

test('nodemailer with requireTLS: true (STARTTLS) delivers', async () => {
  const options = { port: smtpPort, secure: false, requireTLS: true };
  await sendAndFind(transport(options), options, 'starttls@acme.test');
});

test('nodemailer with secure: true (implicit TLS) delivers', async () => {
  const options = { port: smtpsPort, secure: true };
  await sendAndFind(transport(options), options, 'implicit@acme.test');
});

test('nodemailer refuses the certificate when it is not trusted', async () => {
  const t = nodemailer.createTransport({ host: '127.0.0.1', port: smtpsPort, secure: true, auth: { user: 'ci', pass: key } });
  await assert.rejects(t.sendMail({ from: 'app@example.com', to: 'untrusted@acme.test', text: 'x' }), /self-signed|certificate/i);
  assert.equal((await received('untrusted@acme.test')).length, 0);
});

test('plaintext MAIL is refused with 530 when TLS is required', async () => {
  const t = nodemailer.createTransport({ host: '127.0.0.1', port: smtpPort, secure: false, ignoreTLS: true });
  await assert.rejects(t.sendMail({ from: 'app@example.com', to: 'plain@acme.test', text: 'x' }), (err) => {
    assert.equal(err.responseCode, 530);
    assert.match(err.response, /5\.7\.0/);
    return true;
  });
});
