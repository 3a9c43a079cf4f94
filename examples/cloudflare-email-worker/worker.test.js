// Tests the worker against a real mailsink: built from this repository
// with `go build` (or $MAILSINK_BIN), run on free loopback ports with a temporary data
// directory. Run with `node --test` in this directory (CI does).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

import worker, { forward } from "./worker.js";

const repo = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const key = "worker-test-key";
let dir, proc, exited, base, logs = "", logBytes = 0;

// keepLog keeps the last 64 KiB of mailsink's output for error messages:
// bounded, so that a chatty process cannot fill the test's heap.
function keepLog(d) {
  logBytes += d.length;
  logs = (logs + d).slice(-65536);
}

// freePort asks the kernel for a free port by listening on port 0.
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

async function waitReady(url, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {}
    if (proc.exitCode !== null) throw new Error("mailsink exited:\n" + logs);
    if (Date.now() > deadline) throw new Error("mailsink did not become ready:\n" + logs);
    await new Promise((r) => setTimeout(r, 50));
  }
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "mailsink-worker-"));
  // make test-node passes the binary it built; run alone, the test builds one.
  let bin = process.env.MAILSINK_BIN;
  if (!bin) {
    bin = join(dir, "mailsink");
    execFileSync("go", ["build", "-o", bin, "./cmd/mailsink"], { cwd: repo, stdio: "inherit" });
  }
  const [http, smtp] = [await freePort(), await freePort()];
  proc = spawn(bin, [], {
    env: {
      ...process.env,
      MAILSINK_HTTP_ADDR: `127.0.0.1:${http}`,
      MAILSINK_SMTP_ADDR: `127.0.0.1:${smtp}`,
      MAILSINK_DATA_DIR: join(dir, "data"),
      MAILSINK_API_KEY: key,
      MAILSINK_MAX_MESSAGE_BYTES: "65536",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  exited = new Promise((r) => proc.once("exit", r));
  proc.stdout.on("data", keepLog);
  proc.stderr.on("data", keepLog);
  base = `http://127.0.0.1:${http}`;
  await waitReady(base + "/readyz", 30000);
});

// after stops mailsink with SIGTERM, as an operator would, and waits for it
// to drain and exit; one that does not within 20 s is killed and fails the
// run with the end of its output.
after(async () => {
  try {
    if (proc && proc.exitCode === null && proc.signalCode === null) proc.kill("SIGTERM");
    if (proc) {
      let timer;
      const late = new Promise((r) => (timer = setTimeout(() => r("late"), 20000)));
      const how = await Promise.race([exited, late]);
      clearTimeout(timer);
      if (how === "late") {
        proc.kill("SIGKILL");
        await exited;
        throw new Error(`mailsink did not exit within 20 s of SIGTERM (${logBytes} bytes of output); its last output:\n` + logs);
      }
    }
  } finally {
    if (dir) rmSync(dir, { recursive: true, force: true });
  }
});

// message builds an object shaped like Cloudflare's ForwardableEmailMessage.
function message(from, to, raw) {
  const bytes = new TextEncoder().encode(raw);
  const m = {
    from,
    to,
    rawSize: bytes.length,
    headers: new Headers(),
    raw: new ReadableStream({
      start(c) {
        c.enqueue(bytes.slice(0, 10));
        c.enqueue(bytes.slice(10));
        c.close();
      },
    }),
    rejected: null,
    setReject(reason) {
      this.rejected = reason;
    },
    forward: async () => {},
    reply: async () => {},
  };
  for (const line of raw.split("\r\n\r\n")[0].split("\r\n")) {
    const i = line.indexOf(":");
    if (i > 0) m.headers.append(line.slice(0, i), line.slice(i + 1).trim());
  }
  return m;
}

async function emails(query = "") {
  const resp = await fetch(`${base}/v1/emails?${query}`, { headers: { "x-api-key": key } });
  assert.equal(resp.status, 200);
  return (await resp.json()).items;
}

test("a message is stored raw, with the envelope", async () => {
  const raw = "From: App <app@example.com>\r\nTo: header@example.com\r\nSubject: Worker hello\r\n\r\nHello from the worker.\r\n";
  const m = message("bounce@example.com", "user@example.net", raw);
  await worker.email(m, { MAILSINK_URL: base + "/", MAILSINK_API_KEY: key });
  assert.equal(m.rejected, null);
  const [e] = await emails("recipient=user%40example.net");
  assert.equal(e.sender, "bounce@example.com");
  assert.equal(e.subject, "Worker hello");
  const got = await fetch(`${base}/v1/emails/${e.id}/raw`, { headers: { "x-api-key": key } });
  assert.equal(await got.text(), raw);
});

test("a message mailsink refuses for good is rejected", async () => {
  const big = "From: a@example.com\r\nTo: b@example.net\r\nSubject: big\r\n\r\n" + "x".repeat(70000) + "\r\n";
  const m = message("a@example.com", "b@example.net", big);
  const res = await forward(m, { MAILSINK_URL: base, MAILSINK_API_KEY: key });
  assert.equal(res.status, 413);
  assert.match(m.rejected, /mailsink refused the message \(413\)/);

  const bad = message("not an address", "b@example.net", "Subject: x\r\n\r\ny\r\n");
  await forward(bad, { MAILSINK_URL: base, MAILSINK_API_KEY: key });
  assert.match(bad.rejected, /\(400\).*X-Envelope-From/);
  assert.equal((await emails("recipient=b%40example.net")).length, 0);
});

test("a temporary failure throws, so the sender retries", async () => {
  const m = message("a@example.com", "c@example.net", "From: a@example.com\r\n\r\nx\r\n");
  await assert.rejects(forward(m, { MAILSINK_URL: base, MAILSINK_API_KEY: "wrong" }), /401/);
  const closed = await freePort();
  const m2 = message("a@example.com", "c@example.net", "From: a@example.com\r\n\r\nx\r\n");
  await assert.rejects(forward(m2, { MAILSINK_URL: `http://127.0.0.1:${closed}`, MAILSINK_API_KEY: key }));
  assert.equal(m.rejected, null);
  assert.equal(m2.rejected, null);
});
