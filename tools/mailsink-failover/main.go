// Command mailsink-failover checks that mailsink rides through a Redis
// Cluster failover without losing acknowledged mail. It starts a throwaway
// cluster of 3 masters with a replica each on loopback
// (scripts/redis-cluster.sh), a mailsink on it with replica
// acknowledgement, and SMTP load into accounts spread over the shards; then
// it kills one master with SIGKILL and measures how long Redis takes to
// promote its replica and how long mailsink takes to answer 250 again for
// that shard's accounts after the promotion shows in CLUSTER SHARDS. At the
// end it reads back every email and prints what was acknowledged, refused
// and lost. Throughout, each account has an event stream (/v1/events) open,
// and a wait (GET /v1/emails?wait=60) is held in the victim's account, whose
// email is sent once the shard answers again. It exits 1 when an
// acknowledged email is missing (with replica acknowledgement on) or never
// reached its account's stream, a refused one was stored anyway, any answer
// was a 5xx, or the held wait did not answer its email when it landed.
//
//	go run ./tools/mailsink-failover              # make failover-test
//	go run ./tools/mailsink-failover -takeover    # a lagging replica promoted by CLUSTER FAILOVER TAKEOVER
//	go run ./tools/mailsink-failover -demote failover   # the master demoted by a graceful CLUSTER FAILOVER
//
// With -takeover the victim's replica is frozen (SIGSTOP) for -lag before
// the master is killed, so it has fallen behind; it is then resumed and
// promoted at once with CLUSTER FAILOVER TAKEOVER, as an operator would.
// With -demote the master is not killed: its replica is promoted by
// CLUSTER FAILOVER (failover: graceful, no write lost) or CLUSTER FAILOVER
// TAKEOVER (takeover), and the master, still running, becomes its replica;
// Redis then ends the sharded subscriptions on it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/smtp"
	"net/textproto"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/app"
	"github.com/mailsink/mailsink/internal/testenv/clustertest"
	"github.com/mailsink/mailsink/store"
	"github.com/mailsink/mailsink/store/redisstore"
)

const accounts = 6

type options struct {
	script     string
	replicas   int
	senders    int
	rate       int
	before     time.Duration
	after      time.Duration
	ack        int
	ackTimeout time.Duration
	takeover   bool
	demote     string
	lag        time.Duration
	maxResume  time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.script, "script", "scripts/redis-cluster.sh", "the cluster script")
	flag.IntVar(&o.replicas, "replicas", 2, "replicas per master: with replica acknowledgement, a shard needs one left after its failover to accept mail")
	flag.IntVar(&o.senders, "senders", 6, "SMTP senders, each on its own connection")
	flag.IntVar(&o.rate, "rate", 300, "messages per second, all senders together")
	flag.DurationVar(&o.before, "before", 3*time.Second, "load before the kill")
	flag.DurationVar(&o.after, "after", 3*time.Second, "load after the shard answers again")
	flag.IntVar(&o.ack, "ack", 1, "MAILSINK_REDIS_ACK_REPLICAS")
	flag.DurationVar(&o.ackTimeout, "ack-timeout", time.Second, "MAILSINK_REDIS_ACK_TIMEOUT")
	flag.BoolVar(&o.takeover, "takeover", false, "freeze the victim's replica first, then promote it with CLUSTER FAILOVER TAKEOVER")
	flag.StringVar(&o.demote, "demote", "", "instead of killing the master, promote its replica while it runs, which demotes it: failover (CLUSTER FAILOVER) or takeover (CLUSTER FAILOVER TAKEOVER)")
	flag.DurationVar(&o.lag, "lag", 2*time.Second, "with -takeover: how long the replica is frozen before the kill")
	flag.DurationVar(&o.maxResume, "max-resume", 0, "fail when 250s resume later than this after the promotion (0: report only)")
	flag.Parse()
	if o.demote != "" && o.demote != "failover" && o.demote != "takeover" || o.demote != "" && o.takeover {
		fmt.Fprintln(os.Stderr, "failover: -demote is failover or takeover, and goes without -takeover")
		os.Exit(2)
	}
	redis.SetLogger(quietLogger{}) // every failed dial to the killed master would be printed
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "failover:", err)
		os.Exit(1)
	}
}

