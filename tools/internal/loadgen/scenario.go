// Package loadgen drives a running mailsink the way a busy test suite does:
// SMTP ingest at a chosen concurrency and message size, then the list API at
// a chosen store size. It measures on the client side (messages per second,
// latency percentiles) and, when it knows the server's process id, on the
// server side (CPU time and RSS from /proc). It also stores hostile
// messages and reads them through every endpoint (RunReads).
// tools/mailsink-bench is its command line; `make bench` runs its standard
// suite, `make bench-reads` its reads of hostile messages.
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"
)

// Scenario is one measurement.
type Scenario struct {
	Name string
	// Kind is "ingest" (send Messages and confirm they are stored) or
	// "list" (store Messages as a prefill, then time Queries list requests).
	Kind        string
	Messages    int
	Connections int
	Reuse       bool
	Pipeline    bool   // pipeline MAIL, RCPT and DATA (RFC 2920)
	GoSMTP      bool   // send with go-smtp's client instead of the tool's own
	Size        int    // approximate message size in bytes
	Shape       string // ShapePlain or ShapeAttachment
	Recipients  int    // distinct recipients
	PerMessage  int    // RCPTs per message
	Verify      bool   // page through the API to confirm every email is stored
	// AccountSize, for "list", is how many emails the account should hold
	// when the queries run: the prefill stores what earlier scenarios did
	// not, in messages of PerMessage recipients (Messages is then ignored).
	AccountSize int
	Queries     int // list requests ("list" only)
	QueryConns  int // concurrent list clients ("list" only)
	// LoadConns, when above 0 ("list" only), runs an SMTP ingest of 2 KB
	// messages over that many connections while the list requests run, at
	// LoadRate messages per second in all (0: as fast as it goes).
	LoadConns int
	LoadRate  float64
	// CPUProfile, when set, is a file to write the server's CPU profile of
	// the timed phase to (the server must have the pprof listener), over
	// ProfileSeconds (5 when 0).
	CPUProfile     string
	ProfileSeconds int
	// HeapProfile, when set, is a file to write the server's heap profile
	// to right after the timed phase (after a collection: what is live).
	HeapProfile string
	// MailboxSize, when above 0 ("list" only), spreads the prefill over as
	// many recipients as give each about this many emails, so that a list
	// by recipient answers as many whatever the emails earlier scenarios
	// stored (Recipients is then ignored).
	MailboxSize int
}

// Emails returns how many emails the scenario stores.
func (s Scenario) Emails() int { return s.Messages * s.PerMessage }

// Result is what a scenario measured.
type Result struct {
	Scenario
	Backend      string
	MessageBytes int
	// AccountEmails is how many emails the account held when the timed
	// phase ended (this scenario's and earlier ones').
	AccountEmails int
	Ingest        *IngestResult
	Verify        *VerifyResult
	Query         *QueryResult
	// Load is the ingest that ran during the list requests (LoadConns).
	Load *IngestResult
	// Server process during the timed phase (ingest, or the queries of a
	// list scenario); zero when the PID is unknown. An ingest's phase
	// lasts until the server went idle after the last message (settle),
	// so that its CPU figures, and Redis's, count the background work the
	// messages caused.
	Before, After ProcSample
	// PeakAnon is the largest RssAnon of the server seen during the timed
	// phase, sampled every 20 ms: its own memory at its peak, without the
	// embedded store's memory-mapped file that VmHWM counts.
	PeakAnon int64
	// RedisCPU is the CPU time redis-server spent during the timed phase,
	// from INFO cpu; zero when the store is not Redis.
	RedisCPU time.Duration
	// RedisMemory is Redis's used_memory after the scenario.
	RedisMemory int64
	// RedisUsedBefore and RedisUsedAfter are Redis's used_memory right
	// before and right after the timed phase (before verification).
	RedisUsedBefore, RedisUsedAfter int64
	// RedisCommands is how many commands Redis processed during the timed
	// phase, from every client: far more than the phase's own operations
	// means other work shared the Redis.
	RedisCommands int64
	// ListServer is, for a list scenario on mailsink, its own
	// request-duration histogram of the list route over the timed phase:
	// requests answered within 1 ms (le="0.001") and in all, load included.
	ListServer *listHistogram
	// RedisCmds is INFO commandstats over the timed phase, most time first.
	RedisCmds []CmdStat
	// Profile is the top of the server's CPU profile of the timed phase
	// (go tool pprof -top), when one was taken; Heap the top of its heap
	// profile right after it (in use).
	Profile, Heap string
	// ToolCPU is the load tool's own CPU time during the timed phase.
	ToolCPU time.Duration
	// MachineBusy and MachineSteal are the shares of all CPUs' time during
	// the timed phase that were busy (any process) and stolen by the
	// hypervisor: near 1 busy means the phase was CPU-bound.
	MachineBusy, MachineSteal float64
}

