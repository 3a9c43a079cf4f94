#!/usr/bin/env bash
# redis-cluster.sh starts and stops a throwaway Redis Cluster on loopback for
# tests, with no persistence: 3 masters, each with REDIS_CLUSTER_REPLICAS
# replicas (default 1, so 6 nodes), and cluster-require-full-coverage no, so
# one shard's failover does not stop the others.
#
#   scripts/redis-cluster.sh start DIR   # prints MAILSINK_TEST_REDIS_CLUSTER=host:port,...
#   scripts/redis-cluster.sh stop DIR
#   scripts/redis-cluster.sh restart DIR PORT   # a node stopped or killed, back into the cluster
#
#   eval "export $(scripts/redis-cluster.sh start /tmp/mailsink-cluster)"
#   go test -race ./store/redisstore/
#   scripts/redis-cluster.sh stop /tmp/mailsink-cluster
#
# The ports are consecutive free ones from REDIS_CLUSTER_BASE_PORT (default:
# a random one in 7000-7999); each node also needs its cluster bus port,
# port+10000. REDIS_CLUSTER_NODE_TIMEOUT (ms, default 5000) is the
# cluster-node-timeout: how long a master may be silent before its replica
# takes over. Everything a node writes stays in DIR/<port>, its pid in
# DIR/<port>/redis.pid. Only the variable line goes to stdout; progress goes
# to stderr.
set -euo pipefail

masters=3
replicas=${REDIS_CLUSTER_REPLICAS:-1}
nodes=$((masters * (1 + replicas)))
node_timeout=${REDIS_CLUSTER_NODE_TIMEOUT:-5000}
timeout_s=${REDIS_CLUSTER_TIMEOUT:-30}

usage() {
	echo "usage: $0 start|stop DIR, or $0 restart DIR PORT" >&2
	exit 2
}

log() { echo "redis-cluster: $*" >&2; }

die() {
	log "$*"
	exit 1
}

# in_use reports whether something accepts connections on 127.0.0.1:$1.
in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# ports_free reports whether the node and bus ports of base..base+nodes-1
# are all free.
ports_free() {
	local p
	for ((p = $1; p < $1 + nodes; p++)); do
		if ((p > 55535)) || in_use "$p" || in_use "$((p + 10000))"; then
			return 1
		fi
	done
}

# wait_for runs "$@" until it succeeds, for at most timeout_s seconds.
wait_for() {
	local deadline=$((SECONDS + timeout_s))
	until "$@"; do
		((SECONDS < deadline)) || return 1
		sleep 0.1
	done
}

pong() { [[ $(redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null) == PONG ]]; }

# cluster_ok reports whether every node sees the cluster as ok and every
# replica is in sync with its master.
cluster_ok() {
	local p
	for p in "${ports[@]}"; do
		redis-cli -h 127.0.0.1 -p "$p" cluster info 2>/dev/null | grep -q '^cluster_state:ok' || return 1
		if redis-cli -h 127.0.0.1 -p "$p" info replication 2>/dev/null | grep -q '^role:slave'; then
			redis-cli -h 127.0.0.1 -p "$p" info replication 2>/dev/null | grep -q '^master_link_status:up' || return 1
		fi
	done
	[[ $(redis-cli -h 127.0.0.1 -p "${ports[0]}" cluster nodes 2>/dev/null | grep -cE ' (myself,)?slave ') -eq $((masters * replicas)) ]]
}

# start_node starts the node on port $2 with its files in $1/$2; a node that
# was in the cluster before rejoins it from its nodes.conf.
start_node() {
	redis-server --port "$2" --bind 127.0.0.1 \
		--cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout "$node_timeout" \
		--cluster-require-full-coverage no \
		--save "" --appendonly no --repl-diskless-sync-delay 0 \
		--dir "$1/$2" --daemonize yes --pidfile "$1/$2/redis.pid" --logfile "$1/$2/redis.log"
}

# restart starts again a node of the cluster in $1 that was stopped or
# killed (a failover test does that), and waits until it answers.
restart() {
	local dir=$1 p=$2
	[[ -f $dir/ports && -d $dir/$p ]] || die "no node $p in $dir"
	node_timeout=$(cat "$dir/node-timeout" 2>/dev/null || echo "$node_timeout")
	start_node "$dir" "$p"
	wait_for pong "$p" || die "node $p does not answer; see $dir/$p/redis.log"
	log "node $p restarted"
}

start() {
	local dir=$1
	command -v redis-server >/dev/null || die "redis-server not found"
	command -v redis-cli >/dev/null || die "redis-cli not found"
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	[[ ! -e $dir/ports ]] || die "$dir/ports exists: a cluster may be running; run '$0 stop $dir' first"

	local base=${REDIS_CLUSTER_BASE_PORT:-$((7000 + RANDOM % 1000))} tries=0
	until ports_free "$base"; do
		((++tries < 50)) || die "no $nodes free consecutive ports found"
		[[ -z ${REDIS_CLUSTER_BASE_PORT:-} ]] || die "ports from $base are not free"
		base=$((7000 + RANDOM % 1000))
	done

	ports=()
	local p
	for ((p = base; p < base + nodes; p++)); do
		ports+=("$p")
	done
	echo "${ports[*]}" >"$dir/ports"

	echo "$node_timeout" >"$dir/node-timeout"
	for p in "${ports[@]}"; do
		mkdir -p "$dir/$p"
		start_node "$dir" "$p"
	done
	for p in "${ports[@]}"; do
		wait_for pong "$p" || die "node $p does not answer; see $dir/$p/redis.log"
	done

	local addrs=()
	for p in "${ports[@]}"; do
		addrs+=("127.0.0.1:$p")
	done
	redis-cli --cluster create "${addrs[@]}" --cluster-replicas "$replicas" --cluster-yes >"$dir/create.log" 2>&1 ||
		die "cluster create failed; see $dir/create.log"
	wait_for cluster_ok || die "cluster_state is not ok on every node after ${timeout_s}s"
	log "cluster up on ports ${ports[*]} (files in $dir)"

	local IFS=,
	echo "MAILSINK_TEST_REDIS_CLUSTER=${addrs[*]}"
}

stop() {
	local dir=$1 p pid out
	[[ -f $dir/ports ]] || die "no cluster in $dir (no $dir/ports)"
	read -r -a ports <"$dir/ports"
	# Every node is told to stop before any is waited for: a node takes a
	# second or two to exit after it answered.
	local -A pids=()
	for p in "${ports[@]}"; do
		pids[$p]=$(cat "$dir/$p/redis.pid" 2>/dev/null || true)
		# NOW (Redis 7) does not wait for replicas to catch up: the data is
		# thrown away anyway.
		out=$(redis-cli -h 127.0.0.1 -p "$p" shutdown nosave now 2>&1 || true)
		if [[ $out == *ERR* ]]; then
			redis-cli -h 127.0.0.1 -p "$p" shutdown nosave >/dev/null 2>&1 || true
		fi
	done
	for p in "${ports[@]}"; do
		pid=${pids[$p]}
		if [[ -n $pid ]]; then
			wait_for bash -c "! kill -0 $pid 2>/dev/null" || {
				log "node $p (pid $pid) did not stop; killing it"
				kill -9 "$pid" 2>/dev/null || true
			}
		fi
		rm -rf "${dir:?}/$p"
	done
	rm -f "$dir/ports" "$dir/create.log" "$dir/node-timeout"
	log "cluster on ports ${ports[*]} stopped"
}

case $#:${1:-} in
2:start) start "$2" ;;
2:stop) stop "$2" ;;
3:restart) restart "$2" "$3" ;;
*) usage ;;
esac