// result is the outcome of one message.
type result struct {
	account int
	subject string
	code    int // 250, the SMTP reply code of a refusal, or 0 for a broken connection
	done    time.Time
}

func run(o options) error {
	dir, err := os.MkdirTemp("", "mailsink-failover-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cdir := filepath.Join(dir, "cluster")
	start := exec.Command(o.script, "start", cdir)
	start.Env = append(os.Environ(), "REDIS_CLUSTER_REPLICAS="+strconv.Itoa(o.replicas), "REDIS_CLUSTER_NODE_TIMEOUT=2000")
	start.Stderr = os.Stderr
	out, err := start.Output()
	if err != nil {
		return fmt.Errorf("starting the cluster: %w", err)
	}
	defer func() {
		stop := exec.Command(o.script, "stop", cdir)
		stop.Stderr = io.Discard
		_ = stop.Run()
	}()
	var seeds string
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "MAILSINK_TEST_REDIS_CLUSTER="); ok {
			seeds = v
		}
	}
	if seeds == "" {
		return errors.New("the cluster script printed no seeds")
	}

	accountsFile := filepath.Join(dir, "accounts.yaml")
	var yaml strings.Builder
	yaml.WriteString("accounts:\n")
	for i := range accounts {
		fmt.Fprintf(&yaml, "  - slug: fo%d\n    name: Failover %d\n    apiKeys: [key-%d]\n    domains: [fo%d.test]\n", i, i, i, i)
	}
	if err := os.WriteFile(accountsFile, []byte(yaml.String()), 0o600); err != nil {
		return err
	}
	prefix := "mailsinkfailover:"
	env := map[string]string{
		"MAILSINK_REDIS_CLUSTER":      seeds,
		"MAILSINK_REDIS_PREFIX":       prefix,
		"MAILSINK_REDIS_ACK_REPLICAS": strconv.Itoa(o.ack),
		"MAILSINK_REDIS_ACK_TIMEOUT":  o.ackTimeout.String(),
		"MAILSINK_SMTP_ADDR":          "127.0.0.1:0",
		"MAILSINK_HTTP_ADDR":          "127.0.0.1:0",
		"MAILSINK_ACCOUNTS_FILE":      accountsFile,
		"MAILSINK_STORE_TIMEOUT":      "5s",
		"MAILSINK_RETENTION_MAX_AGE":  "0",
		"MAILSINK_DATA_DIR":           filepath.Join(dir, "data"),
	}
	cfg, err := config.Load(func(k string) string { return env[k] }, os.ReadFile)
	if err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(dir, "mailsink.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := app.Start(ctx, cfg, slog.New(slog.NewTextHandler(logFile, nil)))
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = a.Shutdown(sctx)
	}()

	admin := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(seeds, ",")})
	defer admin.Close()
	// The master of each account's slot; the victim is account 0's.
	shardOf := make([]string, accounts)
	for i, acc := range cfg.Accounts {
		node, err := admin.MasterForKey(ctx, prefix+"{"+acc.ID+"}:all")
		if err != nil {
			return err
		}
		shardOf[i] = node.Options().Addr
	}
	victim := shardOf[0]
	victimSlot, err := admin.ClusterKeySlot(ctx, prefix+"{"+cfg.Accounts[0].ID+"}:all").Result()
	if err != nil {
		return err
	}
	onVictim := func(i int) bool { return shardOf[i] == victim }
	others := 0
	for i := range accounts {
		if !onVictim(i) {
			others++
		}
	}
	fmt.Printf("failover: cluster %s; victim master %s holds %d of %d accounts; ack replicas %d, timeout %v\n",
		seeds, victim, accounts-others, accounts, o.ack, o.ackTimeout)

	// An event stream per account and a wait for the victim's account,
	// open throughout, as a test suite would hold them.
	httpBase := "http://" + a.HTTPAddr().String()
	streams := make([]*clustertest.EventStream, accounts)
	for i := range accounts {
		if streams[i], err = clustertest.OpenEventStream(ctx, httpBase, fmt.Sprintf("key-%d", i)); err != nil {
			return err
		}
	}
	held := startWait(httpBase, "key-0", "held@fo0.test")

	// Load.
	var (
		mu      sync.Mutex
		results []result
		stop    = make(chan struct{})
		wg      sync.WaitGroup
	)
	smtpAddr := a.SMTPAddr().String()
	interval := time.Duration(int64(time.Second) * int64(o.senders) / int64(o.rate))
	for s := range o.senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			send(smtpAddr, s, interval, stop, func(r result) {
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
			})
		}()
	}
	// /readyz, probed throughout as a load balancer would: it must stay
	// ready, since the other masters serve their accounts.
	var probes, unready int
	var slowest time.Duration
	wg.Add(1)
	go func() {
		defer wg.Done()
		hc := &http.Client{Timeout: 3 * time.Second}
		url := "http://" + a.HTTPAddr().String() + "/readyz"
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			t := time.Now()
			resp, err := hc.Get(url)
			took := time.Since(t)
			mu.Lock()
			probes++
			slowest = max(slowest, took)
			if err != nil || resp.StatusCode != http.StatusOK {
				unready++
			}
			mu.Unlock()
			if err == nil {
				resp.Body.Close()
			}
		}
	}()
	time.Sleep(o.before)

	pid, err := pidOf(cdir, victim)
	if err != nil {
		return err
	}
	var replicaPID int
	var replicaAddr string
	if o.takeover {
		replicaAddr, err = replicaOf(ctx, admin, victim)
		if err != nil {
			return err
		}
		if replicaPID, err = pidOf(cdir, replicaAddr); err != nil {
			return err
		}
		if err := syscall.Kill(replicaPID, syscall.SIGSTOP); err != nil {
			return err
		}
		fmt.Printf("failover: replica %s frozen for %v\n", replicaAddr, o.lag)
		time.Sleep(o.lag)
	}
	// demote asks the replica to take over from the running master.
	demote := func() error {
		args := []any{"CLUSTER", "FAILOVER"}
		if o.demote == "takeover" {
			args = append(args, "TAKEOVER")
		}
		rc := redis.NewClient(&redis.Options{Addr: replicaAddr})
		defer rc.Close()
		if err := rc.Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("%v on %s: %w", args, replicaAddr, err)
		}
		return nil
	}
	what := "kill"
	killAt := time.Now()
	if o.demote != "" {
		what = "request"
		if replicaAddr, err = replicaOf(ctx, admin, victim); err != nil {
			return err
		}
		if err := demote(); err != nil {
			return err
		}
		fmt.Printf("failover: CLUSTER FAILOVER (%s) asked of replica %s; master %s keeps running\n", o.demote, replicaAddr, victim)
	} else {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return err
		}
		fmt.Printf("failover: master %s (pid %d) killed\n", victim, pid)
	}
	if o.takeover {
		_ = syscall.Kill(replicaPID, syscall.SIGCONT)
		rc := redis.NewClient(&redis.Options{Addr: replicaAddr})
		err := rc.Do(ctx, "CLUSTER", "FAILOVER", "TAKEOVER").Err()
		rc.Close()
		if err != nil {
			return fmt.Errorf("CLUSTER FAILOVER TAKEOVER on %s: %w", replicaAddr, err)
		}
	}

	// The promotion, as CLUSTER SHARDS on a surviving node shows it.
	var promotedAt time.Time
	var survivor *redis.Client
	for _, addr := range strings.Split(seeds, ",") {
		if addr != victim {
			survivor = redis.NewClient(&redis.Options{Addr: addr})
			break
		}
	}
	defer survivor.Close()
	asked := killAt
	for promotedAt.IsZero() {
		if time.Since(killAt) > 60*time.Second {
			close(stop)
			wg.Wait()
			return errors.New("no replica was promoted within 60s")
		}
		if newMasterOnline(ctx, survivor, victimSlot, victim) {
			promotedAt = time.Now()
			break
		}
		// Redis gives a manual failover up after 5 seconds.
		if o.demote != "" && time.Since(asked) > 6*time.Second {
			if err := demote(); err != nil {
				return err
			}
			asked = time.Now()
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Printf("failover: promotion visible in CLUSTER SHARDS %.2fs after the %s\n", promotedAt.Sub(killAt).Seconds(), what)
	if o.demote == "" {
		// As an orchestrator would, start the killed node again: it
		// rejoins as a replica of the new master.
		_, port, _ := strings.Cut(victim, ":")
		restart := exec.Command(o.script, "restart", cdir, port)
		restart.Stderr = io.Discard
		if err := restart.Start(); err != nil {
			return err
		}
		defer restart.Wait()
	}

	// Load until the victim's accounts have answered 250 for o.after.
	var resumedAt time.Time
	for resumedAt.IsZero() || time.Since(resumedAt) < o.after {
		if time.Since(promotedAt) > 60*time.Second {
			break
		}
		if resumedAt.IsZero() {
			mu.Lock()
			for _, r := range results {
				if onVictim(r.account) && r.code == 250 && r.done.After(killAt) {
					resumedAt = r.done
					break
				}
			}
			mu.Unlock()
		}
		time.Sleep(20 * time.Millisecond)
	}
	var heldSent time.Time
	if !resumedAt.IsZero() {
		heldSent = sendUntilAcked(smtpAddr, "held@fo0.test", 10*time.Second)
	}
	close(stop)
	wg.Wait()

	// Read back.
	client, err := redisstore.NewClient("", strings.Split(seeds, ","))
	if err != nil {
		return err
	}
	st := redisstore.New(client, redisstore.Options{Prefix: prefix})
	defer st.Close()
	stored := map[string]int{}
	for _, acc := range cfg.Accounts {
		for off := int64(0); ; off += 100 {
			rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
			page, err := st.ListEmails(rctx, store.ListQuery{AccountID: acc.ID, Limit: 100, Offset: off})
			rcancel()
			if err != nil {
				return fmt.Errorf("reading back %s: %w", acc.Slug, err)
			}
			for _, e := range page {
				if e.Subject != nil {
					stored[*e.Subject]++
				}
			}
			if len(page) < 100 {
				break
			}
		}
	}

	var acked, refused, refusedOthers, broken, fivexx, lost, refusedStored, dup int
	var lastRefusal time.Time
	for _, r := range results {
		switch {
		case r.code == 250:
			acked++
			if stored[r.subject] == 0 {
				lost++
			}
		case r.code >= 500:
			fivexx++
		case r.code >= 400:
			refused++
			if !onVictim(r.account) {
				refusedOthers++
			}
			if stored[r.subject] > 0 {
				refusedStored++
			}
		default:
			broken++
		}
		if r.code != 250 && onVictim(r.account) && r.done.After(lastRefusal) {
			lastRefusal = r.done
		}
		if stored[r.subject] > 1 {
			dup++
		}
	}
	fmt.Printf("failover: acked %d, refused %d (%d on other shards), broken connections %d, 5xx %d, lost %d, refused but stored %d, duplicates %d\n",
		acked, refused, refusedOthers, broken, fivexx, lost, refusedStored, dup)
	fmt.Printf("failover: /readyz probed %d times every 200ms: %d not ready, slowest %dms\n", probes, unready, slowest.Milliseconds())
	var resume time.Duration
	if resumedAt.IsZero() {
		fmt.Println("failover: the victim's accounts never answered 250 again")
	} else {
		resume = max(resumedAt.Sub(promotedAt), 0)
		after := "no refusal completed after the promotion"
		if lastRefusal.After(promotedAt) {
			after = fmt.Sprintf("last refusal %.2fs after it", lastRefusal.Sub(promotedAt).Seconds())
		}
		fmt.Printf("failover: %s to promotion %.2fs (Redis's doing); promotion to first 250 %.2fs; %s\n",
			what, promotedAt.Sub(killAt).Seconds(), resume.Seconds(), after)
	}

	// Every email acknowledged (and not lost) must reach its account's
	// stream; the held wait must answer its email when it lands.
	want := make([][]string, accounts)
	for _, r := range results {
		if r.code == 250 && stored[r.subject] > 0 {
			want[r.account] = append(want[r.account], r.subject)
		}
	}
	var unstreamed, reconnects, streamed int
	drain := time.Now().Add(15 * time.Second)
	for i, st := range streams {
		for len(st.Missing(want[i])) > 0 && time.Now().Before(drain) {
			time.Sleep(20 * time.Millisecond)
		}
		unstreamed += len(st.Missing(want[i]))
		streamed += len(want[i])
		reconnects += st.Reconnects()
	}
	fmt.Printf("failover: event streams (one per account): %d of %d acknowledged emails never streamed; %d reconnects\n",
		unstreamed, streamed, reconnects)
	heldMissed := !resumedAt.IsZero() && heldSent.IsZero()
	if !heldSent.IsZero() {
		<-held.done
		heldMissed = !held.got || held.answered.Sub(held.started) >= waitFor-500*time.Millisecond
		fmt.Printf("failover: the wait held through the failover answered %d (its email listed: %v) %dms after its email's 250\n",
			held.status, held.got, held.answered.Sub(heldSent).Milliseconds())
	}

	var problems []string
	if unstreamed > 0 {
		problems = append(problems, fmt.Sprintf("%d acknowledged emails never reached the event stream", unstreamed))
	}
	if heldMissed {
		problems = append(problems, "the held wait's email was not acknowledged, or the wait did not answer it when it landed")
	}
	if lost > 0 && o.ack > 0 {
		problems = append(problems, fmt.Sprintf("%d acknowledged emails lost with replica acknowledgement on", lost))
	}
	if refusedStored > 0 {
		problems = append(problems, fmt.Sprintf("%d refused emails stored", refusedStored))
	}
	if fivexx > 0 {
		problems = append(problems, fmt.Sprintf("%d answers of 5xx", fivexx))
	}
	if unready > 0 {
		problems = append(problems, fmt.Sprintf("/readyz was not ready %d times", unready))
	}
	if resumedAt.IsZero() {
		problems = append(problems, "no 250 after the failover")
	} else if o.maxResume > 0 && resume > o.maxResume {
		problems = append(problems, fmt.Sprintf("250s resumed %v after the promotion, over %v", resume, o.maxResume))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	fmt.Println("failover: PASS")
	return nil
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// send sends messages on one connection every interval until stop closes,
// reconnecting after a broken connection, to the accounts in turn.
func send(addr string, sender int, interval time.Duration, stop <-chan struct{}, record func(result)) {
	var c *smtp.Client
	defer func() {
		if c != nil {
			_ = c.Quit()
		}
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		account := (sender + n) % accounts
		subject := fmt.Sprintf("failover %d-%d", sender, n)
		if c == nil {
			var err error
			if c, err = smtp.Dial(addr); err != nil {
				record(result{account: account, subject: subject, done: time.Now()})
				c = nil
				continue
			}
		}
		err := deliver(c, account, subject)
		code := 250
		if err != nil {
			var terr *textproto.Error
			if errors.As(err, &terr) {
				code = terr.Code
				_ = c.Reset()
			} else {
				code = 0
				_ = c.Close()
				c = nil
			}
		}
		record(result{account: account, subject: subject, code: code, done: time.Now()})
	}
}

func deliver(c *smtp.Client, account int, subject string) error {
	if err := c.Mail("load@sender.test"); err != nil {
		return err
	}
	if err := c.Rcpt(fmt.Sprintf("user@fo%d.test", account)); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "From: load@sender.test\r\nTo: user@fo%d.test\r\nSubject: %s\r\n\r\nfailover load\r\n", account, subject); err != nil {
		return err
	}
	return w.Close()
}

// pidOf reads the pid of the node at addr from the cluster script's files.
func pidOf(dir, addr string) (int, error) {
	_, port, _ := strings.Cut(addr, ":")
	b, err := os.ReadFile(filepath.Join(dir, port, "redis.pid"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// replicaOf returns the address of a replica of the master at addr.
func replicaOf(ctx context.Context, admin *redis.ClusterClient, addr string) (string, error) {
	shards, err := admin.ClusterShards(ctx).Result()
	if err != nil {
		return "", err
	}
	for _, sh := range shards {
		var master bool
		var replica string
		for _, n := range sh.Nodes {
			a := fmt.Sprintf("%s:%d", n.IP, n.Port)
			if n.Role == "master" && a == addr {
				master = true
			} else if n.Role == "replica" {
				replica = a
			}
		}
		if master && replica != "" {
			return replica, nil
		}
	}
	return "", fmt.Errorf("no replica of %s", addr)
}

// newMasterOnline reports whether node's CLUSTER SHARDS shows an online
// master other than old for slot.
func newMasterOnline(ctx context.Context, node *redis.Client, slot int64, old string) bool {
	cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	shards, err := node.ClusterShards(cctx).Result()
	if err != nil {
		return false
	}
	for _, sh := range shards {
		for _, n := range sh.Nodes {
			if n.Role != "master" || n.Health != "online" || fmt.Sprintf("%s:%d", n.IP, n.Port) == old {
				continue
			}
			for _, r := range sh.Slots {
				if slot >= r.Start && slot <= r.End {
					return true
				}
			}
		}
	}
	return false
}

// waitFor is the wait of the held list request: the most the API allows.
const waitFor = 60 * time.Second

// heldWait is a list request with wait for one recipient's email.
type heldWait struct {
	started time.Time
	done    chan struct{}
	// The answer, once done is closed.
	answered time.Time
	status   int  // 0 when the request failed
	got      bool // the answer lists the recipient's email
}

func startWait(base, key, recipient string) *heldWait {
	w := &heldWait{started: time.Now(), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		u := fmt.Sprintf("%s/v1/emails?wait=%d&recipient=%s", base, int(waitFor.Seconds()), url.QueryEscape(recipient))
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		w.answered = time.Now()
		if err != nil {
			return
		}
		defer resp.Body.Close()
		w.status = resp.StatusCode
		var page struct {
			Items []struct {
				Recipient string `json:"recipient"`
			} `json:"items"`
		}
		if json.NewDecoder(resp.Body).Decode(&page) == nil {
			w.got = len(page.Items) == 1 && page.Items[0].Recipient == recipient
		}
	}()
	return w
}

// sendUntilAcked sends one message to recipient, again after a refusal,
// for at most limit, and returns when it was acknowledged (zero if never).
func sendUntilAcked(addr, recipient string, limit time.Duration) time.Time {
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		c, err := smtp.Dial(addr)
		if err != nil {
			continue
		}
		err = sendTo(c, recipient)
		c.Close()
		if err == nil {
			return time.Now()
		}
	}
	return time.Time{}
}

func sendTo(c *smtp.Client, recipient string) error {
	if err := c.Mail("load@sender.test"); err != nil {
		return err
	}
	if err := c.Rcpt(recipient); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "From: load@sender.test\r\nTo: %s\r\nSubject: held\r\n\r\nheld\r\n", recipient); err != nil {
		return err
	}
	return w.Close()
}
