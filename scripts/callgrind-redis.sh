#!/usr/bin/env bash
# callgrind-redis.sh: the instructions redis-server spends per message of
# mailsink's SMTP ingest (2 KB, 8 reused connections), counted by valgrind's
# callgrind, and the commands and script work they go to.
#
#   scripts/callgrind-redis.sh [MESSAGES] [MAILSINK_BINARY]
#
# Instructions, unlike CPU seconds, hardly move with what else the machine
# does: runs of one build agree within half a per cent, so two builds
# compare in a run or two each (docs/benchmarks.md, "Where redis-server's instructions go per
# create"). They still follow the batching of the moment (how many digests
# share a script run), and only redis-server's own user-space instructions
# count: not the kernel's socket work, nor mailsink's.
#
# A first ingest of 200 messages loads the scripts; the count covers a
# second one of MESSAGES, its mailsink's start and stop and the load tool's
# cleanup of its keys included. Needs go (or $GO), valgrind, redis-server
# and redis-cli. Without a binary it builds ./cmd/mailsink; it always builds the
# load tool.
set -euo pipefail

messages=${1:-2000}
bin=${2:-}
if [ -n "$bin" ]; then
	bin=$(realpath "$bin")
fi
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
vpid=
cleanup() {
	if [ -n "$vpid" ]; then
		kill "$vpid" 2>/dev/null || true
		wait "$vpid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
	echo "callgrind-redis: $*" >&2
	exit 1
}

go=${GO:-go}
"$go" build -o "$tmp/bench" ./tools/mailsink-bench
if [ -z "$bin" ]; then
	CGO_ENABLED=0 "$go" build -o "$tmp/mailsink" ./cmd/mailsink
	bin=$tmp/mailsink
fi

# A free port: redis-server exits at once when the one tried is taken. The
# Redis that answers must be this one (valgrind runs it under its own pid),
# not another that holds the port.
port=
for _ in 1 2 3 4 5; do
	p=$((20000 + RANDOM % 30000))
	valgrind --tool=callgrind --callgrind-out-file="$tmp/callgrind.out" \
		redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" >"$tmp/redis.log" 2>&1 &
	vpid=$!
	for _ in $(seq 300); do
		kill -0 "$vpid" 2>/dev/null || break
		if redis-cli -p "$p" info server 2>/dev/null | grep -q "^process_id:$vpid"; then
			port=$p
			break 2
		fi
		sleep 0.1
	done
	kill "$vpid" 2>/dev/null || true
	wait "$vpid" 2>/dev/null || true
	vpid=
done
[ -n "$port" ] || fail "redis-server did not start: $(tail -3 "$tmp/redis.log")"

# ingest N sends N messages and checks that all were stored.
ingest() {
	local out
	out=$("$tmp/bench" -bin "$bin" -store redis -redis-url "redis://127.0.0.1:$port/0" -mode ingest \
		-messages "$1" -verify=false -timeout 30m 2>&1) || fail "mailsink-bench failed: $(tail -3 <<<"$out")"
	grep -qE "ingest: $1 stored, 0 failed" <<<"$out" || fail "not every message was stored: $(grep -E 'stored|failed' <<<"$out" | tail -2)"
	grep -E "^ingest: [0-9]+ stored" <<<"$out" || true
}
ingest 200 >/dev/null
callgrind_control -z "$vpid" >/dev/null 2>&1 || fail "callgrind_control -z failed"
ingest "$messages"
callgrind_control -d "$vpid" >/dev/null 2>&1 || fail "callgrind_control -d failed"

dump=$(ls -t "$tmp"/callgrind.out.* | head -1)
report=$(callgrind_annotate --inclusive=yes --threshold=100 "$dump")
total=$(awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1; exit }' <<<"$report")
echo "redis-server: $((total / messages)) instructions per message ($total over $messages messages)"
# Each function with what it calls: the command entry points, then the
# script machinery (luaCallFunction: the scripts and the commands they
# call; lua_pushlstring: strings made for Lua, the arguments among them).
awk -v n="$messages" '
	match($0, /[^ ]*:[A-Za-z_0-9]+ \[/) {
		name = substr($0, RSTART, RLENGTH - 2)
		sub(/.*:/, "", name)
		if (name ~ /(Command|^luaCallFunction|^lua_pushlstring|^readQueryFromClient)$/ && !(name in seen)) {
			seen[name] = 1
			count = $1
			gsub(",", "", count)
			printf "  %-24s %9d per message\n", name, count / n
		}
	}' <<<"$report" | head -40
