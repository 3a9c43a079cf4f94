#!/usr/bin/env bash
# callgrind-redis.sh: the instructions redis-server spends per message of
# mailsink's SMTP ingest (2 KB, 8 reused connections), counted by valgrind's
# callgrind, and the commands and script work they go to.
#
#   scripts/callgrind-redis.sh [MESSAGES] [MAILSINK_BINARY]
#
# Instructions, unlike CPU seconds, come out the same run after run for one
# build whatever else the machine does, so two builds compare in one run each
# (docs/benchmarks.md, "Where redis-server's instructions go"). Only
# redis-server's own user-space instructions count: not the kernel's socket
# work, nor mailsink's. Needs valgrind and redis-server (run on a free
# port of its own). Without a binary it builds ./cmd/mailsink; it always
# builds the load tool.
set -euo pipefail

messages=${1:-2000}
bin=${2:-}
tmp=$(mktemp -d)
vpid=
cleanup() {
	[ -n "$vpid" ] && kill "$vpid" 2>/dev/null && wait "$vpid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

go build -o "$tmp/bench" ./tools/mailsink-bench
if [ -z "$bin" ]; then
	CGO_ENABLED=0 go build -o "$tmp/mailsink" ./cmd/mailsink
	bin=$tmp/mailsink
fi

# A free port: redis-server exits at once when the one tried is taken.
for _ in 1 2 3 4 5; do
	port=$((20000 + RANDOM % 40000))
	valgrind --tool=callgrind --callgrind-out-file="$tmp/callgrind.out" \
		redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" >"$tmp/redis.log" 2>&1 &
	vpid=$!
	for _ in $(seq 300); do
		redis-cli -p "$port" ping >/dev/null 2>&1 && break 2
		kill -0 "$vpid" 2>/dev/null || break
		sleep 0.1
	done
	kill "$vpid" 2>/dev/null || true
	wait "$vpid" 2>/dev/null || true
	vpid=
done
[ -n "$vpid" ] || { echo "callgrind-redis: redis-server did not start: $(tail -3 "$tmp/redis.log")" >&2; exit 1; }

ingest() {
	"$tmp/bench" -bin "$bin" -store redis -redis-url "redis://127.0.0.1:$port/0" -mode ingest -messages "$1" -verify=false -timeout 30m 2>&1
}
# The first messages load the scripts; the count starts after them.
ingest 200 >/dev/null
callgrind_control -z "$vpid" >/dev/null 2>&1
ingest "$messages" | grep -E '^ingest: [0-9]+ stored' || true
callgrind_control -d "$vpid" >/dev/null 2>&1

dump=$(ls -t "$tmp"/callgrind.out.* | head -1)
report=$(callgrind_annotate --inclusive=yes --threshold=100 "$dump" 2>/dev/null)
total=$(awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1; exit }' <<<"$report")
echo "redis-server: $((total / messages)) instructions per message ($total over $messages messages, the run's cleanup included)"
# Each function with what it calls: the command entry points, then the
# script machinery (luaCallFunction: the script and the commands it calls;
# lua_pushlstring: strings made for Lua, the arguments among them).
awk -v n="$messages" '
	match($0, /\?\?\?:[A-Za-z_0-9]+ /) {
		name = substr($0, RSTART + 4, RLENGTH - 5)
		if (name ~ /(Command|^luaCallFunction|^lua_pushlstring|^readQueryFromClient)$/ && !(name in seen)) {
			seen[name] = 1
			count = $1
			gsub(",", "", count)
			printf "  %-24s %9d per message\n", name, count / n
		}
	}' <<<"$report" | head -40
