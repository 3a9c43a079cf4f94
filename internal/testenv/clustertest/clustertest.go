// Package clustertest runs a throwaway Redis Cluster of a test's own
// (scripts/redis-cluster.sh: 3 masters with a replica each, on loopback)
// and fails its masters over, for tests that must not disturb the cluster
// other tests share (MAILSINK_TEST_REDIS_CLUSTER).
package clustertest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a running test cluster.
type Cluster struct {
	// Seeds are the host:port addresses of its nodes.
	Seeds []string
}

// Start starts a cluster in a temporary directory and stops it when the
// test ends. Without redis-server it skips the test, or fails it under
// CI=true, where every tool the tests use must be there.
func Start(t testing.TB) *Cluster {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server is not installed: %v", err)
		}
		t.Skipf("redis-server is not installed: %v", err)
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "..", "scripts", "redis-cluster.sh")
	dir := t.TempDir()
	var stderr bytes.Buffer
	start := exec.Command(script, "start", dir)
	start.Stderr = &stderr
	out, err := start.Output()
	if err != nil {
		t.Fatalf("%s start: %v\n%s", script, err, stderr.String())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the test cluster's logs:\n%s", logTails(dir))
		}
		if out, err := exec.Command(script, "stop", dir).CombinedOutput(); err != nil {
			t.Errorf("%s stop: %v\n%s", script, err, out)
		}
	})
	for _, line := range strings.Split(string(out), "\n") {
		if seeds, ok := strings.CutPrefix(line, "MAILSINK_TEST_REDIS_CLUSTER="); ok {
			return &Cluster{Seeds: strings.Split(seeds, ",")}
		}
	}
	t.Fatalf("%s start printed no seeds: %q", script, out)
	return nil
}

// logTails returns the last lines of each node's log in dir.
func logTails(dir string) string {
	logs, _ := filepath.Glob(filepath.Join(dir, "*", "redis.log"))
	var b strings.Builder
	for _, l := range logs {
		data, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		fmt.Fprintf(&b, "== %s\n%s\n", l, strings.Join(lines[max(0, len(lines)-15):], "\n"))
	}
	return b.String()
}

// FailOver promotes the replica of the master of slot: by CLUSTER FAILOVER,
// which waits until the replica has all the master's writes, or with
// takeover by CLUSTER FAILOVER TAKEOVER, which does not ask the master or
// the other masters. It first waits until the replica is in sync, then
// until the replica is master and the old master its replica (the old
// master is demoted, not stopped), and returns both addresses.
func (c *Cluster) FailOver(t testing.TB, slot int, takeover bool) (from, to string) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for from == "" {
		if time.Now().After(deadline) {
			t.Fatalf("no master of slot %d with a replica in sync within 30s", slot)
		}
		from, to = c.shard(ctx, slot)
		if from == "" {
			time.Sleep(50 * time.Millisecond)
		}
	}
	old, next := c.node(t, from), c.node(t, to)
	args := []any{"CLUSTER", "FAILOVER"}
	if takeover {
		args = append(args, "TAKEOVER")
	}
	// A manual failover that does not complete within 5 seconds is given up
	// by Redis (one asked right after the cluster formed may not reach the
	// master): ask again after that.
	var asked time.Time
	for role(ctx, next) != "master" || role(ctx, old) != "slave" {
		if time.Now().After(deadline) {
			t.Fatalf("%v on %s: it is not the master of slot %d, with %s its replica, within 30s", args, to, slot, from)
		}
		if time.Since(asked) > 6*time.Second {
			if err := next.Do(ctx, args...).Err(); err != nil {
				t.Fatalf("%v on %s: %v", args, to, err)
			}
			asked = time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	return from, to
}

// shard returns the master of slot and a replica of it whose link to the
// master is up, as the first node that answers sees them, or "" for both.
func (c *Cluster) shard(ctx context.Context, slot int) (master, replica string) {
	for _, seed := range c.Seeds {
		n := redis.NewClient(&redis.Options{Addr: seed})
		shards, err := n.ClusterShards(ctx).Result()
		n.Close()
		if err != nil {
			continue
		}
		for _, sh := range shards {
			in := false
			for _, r := range sh.Slots {
				in = in || int64(slot) >= r.Start && int64(slot) <= r.End
			}
			if !in {
				continue
			}
			var replicas []string
			for _, nd := range sh.Nodes {
				addr := nd.IP + ":" + strconv.FormatInt(nd.Port, 10)
				switch {
				case nd.Role == "master" && nd.Health == "online":
					master = addr
				case nd.Role == "replica" && nd.Health == "online":
					replicas = append(replicas, addr)
				}
			}
			for _, r := range replicas {
				if master != "" && inSync(ctx, r, master) {
					return master, r
				}
			}
		}
		return "", ""
	}
	return "", ""
}

// inSync reports whether the node at addr is a replica of master with its
// link up.
func inSync(ctx context.Context, addr, master string) bool {
	n := redis.NewClient(&redis.Options{Addr: addr})
	defer n.Close()
	info, err := n.Info(ctx, "replication").Result()
	if err != nil {
		return false
	}
	_, port, _ := strings.Cut(master, ":")
	return strings.Contains(info, "role:slave") && strings.Contains(info, "master_link_status:up") &&
		strings.Contains(info, "master_port:"+port+"\r\n")
}

// node returns a client of the node at addr, closed when the test ends.
func (c *Cluster) node(t testing.TB, addr string) *redis.Client {
	n := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { n.Close() })
	return n
}

// role returns the node's role as ROLE gives it: "master" or "slave" ("" when
// it does not answer).
func role(ctx context.Context, n *redis.Client) string {
	v, err := n.Do(ctx, "ROLE").Slice()
	if err != nil || len(v) == 0 {
		return ""
	}
	r, _ := v[0].(string)
	return r
}
