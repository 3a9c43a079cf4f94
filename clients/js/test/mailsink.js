// Starts a real mailsink binary for the tests: built from this repository
// with `go build` (or taken from MAILSINK_BIN), on free loopback ports, with
// a temporary data directory and a known API key.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

/** A port free on 127.0.0.1 now: listen on port 0, read it, close. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

let built;
function binary(dir) {
  if (process.env.MAILSINK_BIN) return process.env.MAILSINK_BIN;
  if (!built) {
    built = join(dir, 'mailsink');
    execFileSync('go', ['build', '-o', built, './cmd/mailsink'], { cwd: repo, stdio: 'inherit' });
  }
  return built;
}

/**
 * Starts mailsink and resolves once /healthz answers. With accounts (the
 * text of an accounts file), its accounts replace the single account of
 * apiKey, which must then be one of their keys.
 * @param {{apiKey?: string, accounts?: string}} [options]
 * @returns {Promise<{baseUrl: string, smtpPort: number, apiKey: string, stop: () => Promise<void>}>}
 */
export async function startMailsink({ apiKey = 'js-test-key', accounts } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'mailsink-js-'));
  const [httpPort, smtpPort] = [await freePort(), await freePort()];
  const keys = { MAILSINK_API_KEY: apiKey };
  if (accounts) {
    writeFileSync(join(dir, 'accounts.yaml'), accounts);
    keys.MAILSINK_API_KEY = '';
    keys.MAILSINK_ACCOUNTS_FILE = join(dir, 'accounts.yaml');
  }
  const proc = spawn(binary(dir), ['serve'], {
    env: {
      ...process.env,
      MAILSINK_HTTP_ADDR: `127.0.0.1:${httpPort}`,
      MAILSINK_SMTP_ADDR: `127.0.0.1:${smtpPort}`,
      MAILSINK_DATA_DIR: join(dir, 'data'),
      ...keys,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  proc.stdout.on('data', (d) => { output = (output + d).slice(-65536); });
  proc.stderr.on('data', (d) => { output = (output + d).slice(-65536); });
  const exited = new Promise((resolve) => proc.on('exit', resolve));
  const baseUrl = `http://127.0.0.1:${httpPort}`;
  const deadline = Date.now() + 20000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`mailsink exited ${proc.exitCode}:\n${output}`);
    try {
      if ((await fetch(`${baseUrl}/healthz`)).ok) break;
    } catch {
      // Not listening yet.
    }
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`mailsink did not answer within 20s:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    baseUrl,
    smtpPort,
    apiKey,
    async stop() {
      proc.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Sends one message over SMTP with a raw socket: the few lines a client says. */
export function sendSMTP(port, from, to, data) {
  return new Promise((resolve, reject) => {
    const steps = [`EHLO localhost`, `MAIL FROM:<${from}>`, `RCPT TO:<${to}>`, 'DATA',
      `${data.replace(/\r?\n/g, '\r\n').replace(/^\./gm, '..')}\r\n.`, 'QUIT'];
    const sock = connectTo(port);
    let buf = '';
    sock.setEncoding('utf8');
    sock.on('error', reject);
    sock.on('data', (chunk) => {
      buf += chunk;
      // A reply is complete when its last line has a space after the code.
      const lines = buf.split('\r\n');
      const last = lines.length >= 2 ? lines[lines.length - 2] : '';
      if (!/^\d{3} /.test(last)) return;
      buf = '';
      if (!/^[23]/.test(last)) {
        sock.destroy();
        reject(new Error(`SMTP: ${last}`));
        return;
      }
      const next = steps.shift();
      if (next === undefined) {
        sock.end();
        resolve();
      } else {
        sock.write(`${next}\r\n`);
      }
    });
  });
}

import { connect } from 'node:net';
function connectTo(port) { return connect(port, '127.0.0.1'); }
