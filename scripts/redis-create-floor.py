#!/usr/bin/env python3
"""Counts what redis-server spends on one 2 KB create, as mailsink sends it and as plain commands would.

    python3 scripts/redis-create-floor.py [-cpu] [MESSAGES]      # make bench-redis-floor [CPU=1] [MESSAGES=N]

A lower bound for a Redis layout without Lua in the create (issue 38's target of 40 µs of redis-server CPU
per create). It starts a redis-server of its own under valgrind's callgrind, on a free loopback port, and sends
it MESSAGES creates (2000 by default) over one connection, one message at a time (a round trip each, two for
plain), after 200 that are not counted, in each of five ways, and checks that every create stored its email:

- lua: what mailsink's SMTP create sends today (store/redisstore): the fault rules' EXISTS (sent at MAIL), the
  body's SET with the create's deadline as its expiry (PXAT, NX), and createScript (its source read from
  store/redisstore/scripts.go); every third message also carries three emails' search digests through
  putChecksScript (checks.go), as search's worker batches them;
- plain: the same writes as plain commands: a round trip for the fault rules' EXISTS, the checks the script
  makes before it writes (the id's tombstone and older-layout keys) and the UID counter, then MULTI with the
  body's SET, the record's HSETNX, the five index ZADDs, the stats' HINCRBY, the event's XADD and PUBLISH, EXEC;
  the digests as plain HSETs;
- plain-one-trip: plain with those checks and the UID counter in the same round trip as the MULTI, which a
  create could not do (it must read them before it writes): fewer round trips than any create without Lua;
- lua-nodigest and plain-nodigest: lua and plain without the digests.

Plain leaves out what only a script can do between a read and a write (refusing a taken id, a fenced one or a
late create, the UID in the same step), so it is less than a create without Lua would cost. Each count is
redis-server's user-space instructions per message (callgrind's totals between zeroing and dumping), which do
not count the kernel's socket work. With -cpu, each way runs three times on a redis-server without valgrind
(valgrind is not needed then), alternated, and prints its user and system CPU per message (INFO cpu). One
connection sending a message at a time makes redis-server wake for each round trip, where mailsink's
connections share pipelines: the system part is larger here than under mailsink's ingest. Keys and values have
the lengths mailsink-bench's run sends (MONITOR): its key prefix, a body value of 2,838 bytes (a stand-in: the
metadata with the SMTP transcript, then the raw 2 KB), a record of 251 bytes, an event of 515 and a digest of
about 2.1 KB. Needs python3, valgrind (callgrind_control) and redis-server.
"""
import glob, hashlib, json, os, random, re, socket, subprocess, sys, tempfile, time, uuid

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def scripts():
    """The create and digest scripts' sources, as store/redisstore builds them."""
    s = open(os.path.join(ROOT, "store/redisstore/scripts.go")).read()
    c = open(os.path.join(ROOT, "store/redisstore/checks.go")).read()

    def raw(pattern, src):
        m = re.search(pattern, src, re.S)
        if not m:
            sys.exit("redis-create-floor: %s not found in store/redisstore" % pattern)
        return m.group(1)

    create = (raw(r"const publishFn = `(.*?)`", s) + raw(r"const recordFns = `(.*?)`", s) +
              raw(r"var createScript = redis.NewScript\(publishFn \+ recordFns \+ `(.*?)`\)", s))
    return create, raw(r"var putChecksScript = redis.NewScript\(`(.*?)`\)", c)