// ServerCPU returns the server's CPU time during the timed phase.
func (r *Result) ServerCPU() time.Duration { return r.After.CPU - r.Before.CPU }

// CPUPerOp returns the server's CPU time per message (ingest) or per request
// (list).
func (r *Result) CPUPerOp() time.Duration {
	n := 0
	switch {
	case r.Query != nil:
		n = r.Query.Requests
	case r.Ingest != nil:
		n = r.Ingest.Sent
	}
	if n == 0 || r.After.CPU == 0 {
		return 0
	}
	return r.ServerCPU() / time.Duration(n)
}

// Runner runs scenarios against one target, keeping count of the emails in
// its account.
type Runner struct {
	Target Target
	// Server, when the runner started mailsink itself, gives Redis figures.
	Server *Server
	Log    io.Writer
	// SettleMax is the longest the runner waits for the server to go
	// idle after an ingest and before timing a list (settle); NewRunner
	// sets settleMax.
	SettleMax time.Duration
	emails    int
	seq       int
	run       string
	// listed is the messages of the last list scenario that stored any:
	// a list scenario with nothing to store looks up their recipients.
	listed *Messages
}

// NewRunner returns a Runner for t; srv may be nil.
func NewRunner(t Target, srv *Server, log io.Writer) *Runner {
	tag, err := randomHex(4)
	if err != nil {
		tag = strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	return &Runner{Target: t, Server: srv, Log: log, run: tag, SettleMax: settleMax}
}

func (r *Runner) logf(format string, args ...any) {
	if r.Log != nil {
		fmt.Fprintf(r.Log, format+"\n", args...)
	}
}

// Run runs s and returns what it measured. A run that fails part way
// returns what it has with the error.
func (r *Runner) Run(ctx context.Context, s Scenario) (*Result, error) {
	r.seq++
	token := fmt.Sprintf("%s-%d", r.run, r.seq)
	m, err := NewMessages(token, s.Recipients, s.PerMessage, s.Size, s.Shape)
	if err != nil {
		return nil, err
	}
	res := &Result{Scenario: s, Backend: r.Target.Backend, MessageBytes: m.Size()}
	client := NewClient(r.Target.HTTP, r.Target.APIKey, max(s.QueryConns, 4))
	client.API = r.Target.API
	defer client.HTTP.CloseIdleConnections()
	ingest := IngestOptions{Messages: s.Messages, Connections: s.Connections, Reuse: s.Reuse, Pipeline: s.Pipeline, GoSMTP: s.GoSMTP}

	if s.Kind == "list" && s.AccountSize > 0 {
		s.Messages = max((s.AccountSize-r.emails+s.PerMessage-1)/s.PerMessage, 0)
		ingest.Messages = s.Messages
		if s.MailboxSize > 0 && s.Messages > 0 {
			s.Recipients = max(s.Emails()/s.MailboxSize, s.PerMessage)
			if m, err = NewMessages(token, s.Recipients, s.PerMessage, s.Size, s.Shape); err != nil {
				return nil, err
			}
		}
		res.Scenario = s
	}
	if s.Kind == "list" && s.Messages == 0 && r.listed != nil {
		m = r.listed
		res.MessageBytes = m.Size()
	}
	if s.Kind == "list" && s.Messages > 0 {
		r.listed = m
		r.logf("%s: prefill %d emails (%d messages x %d recipients each, %d recipients)", s.Name, s.Emails(), s.Messages, s.PerMessage, s.Recipients)
		in, err := Ingest(ctx, r.Target.SMTP, m, ingest)
		if in != nil {
			r.emails += in.Sent * s.PerMessage
		}
		if err != nil {
			return res, fmt.Errorf("prefill: %w", err)
		}
		r.logf("%s: prefill took %s (%.0f msg/s, %.0f emails/s)", s.Name, in.Elapsed.Round(time.Millisecond), in.PerSecond(), in.PerSecond()*float64(s.PerMessage))
		res.Ingest = in
	}
	if s.Kind == "list" {
		// The requests are timed alone, not beside the background work
		// of the prefill or of the rows before.
		r.settle(ctx, s.Name)
	}

	stopProfile, err := r.startProfile(ctx, s)
	if err != nil {
		return res, err
	}
	redisBefore, cmdsBefore := r.redisCPU(ctx), r.redisCommands(ctx)
	statsBefore := r.redisCommandStats(ctx)
	var histBefore listHistogram
	haveHist := false
	if s.Kind == "list" && r.Target.API == APIMailsink {
		var herr error
		histBefore, herr = scrapeListHistogram(ctx, r.Target.HTTP)
		haveHist = herr == nil
	}
	res.RedisUsedBefore = r.redisUsedMemory(ctx)
	if res.Before, err = r.proc(); err != nil {
		return res, err
	}
	toolBefore := SelfCPU()
	machineBefore, _ := ReadMachine()
	stopSampling := r.samplePeakAnon(&res.PeakAnon)
	switch s.Kind {
	case "ingest":
		r.logf("%s: %d messages of %d bytes over %d connections (reuse=%v, pipeline=%v, gosmtp=%v)", s.Name, s.Messages, res.MessageBytes, s.Connections, s.Reuse, s.Pipeline, s.GoSMTP)
		res.Ingest, err = Ingest(ctx, r.Target.SMTP, m, ingest)
		if res.Ingest != nil {
			r.emails += res.Ingest.Sent * s.PerMessage
		}
	case "list":
		r.logf("%s: %d list requests over %d clients, account holds %d emails", s.Name, s.Queries, s.QueryConns, r.emails)
		stopLoad := r.startLoad(ctx, s, token)
		res.Query, err = client.ListLatency(ctx, m, QueryOptions{Queries: s.Queries, Concurrency: s.QueryConns})
		var lerr error
		if res.Load, lerr = stopLoad(); res.Load != nil {
			r.emails += res.Load.Sent
		}
		if err == nil {
			err = lerr
		}
	default:
		err = fmt.Errorf("unknown scenario kind %q", s.Kind)
	}
	if s.Kind == "ingest" && err == nil {
		// The CPU figures count the work the messages left the server
		// (search's digests of new mail) as well as their delivery.
		r.settle(ctx, s.Name)
	}
	res.AccountEmails = r.emails
	res.RedisUsedAfter = r.redisUsedMemory(ctx)
	stopSampling()
	after, perr := r.proc()
	res.After = after
	res.ToolCPU = SelfCPU() - toolBefore
	if machineAfter, err := ReadMachine(); err == nil {
		res.MachineBusy, res.MachineSteal = BusyShare(machineBefore, machineAfter)
	}
	if rc := r.redisCPU(ctx); rc > 0 && redisBefore > 0 {
		res.RedisCPU = rc - redisBefore
		res.RedisCommands = r.redisCommands(ctx) - cmdsBefore
		res.RedisCmds = commandStatsDelta(statsBefore, r.redisCommandStats(ctx))
	}
	if haveHist {
		if h, err := scrapeListHistogram(ctx, r.Target.HTTP); err == nil {
			res.ListServer = &listHistogram{Fast: h.Fast - histBefore.Fast, Total: h.Total - histBefore.Total}
		}
	}
	if perr2 := stopProfile(); err == nil {
		err = perr2
	}
	if s.HeapProfile != "" && err == nil {
		err = r.heapProfile(ctx, s.HeapProfile)
	}
	if err != nil {
		return res, err
	}
	if perr != nil {
		return res, perr
	}
	r.logf("%s: %s", s.Name, res.Summary())

	if s.Verify {
		sent := res.Ingest.Sent
		if res.Ingest.Failed > 0 {
			return res, fmt.Errorf("%d messages failed: %v", res.Ingest.Failed, res.Ingest.FirstErrs)
		}
		res.Verify, err = client.Verify(ctx, m, sent)
		if err != nil {
			return res, fmt.Errorf("verify: %w", err)
		}
		v := res.Verify
		r.logf("%s: verified %d/%d emails through the API in %d requests (%s): missing %d, unexpected %d, duplicates %d",
			s.Name, v.Found, v.Expected, v.Requests, v.Elapsed.Round(time.Millisecond), v.Missing, v.Unexpected, v.Duplicates)
		if !v.OK() {
			return res, fmt.Errorf("verify: %d of %d emails found, %d missing, %d unexpected, %d duplicates", v.Found, v.Expected, v.Missing, v.Unexpected, v.Duplicates)
		}
	}
	if r.Server != nil {
		if info, err := r.Server.RedisInfo(ctx, "memory"); err == nil && info != nil {
			res.RedisMemory, _ = strconv.ParseInt(info["used_memory"], 10, 64)
		}
	}
	return res, nil
}

// Bounds of settle: the server is idle once it uses less than idleCPU of
// one CPU over idleWindow (the background work that follows an ingest,
// search's digests and the embedded store's compactions, is done); settle
// waits at most settleMax by default (Runner.SettleMax).
const (
	idleWindow = time.Second
	idleCPU    = 0.02
	settleMax  = 2 * time.Minute
)

// settle waits until the server has done the work a phase left it: search
// makes the digests of new mail in the background, and a phase that ended
// before they did would leave their CPU out of its figures and put it into
// the next phase's. Without the server's PID there is nothing to watch.
func (r *Runner) settle(ctx context.Context, name string) {
	if r.Target.PID == 0 {
		return
	}
	start := time.Now()
	prev, err := r.proc()
	for err == nil && time.Since(start) < r.SettleMax {
		select {
		case <-ctx.Done():
			return
		case <-time.After(idleWindow):
		}
		var now ProcSample
		if now, err = r.proc(); err == nil {
			if float64(now.CPU-prev.CPU) < idleCPU*float64(idleWindow) {
				if waited := time.Since(start); waited > idleWindow {
					r.logf("%s: the server went idle %s after the phase", name, waited.Round(100*time.Millisecond))
				}
				return
			}
			prev = now
		}
	}
	r.logf("%s: the server was still busy %s after the phase", name, time.Since(start).Round(time.Second))
}

// Summary is one line of the result's main figures.
func (r *Result) Summary() string {
	var s string
	switch {
	case r.Query != nil:
		q := r.Query
		s = fmt.Sprintf("%d requests in %s (%.0f req/s), latency p50 %s p99 %s max %s",
			q.Requests, q.Elapsed.Round(time.Millisecond), float64(q.Requests)/q.Elapsed.Seconds(),
			fmtDur(q.Latency.Percentile(50)), fmtDur(q.Latency.Percentile(99)), fmtDur(q.Latency.Max()))
	case r.Ingest != nil:
		in := r.Ingest
		s = fmt.Sprintf("%d stored, %d failed in %s: %.0f msg/s, latency p50 %s p99 %s",
			in.Sent, in.Failed, in.Elapsed.Round(time.Millisecond), in.PerSecond(),
			fmtDur(in.Latency.Percentile(50)), fmtDur(in.Latency.Percentile(99)))
	}
	if r.After.CPU > 0 {
		s += fmt.Sprintf("; server CPU %s (%s per op), RSS %s (anon %s, peak %s, anon peak %s)",
			r.ServerCPU().Round(time.Millisecond), fmtDur(r.CPUPerOp()), MiB(r.After.RSS), MiB(r.After.RSSAnon), MiB(r.After.HWM), MiB(r.PeakAnon))
	}
	if r.RedisCPU > 0 {
		s += fmt.Sprintf("; redis-server CPU %s, %d commands from all clients", r.RedisCPU.Round(time.Millisecond), r.RedisCommands)
	}
	s += fmt.Sprintf("; load tool CPU %s; machine %.0f%% busy, %.0f%% stolen", r.ToolCPU.Round(time.Millisecond), 100*r.MachineBusy, 100*r.MachineSteal)
	return s
}

// samplePeakAnon keeps the server's largest RssAnon in peak until the
// returned function is called.
func (r *Runner) samplePeakAnon(peak *int64) (stop func()) {
	return samplePeakAnon(r.Target.PID, peak)
}

// samplePeakAnon keeps the largest RssAnon of process pid (none when pid
// is 0), sampled every 20 ms, in peak until the returned function is
// called.
func samplePeakAnon(pid int, peak *int64) (stop func()) {
	if pid == 0 {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if s, err := ReadProc(pid); err == nil {
				*peak = max(*peak, s.RSSAnon)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

func (r *Runner) proc() (ProcSample, error) {
	if r.Target.PID == 0 {
		return ProcSample{}, nil
	}
	return ReadProc(r.Target.PID)
}

// redisCPU returns redis-server's user+system CPU time, or 0.
func (r *Runner) redisCPU(ctx context.Context) time.Duration {
	if r.Server == nil {
		return 0
	}
	info, err := r.Server.RedisInfo(ctx, "cpu")
	if err != nil || info == nil {
		return 0
	}
	user, _ := strconv.ParseFloat(info["used_cpu_user"], 64)
	sys, _ := strconv.ParseFloat(info["used_cpu_sys"], 64)
	return time.Duration((user + sys) * float64(time.Second))
}

// redisUsedMemory returns Redis's used_memory, or 0.
func (r *Runner) redisUsedMemory(ctx context.Context) int64 {
	if r.Server == nil {
		return 0
	}
	info, err := r.Server.RedisInfo(ctx, "memory")
	if err != nil || info == nil {
		return 0
	}
	n, _ := strconv.ParseInt(info["used_memory"], 10, 64)
	return n
}

// startLoad starts the ingest s asks to run during its list requests
// (LoadConns), of 2 KB messages to 100 recipients of their own, and returns
// the function that stops it and returns what it did; without LoadConns
// that function returns nil.
func (r *Runner) startLoad(ctx context.Context, s Scenario, token string) func() (*IngestResult, error) {
	if s.LoadConns <= 0 {
		return func() (*IngestResult, error) { return nil, nil }
	}
	m, err := NewMessages(token+"-load", 100, 1, 2048, ShapePlain)
	if err != nil {
		return func() (*IngestResult, error) { return nil, err }
	}
	stop := make(chan struct{})
	type outcome struct {
		res *IngestResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := Ingest(ctx, r.Target.SMTP, m, IngestOptions{Messages: 1 << 30, Connections: s.LoadConns, Reuse: true, Rate: s.LoadRate, Stop: stop})
		done <- outcome{res, err}
	}()
	r.logf("%s: ingest load of %d connections at %.0f msg/s (0: flat out) runs during the requests", s.Name, s.LoadConns, s.LoadRate)
	return func() (*IngestResult, error) {
		close(stop)
		o := <-done
		if o.res != nil {
			r.logf("%s: ingest load stored %d messages (%d failed) in %s: %.0f msg/s", s.Name, o.res.Sent, o.res.Failed, o.res.Elapsed.Round(time.Millisecond), o.res.PerSecond())
			if o.err == nil && o.res.Failed > 0 {
				o.err = fmt.Errorf("ingest load: %d messages failed: %v", o.res.Failed, o.res.FirstErrs)
			}
		}
		return o.res, o.err
	}
}

// redisCommands returns Redis's total_commands_processed, or 0.
func (r *Runner) redisCommands(ctx context.Context) int64 {
	if r.Server == nil {
		return 0
	}
	info, err := r.Server.RedisInfo(ctx, "stats")
	if err != nil || info == nil {
		return 0
	}
	n, _ := strconv.ParseInt(info["total_commands_processed"], 10, 64)
	return n
}

// heapProfile writes the server's heap profile, taken after a collection,
// to file.
func (r *Runner) heapProfile(ctx context.Context, file string) error {
	if r.Target.PProf == "" {
		return fmt.Errorf("a heap profile needs the server's pprof listener (MAILSINK_PPROF_ADDR)")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.Target.PProf+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET heap profile: %s", resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// startProfile starts a CPU profile of the server when s asks for one; the
// returned function waits for it and writes it. The profile runs for a
// fixed time (pprof's interface), so the timed phase should last at least
// as long: it is the scenario's estimated duration, at least 5s.
func (r *Runner) startProfile(ctx context.Context, s Scenario) (func() error, error) {
	if s.CPUProfile == "" {
		return func() error { return nil }, nil
	}
	if r.Target.PProf == "" {
		return nil, fmt.Errorf("a CPU profile needs the server's pprof listener (MAILSINK_PPROF_ADDR)")
	}
	seconds := s.ProfileSeconds
	if seconds <= 0 {
		seconds = 5
	}
	wait := cpuProfile(ctx, r.Target.PProf, seconds, s.CPUProfile)
	return func() error {
		err := wait()
		if err == nil {
			r.logf("%s: CPU profile of the first %ds written to %s", s.Name, seconds, s.CPUProfile)
		}
		return err
	}, nil
}

// cpuProfile starts a CPU profile of secs seconds of the server whose pprof
// listener is pprofURL, to be written to path; the returned function waits
// for it (at most a minute past its end).
func cpuProfile(ctx context.Context, pprofURL string, secs int, path string) func() error {
	done := make(chan error, 1)
	go func() {
		if pprofURL == "" {
			done <- errors.New("the server has no pprof listener (MAILSINK_PPROF_ADDR)")
			return
		}
		url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", pprofURL, secs)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			done <- err
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			done <- fmt.Errorf("GET %s: %s", url, resp.Status)
			return
		}
		f, err := os.Create(path)
		if err != nil {
			done <- err
			return
		}
		_, err = io.Copy(f, resp.Body)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		done <- err
	}()
	return func() error {
		select {
		case err := <-done:
			return err
		case <-time.After(time.Duration(secs+60) * time.Second):
			return errors.New("the CPU profile did not arrive")
		}
	}
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	}
}
