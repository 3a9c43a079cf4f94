#!/usr/bin/env bash
# bench-ack.sh measures what replica acknowledgement costs: it starts a
# throwaway Redis master with one replica on loopback (no persistence), then
# mailsink on it with MAILSINK_REDIS_ACK_REPLICAS=0 and =1 in turn, and runs
# the load tool's ingest against each. docs/benchmarks.md reports its output.
#
#   scripts/bench-ack.sh [extra mailsink-bench flags, e.g. -messages 20000 -conns 8]
set -euo pipefail
cd "$(dirname "$0")/.."

dir=$(mktemp -d /tmp/mailsink-bench-ack.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() { for _ in $(seq 1 100); do curl -fsS "$1/readyz" >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }

master=$(free_port)
replica=$(free_port)
redis-server --port "$master" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" --dbfilename m.rdb \
	--logfile "$dir/master.log" &
pids+=($!)
redis-server --port "$replica" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" --dbfilename r.rdb \
	--replicaof 127.0.0.1 "$master" --logfile "$dir/replica.log" &
pids+=($!)
for _ in $(seq 1 100); do
	redis-cli -p "$master" info replication 2>/dev/null | grep -q 'state=online' && break
	sleep 0.1
done
redis-cli -p "$master" info replication | grep -q 'state=online' || { echo "replica did not attach" >&2; exit 1; }

go build -o "$dir/mailsink" ./cmd/mailsink
for ack in 0 1; do
	smtp=$(free_port)
	http=$(free_port)
	MAILSINK_REDIS_URL="redis://127.0.0.1:$master/0" MAILSINK_REDIS_PREFIX="benchack$ack:" \
		MAILSINK_REDIS_ACK_REPLICAS=$ack MAILSINK_API_KEY=bench-key MAILSINK_RETENTION_MAX_AGE=0 \
		MAILSINK_SMTP_ADDR="127.0.0.1:$smtp" MAILSINK_HTTP_ADDR="127.0.0.1:$http" MAILSINK_DATA_DIR="$dir/data$ack" \
		"$dir/mailsink" serve 2>"$dir/mailsink$ack.log" &
	server=$!
	pids+=("$server")
	wait_http "http://127.0.0.1:$http" || { echo "mailsink did not start" >&2; cat "$dir/mailsink$ack.log" >&2; exit 1; }
	echo "== MAILSINK_REDIS_ACK_REPLICAS=$ack"
	go run ./tools/mailsink-bench -smtp "127.0.0.1:$smtp" -http "http://127.0.0.1:$http" -key bench-key -pid "$server" "$@"
	kill "$server"
	wait "$server" 2>/dev/null || true
done
