#!/usr/bin/env python3
"""Reruns issue 12's reproductions against a mailsink binary and prints what each shows.

    go build -o bin/mailsink ./cmd/mailsink && python3 scripts/hardening-repro.py bin/mailsink

It starts the binary on free loopback ports with a temporary data directory (embedded store), or on Redis when
MAILSINK_REDIS_URL is set, and reports peak memory (VmHWM of the process), answers and timings.
"""
import concurrent.futures as cf
import json, os, socket, smtplib, subprocess, sys, tempfile, time, urllib.request, urllib.error

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def vm(pid, field):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) // 1024
    return 0

class AnonPeak:
    """Samples the process's anonymous memory (RssAnon: the heap, not the embedded store's mapped file) every 20 ms."""
    def __init__(self, pid):
        import threading
        self.pid, self.peak, self.stop = pid, 0, False
        self.t = threading.Thread(target=self.run, daemon=True); self.t.start()
    def run(self):
        while not self.stop:
            try:
                self.peak = max(self.peak, vm(self.pid, "RssAnon"))
            except OSError:
                return  # the process ended
            time.sleep(0.02)
    def reset(self):
        p, self.peak = self.peak, vm(self.pid, "RssAnon"); return p

def request(base, method, path, key="acme-key", body=None, headers=None, timeout=120):
    req = urllib.request.Request(base + path, data=body, method=method)
    if key:
        req.add_header("Authorization", "Bearer " + key)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except urllib.error.URLError as e:
        # The server answered (413) and closed before the whole body was sent.
        return f"closed before the body was sent ({e.reason})", b""

def main():
    binary = sys.argv[1]
    tmp = tempfile.mkdtemp()
    accounts = os.path.join(tmp, "accounts.yaml")
    open(accounts, "w").write("accounts:\n"
        "  - {slug: acme, name: Acme, apiKeys: [acme-key], domains: [acme.test]}\n"
        "  - {slug: globex, name: Globex, apiKeys: [globex-key], domains: [globex.test]}\n")
    hp, sp = free_port(), free_port()
    env = dict(os.environ, MAILSINK_HTTP_ADDR=f"127.0.0.1:{hp}", MAILSINK_SMTP_ADDR=f"127.0.0.1:{sp}",
               MAILSINK_DATA_DIR=os.path.join(tmp, "data"), MAILSINK_ACCOUNTS_FILE=accounts, MAILSINK_LOG_LEVEL="error")
    proc = subprocess.Popen([binary, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{hp}"
    try:
        for _ in range(200):
            try:
                if request(base, "GET", "/readyz", key=None)[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.05)
        pid = proc.pid
        anon = AnonPeak(pid)
        print(f"start: RSS {vm(pid, 'VmRSS')} MiB")

        # 1. Invented HTTP methods must not grow the metrics.
        for i in range(400):
            s = socket.create_connection(("127.0.0.1", hp))
            s.sendall(f"M{i}{'X' * 60000} /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            s.recv(100); s.close()
        status, metrics = request(base, "GET", "/metrics", key=None)
        print(f"1. 400 invented 60 KB methods: /metrics {len(metrics)} bytes, RSS {vm(pid, 'VmRSS')} MiB")

        # 2. Create with 25 MB text + html + headers; 16 parallel 25 MB inbound.
        big = "x" * 25_000_000
        body = json.dumps({"recipient": "r@acme.test", "sender": "s@example.com", "text": big, "html": big,
                           "headers": {"x-a": big}}).encode()
        t = time.time()
        status, _ = request(base, "POST", "/v1/emails", body=body, headers={"Content-Type": "application/json"})
        print(f"2a. create with 75 MB of text/html/headers: {status} in {time.time() - t:.1f}s, anonymous memory peak {anon.reset()} MiB")
        raw = ("From: s@example.com\r\nTo: big@acme.test\r\nSubject: big\r\n\r\n" + ("a" * 998 + "\r\n") * 24_900).encode()
        t = time.time()
        with cf.ThreadPoolExecutor(16) as ex:
            codes = list(ex.map(lambda _: request(base, "POST", "/v1/inbound", body=raw,
                                                  headers={"Content-Type": "message/rfc822"})[0], range(16)))
        print(f"2b. 16 parallel {len(raw) // 1_000_000} MB inbound: answers {sorted(set(codes))} in {time.time() - t:.1f}s, "
              f"anonymous memory peak {anon.reset()} MiB (RSS peak with the store's mapped file: {vm(pid, 'VmHWM')} MiB)")

        # 3. Inbound with 500,000 To addresses, while another account sends over SMTP.
        to = ", ".join(f"u{i}@acme.test" for i in range(500_000))
        raw = f"From: s@example.com\r\nTo: {to}\r\nSubject: many\r\n\r\nhi\r\n".encode()
        def smtp_latency():
            worst = 0
            for _ in range(20):
                t0 = time.time()
                with smtplib.SMTP("127.0.0.1", sp, local_hostname="localhost") as c:
                    c.sendmail("s@example.com", ["x@globex.test"], "Subject: other\r\n\r\nhi\r\n")
                worst = max(worst, time.time() - t0)
            return worst
        with cf.ThreadPoolExecutor(2) as ex:
            inbound = ex.submit(lambda: request(base, "POST", "/v1/inbound", body=raw, headers={"Content-Type": "message/rfc822"}))
            other = ex.submit(smtp_latency)
            status, answer = inbound.result()
            print(f"3. inbound with 500,000 recipients ({len(raw) // 1_000_000} MB): {status} {answer[:90]!r}; "
                  f"globex's slowest SMTP 250 meanwhile {other.result() * 1000:.0f} ms")

        # 9, 12: odd create inputs.
        for at in ["0000-01-01T00:00:00+23:59", "9999-12-31T23:59:59.999-23:59"]:
            status, _ = request(base, "POST", "/v1/emails", headers={"Content-Type": "application/json"},
                                body=json.dumps({"recipient": "r@acme.test", "sender": "s@example.com", "receivedAt": at}).encode())
            print(f"9. receivedAt {at}: {status}")
        status, _ = request(base, "POST", "/v1/emails", headers={"Content-Type": "application/json"},
                            body=b'{"recipient":"r@acme.test","sender":"s@example.com","headers":{"x-a":null}}')
        print(f"12. a null header value: {status}")

        # Totals: nothing truncated or duplicated.
        _, count = request(base, "GET", "/v1/emails/count?recipient=big%40acme.test")
        print(f"stored to big@acme.test: {json.loads(count)['count']} (16 sent, each acknowledged once)")
        print(f"end: RSS {vm(pid, 'VmRSS')} MiB, peak {vm(pid, 'VmHWM')} MiB, anonymous peak since 2b {anon.reset()} MiB")
    finally:
        proc.terminate(); proc.wait()

if __name__ == "__main__":
    main()