def enc(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.f = self.s.makefile("rb")

    def close(self):
        self.f.close()
        self.s.close()

    def reply(self):
        """Reads one reply: a str for a status, an int, bytes for a bulk string, a list, None for a nil."""
        line = self.f.readline()
        t, rest = line[:1], line[1:].strip()
        if t == b"-":
            sys.exit("redis-create-floor: redis answered " + line.decode().strip())
        if t == b"+":
            return rest.decode()
        if t == b":":
            return int(rest)
        if t == b"$":
            return None if int(rest) < 0 else self.f.read(int(rest) + 2)[:-2]
        if t == b"*":
            return None if int(rest) < 0 else [self.reply() for _ in range(int(rest))]
        sys.exit("redis-create-floor: unexpected reply %r" % line)

    def info(self, section):
        """INFO section as a dict."""
        return dict(re.findall(r"^([a-z_]+):(.*?)\r?$", self.roundtrip([enc("INFO", section)])[0].decode(), re.M))

    def cpu(self):
        """redis-server's CPU seconds so far: user, system."""
        info = self.info("cpu")
        return float(info["used_cpu_user"]), float(info["used_cpu_sys"])

    def roundtrip(self, cmds):
        """Sends cmds at once and returns their replies."""
        self.s.sendall(b"".join(cmds))
        return [self.reply() for _ in cmds]


PREFIX = "mailsink-bench-c8fa6def5ce5:"
ACCOUNT = "f45ee26d-9dc7-5c6b-b42f-98a156a5f913"
# A stand-in of a body value's size: mailsink stores its metadata (the SMTP transcript) before the raw 2 KB,
# 2,838 bytes in MONITOR.
BODY = b"x" * 2838
DIGEST = (b'{"fa":["sender@bench.test"],"fn":["Load Tool"],"ta":["r0.ae30c7a2-1@bench.test"],"s":"' + b"w" * 150 +
          b'","t":"' + b"word " * 380 + b'"}')


def key(name):
    return PREFIX + "{" + ACCOUNT + "}:" + name


def send(conn, mode, shas, first, n):
    """Sends creates first..first+n-1 the way mode says."""
    digests = not mode.endswith("-nodigest")
    pending = []
    for i in range(first, first + n):
        eid, bid = str(uuid.UUID(int=random.getrandbits(128))), str(uuid.UUID(int=random.getrandbits(128)))
        rcpt = "r%d.ae30c7a2-1@bench.test" % (i % 100)
        score = 1795913152340 + i
        fixed = {"b": bid, "mid": "m%d.ae30c7a2-1@bench.test" % i, "from": "sender@bench.test", "to": rcpt,
                 "size": 2048, "recv": score, "created": score}
        values = ["received", json.dumps("bench ae30c7a2-1 m%d" % i), "null", "[]", str(score)]
        record = "\n".join([json.dumps(fixed, separators=(",", ":"))] + values + ["2048"])
        fields = [json.dumps(dict(fixed, id=eid, acc=ACCOUNT), separators=(",", ":"))] + values
        event = json.dumps({"type": "email.created", "accountId": ACCOUNT, "emailId": eid, "fields": fields},
                           separators=(",", ":"))
        body = key("b:" + bid)
        if mode.startswith("lua"):
            keys = [key("all"), body, key("stats"), key("em"), key("br"), key("uidn"), key("uids"), key("r:" + rcpt),
                    key("s:sender@bench.test"), key("st:received"), key("ev")]
            # An SMTP create's body expires at its deadline, which the script then needs not check.
            deadline = int(time.time() * 1000) + 30000
            cmds = [enc("EXISTS", key("f")), enc("SET", body, BODY, "PXAT", deadline, "NX"),
                    enc("EVALSHA", shas[0], len(keys), *keys, bid, "0", key("f:"), key("e:"), "1000",
                        "PUBLISH " + PREFIX + "events", eid, score, "2048", record, event)]
        else:
            checks = [enc("EXISTS", key("f")), enc("EXISTS", key("f:" + eid), key("e:" + eid)),
                      enc("HINCRBY", key("uidn"), "n", "1")]
            if "one-trip" not in mode:
                conn.roundtrip(checks)
                checks = []
            cmds = checks + [enc("MULTI"), enc("SET", body, BODY), enc("HSETNX", key("em"), eid, record),
                    enc("ZADD", key("uids"), i + 1, eid), enc("ZADD", key("r:" + rcpt), score, eid),
                    enc("ZADD", key("s:sender@bench.test"), score, eid), enc("ZADD", key("st:received"), score, eid),
                    enc("ZADD", key("all"), score, eid), enc("HINCRBY", key("stats"), "bytes", "2048"),
                    enc("XADD", key("ev"), "MAXLEN", "~", "1000", "*", "e", event),
                    enc("PUBLISH", PREFIX + "events", "1-0 " + event), enc("EXEC")]
        pending.append(eid)
        batch = False
        if digests and len(pending) == 3:
            batch = True
            if mode.startswith("lua"):
                keys, args = [key("em")], ["search-digest"]
                for d in pending:
                    keys += [key("e:" + d), key("ck:" + d)]
                    args += [d, DIGEST]
                cmds.append(enc("EVALSHA", shas[1], len(keys), *keys, *args))
            else:
                cmds += [enc("HSET", key("ck:" + d), "search-digest", DIGEST) for d in pending]
            pending = []
        check(mode, batch, conn.roundtrip(cmds))


def check(mode, batch, replies):
    """Stops unless the round trip stored its email, and its batch of digests when it sent one."""
    if mode.startswith("lua"):
        # EXISTS, SET, the create script's stream ids, then putChecksScript's count.
        ok = replies[1] == "OK" and isinstance(replies[2], list) and len(replies[2]) == 1
        ok = ok and (not batch or replies[3] == 3)
    else:
        # (the checks,) MULTI, 10 QUEUED, EXEC's 10 results (SET, HSETNX, ...), then one HSET a digest.
        m = replies.index("OK")
        done = replies[m + 11] if len(replies) > m + 11 else None
        ok = isinstance(done, list) and len(done) == 10 and done[1] == 1
        ok = ok and replies[m + 12:] == ([1, 1, 1] if batch else [])
    if not ok:
        sys.exit("redis-create-floor: a create of mode %s was not stored: %r" % (mode, replies))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def measure(mode, messages, sources, cpu):
    """redis-server's instructions per message of mode, counted by callgrind, or with cpu its CPU
    microseconds per message (INFO cpu, user and system) on a redis-server of its own without valgrind."""
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        server = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                  "--dir", tmp]
        if not cpu:
            server = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + tmp + "/cg.out"] + server
        proc = subprocess.Popen(server, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        conn = None
        try:
            for _ in range(600):
                if proc.poll() is not None:
                    sys.exit("redis-create-floor: redis-server exited")
                try:
                    conn = Conn(port)
                    conn.roundtrip([enc("PING")])
                    break
                except OSError:
                    conn = None
                    time.sleep(0.1)
            if conn is None:
                sys.exit("redis-create-floor: redis-server did not start")
            # The Redis that answers must be this one (valgrind runs it under its own pid), not another that
            # took the port meanwhile.
            if conn.info("server").get("process_id") != str(proc.pid):
                sys.exit("redis-create-floor: another Redis answers on port %d" % port)
            conn.roundtrip([enc("SCRIPT", "LOAD", src) for src in sources])
            shas = [hashlib.sha1(src.encode()).hexdigest() for src in sources]
            send(conn, mode, shas, 0, 200)
            if cpu:
                before = conn.cpu()
                send(conn, mode, shas, 200, messages)
                return [(a - b) * 1e6 / messages for a, b in zip(conn.cpu(), before)]
            def control(op):
                done = subprocess.run(["callgrind_control", op, str(proc.pid)], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
                if done.returncode != 0:
                    sys.exit("redis-create-floor: callgrind_control %s failed" % op)

            control("-z")
            send(conn, mode, shas, 200, messages)
            control("-d")
            dumps = sorted(glob.glob(tmp + "/cg.out.*"), key=os.path.getmtime)
            total = None
            for line in open(dumps[-1]):
                if line.startswith(("summary:", "totals:")):
                    total = int(line.split()[1])
            if total is None:
                sys.exit("redis-create-floor: no totals in the callgrind dump")
            return total / messages
        finally:
            if conn is not None:
                conn.close()
            proc.terminate()
            proc.wait()


def main():
    args = sys.argv[1:]
    cpu = "-cpu" in args
    args = [a for a in args if a != "-cpu"]
    messages = int(args[0]) if args else 2000
    if messages < 1:
        sys.exit("redis-create-floor: MESSAGES must be at least 1")
    random.seed(1)
    sources = scripts()
    modes = ("lua", "plain", "plain-one-trip", "lua-nodigest", "plain-nodigest")
    if not cpu:
        for mode in modes:
            print("%-15s %9d instructions per message (%d messages)" % (mode, measure(mode, messages, sources, False),
                                                                     messages), flush=True)
        return
    # CPU time moves with the machine's load: three rounds, the modes alternated, each figure printed.
    got = {m: [] for m in modes}
    for _ in range(3):
        for mode in modes:
            got[mode].append(measure(mode, messages, sources, True))
    for mode in modes:
        print("%-15s %s µs of redis-server CPU per message, user + system (%d messages, three rounds)"
              % (mode, " / ".join("%.1f + %.1f" % (u, k) for u, k in got[mode]), messages), flush=True)


if __name__ == "__main__":
    main()
