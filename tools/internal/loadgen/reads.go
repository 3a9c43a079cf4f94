package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ReadEndpoint is one way to read a stored email: an API endpoint (API
// key) or a dashboard one (session cookie).
type ReadEndpoint struct {
	// Path has {id} for the email's id and {i} for an attachment index;
	// a dashboard path has /ui/a/{account}/ for the path the session reads
	// under.
	Path      string
	Dashboard bool
}

// ReadEndpoints returns every endpoint that reads an email's content.
func ReadEndpoints() []ReadEndpoint {
	return []ReadEndpoint{
		{Path: "/v1/emails/{id}"},
		{Path: "/v1/emails/{id}/raw"},
		{Path: "/v1/emails/{id}/attachments/{i}"},
		{Path: "/v1/emails/{id}/links"},
		{Path: "/v1/emails/{id}/codes"},
		{Path: "/v1/emails/{id}/transcript"},
		{Path: "/ui/a/{account}/preview/{id}", Dashboard: true},
		{Path: "/ui/a/{account}/emails/{id}/raw", Dashboard: true},
		{Path: "/ui/a/{account}/emails/{id}/attachments/{i}", Dashboard: true},
	}
}

// ReadsOptions describe a reads benchmark.
type ReadsOptions struct {
	Shapes    []HostileShape
	Endpoints []ReadEndpoint
	// Size is the size of every hostile message: the server's
	// MAILSINK_MAX_MESSAGE_BYTES.
	Size int
	// Concurrency is how many requests a batch sends at once.
	Concurrency int
	// OtherEmails are created in the other account (Target.OtherKey),
	// spread over OtherRecipients, before the reads; one client lists
	// them by recipient every ListEvery throughout.
	OtherEmails, OtherRecipients int
	ListEvery                    time.Duration
	// Baseline is how long the server's CPU is measured with only that
	// client running.
	Baseline time.Duration
	Log      func(format string, args ...any)
}

// DefaultReadsOptions are the benchmark's settings: every shape through
// every endpoint, eight requests at once, at the default size limit.
func DefaultReadsOptions(size int) ReadsOptions {
	return ReadsOptions{Shapes: HostileShapes(), Endpoints: ReadEndpoints(), Size: size, Concurrency: 8,
		OtherEmails: 1000, OtherRecipients: 40, ListEvery: 20 * time.Millisecond, Baseline: 3 * time.Second}
}

// ReadShape is a hostile message as the benchmark built it.
type ReadShape struct {
	HostileShape
	Bytes int
	Count string
	// Store is how long storing each copy over SMTP took.
	Store Latencies
}

// ReadBatch is what one batch of requests for one copy of a shape at one
// endpoint measured.
type ReadBatch struct {
	Shape    string
	Endpoint string
	// Status counts the answers by status code; 0 counts requests that
	// got no answer (Errors says why).
	Status map[int]int
	Errors []string
	// Bytes is the size of the largest 200 answer.
	Bytes int64
	// Wall is each request's time from sending it to having read its
	// whole answer.
	Wall Latencies
	// CPU is the server's CPU time from before the first request to after
	// the last answer.
	CPU time.Duration
	// HWM is the server's VmHWM after the batch (reset before it when
	// ReadsResult.HWMReset); PeakAnon its largest RssAnon sampled during
	// the batch.
	HWM, PeakAnon int64
	// Other is the other account's list requests begun during the batch,
	// OtherErrors those that failed.
	Other       Latencies
	OtherErrors int
}

// CPUPerRequest is the batch's server CPU divided by its requests that
// were served: a request refused for the read budget (503) waited and
// cost next to nothing.
func (b *ReadBatch) CPUPerRequest() time.Duration {
	return b.CPU / time.Duration(max(len(b.Wall)-b.Status[http.StatusServiceUnavailable], 1))
}

// ReadsResult is a reads benchmark on one server.
type ReadsResult struct {
	Backend string
	Shapes  []*ReadShape
	Batches []*ReadBatch
	// HWMReset says whether VmHWM could be reset before each batch
	// (/proc/PID/clear_refs); if not, each batch's HWM is the peak of the
	// server's life so far.
	HWMReset bool
	// BaselineCPU is the server's CPU per second with only the other
	// account's client running, and Baseline that client's latencies
	// then.
	BaselineCPU time.Duration
	Baseline    Latencies
	// Other is every list request of the other account's client begun
	// during a batch; OtherErrors those that failed.
	Other       Latencies
	OtherErrors int
	Elapsed     time.Duration
	ToolCPU     time.Duration
	// MachineBusy and MachineSteal are the shares of all CPUs' time that
	// were busy and stolen during the run.
	MachineBusy, MachineSteal float64
	// OtherEmails and OtherRecipients are what the other account held.
	OtherEmails, OtherRecipients int
}

// reads is one run of the benchmark.
type reads struct {
	t       Target
	o       ReadsOptions
	api     *http.Client // the batches' requests
	other   *Client      // the other account's list requests
	cookie  *http.Cookie // the dashboard session of t.APIKey's account
	base    string       // the path under which that session reads
	run     string
	copies  int
	samples struct {
		sync.Mutex
		list []listSample
	}
}

// listSample is one list request of the other account.
type listSample struct {
	start   time.Time
	latency time.Duration
	err     error
}

// RunReads stores each shape of o at o.Size in t's account and reads it
// through each endpoint, o.Concurrency requests at once, while one client
// lists the emails of the other account (t.OtherKey); it measures each
// batch on the client side and, from /proc, the server's CPU and peak RSS.
func RunReads(ctx context.Context, t Target, o ReadsOptions) (*ReadsResult, error) {
	if t.OtherKey == "" || t.PID == 0 {
		return nil, errors.New("the reads benchmark needs a server with a second account and a known process id")
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	tag, err := randomHex(4)
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{MaxIdleConnsPerHost: o.Concurrency, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	r := &reads{t: t, o: o, run: tag, api: &http.Client{Transport: tr, Timeout: 3 * time.Minute},
		other: NewClient(t.HTTP, t.OtherKey, 1)}
	defer r.other.HTTP.CloseIdleConnections()
	res := &ReadsResult{Backend: t.Backend, OtherEmails: o.OtherEmails, OtherRecipients: o.OtherRecipients}
	if r.cookie, r.base, err = r.signIn(ctx); err != nil {
		return res, err
	}
	o.Log("reads: creating %d emails in the other account", o.OtherEmails)
	if err := r.seedOther(ctx); err != nil {
		return res, err
	}

	start, toolBefore := time.Now(), SelfCPU()
	machineBefore, _ := ReadMachine()
	stopList := r.listOther(ctx)
	defer stopList()
	before, err := ReadProc(t.PID)
	if err != nil {
		return res, err
	}
	baselineStart := time.Now()
	select {
	case <-time.After(o.Baseline):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	after, err := ReadProc(t.PID)
	if err != nil {
		return res, err
	}
	res.BaselineCPU = time.Duration(float64(after.CPU-before.CPU) / o.Baseline.Seconds())
	res.Baseline, _ = r.listedBetween(baselineStart, time.Now())
	o.Log("reads: with only the other account's list requests, the server used %s of CPU a second, and their p99 was %s over %d requests",
		fmtDur(res.BaselineCPU), fmtDur(res.Baseline.Percentile(99)), len(res.Baseline))
	res.HWMReset = resetPeak(t.PID) == nil

	for _, s := range o.Shapes {
		raw, count := s.Build(o.Size)
		shape := &ReadShape{HostileShape: s, Bytes: len(raw), Count: count}
		res.Shapes = append(res.Shapes, shape)
		o.Log("reads: %s: %d bytes, %s", s.Name, len(raw), count)
		for _, e := range o.Endpoints {
			b, err := r.batch(ctx, shape, e, raw, res.HWMReset)
			if b != nil {
				res.Batches = append(res.Batches, b)
				res.Other = append(res.Other, b.Other...)
				res.OtherErrors += b.OtherErrors
			}
			if err != nil {
				return res, fmt.Errorf("%s %s: %w", s.Name, e.Path, err)
			}
		}
	}
	res.Elapsed = time.Since(start)
	res.ToolCPU = SelfCPU() - toolBefore
	if machineAfter, err := ReadMachine(); err == nil {
		res.MachineBusy, res.MachineSteal = BusyShare(machineBefore, machineAfter)
	}
	return res, nil
}

// batch stores a copy of raw of its own (so that no batch finds the parse
// of another in the server's cache), sends o.Concurrency requests for it
// to e at once, reads every answer to its end, and deletes the copy.
func (r *reads) batch(ctx context.Context, shape *ReadShape, e ReadEndpoint, raw []byte, resetHWM bool) (*ReadBatch, error) {
	t0 := time.Now()
	id, err := r.store(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("store a copy: %w", err)
	}
	shape.Store = append(shape.Store, time.Since(t0))
	path := strings.NewReplacer("/ui/a/{account}/", r.base, "{id}", id, "{i}", strconv.Itoa(shape.Attachment)).Replace(e.Path)
	b := &ReadBatch{Shape: shape.Name, Endpoint: e.Path, Status: map[int]int{}}
	if resetHWM {
		if err := resetPeak(r.t.PID); err != nil {
			return nil, err
		}
	}
	before, err := ReadProc(r.t.PID)
	if err != nil {
		return nil, err
	}
	stopSampling := samplePeakAnon(r.t.PID, &b.PeakAnon)
	type answer struct {
		status int
		bytes  int64
		wall   time.Duration
		err    error
	}
	answers := make([]answer, r.o.Concurrency)
	var wg sync.WaitGroup
	begin := make(chan struct{})
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-begin
			t := time.Now()
			a := &answers[i]
			a.status, a.bytes, a.err = r.get(ctx, path, e.Dashboard)
			a.wall = time.Since(t)
		}()
	}
	started := time.Now()
	close(begin)
	wg.Wait()
	ended := time.Now()
	stopSampling()
	after, err := ReadProc(r.t.PID)
	if err != nil {
		return nil, err
	}
	b.CPU, b.HWM = after.CPU-before.CPU, after.HWM
	for _, a := range answers {
		b.Status[a.status]++
		b.Wall = append(b.Wall, a.wall)
		if a.err != nil {
			b.Errors = append(b.Errors, a.err.Error())
		}
		if a.status == http.StatusOK {
			b.Bytes = max(b.Bytes, a.bytes)
		}
	}
	b.Other, b.OtherErrors = r.listedBetween(started, ended)
	r.o.Log("reads: %s %s: %s in %s (max), server CPU %s (%s per request), VmHWM %s, anon peak %s; other account's list p99 %s over %d requests",
		shape.Name, e.Path, statusText(b.Status), fmtDur(b.Wall.Max()), fmtDur(b.CPU), fmtDur(b.CPUPerRequest()), MiB(b.HWM), MiB(b.PeakAnon),
		fmtDur(b.Other.Percentile(99)), len(b.Other))
	if err := r.delete(ctx, id); err != nil {
		return b, fmt.Errorf("delete the copy: %w", err)
	}
	return b, ctx.Err()
}

// store sends raw over SMTP, authenticated with the API key so that it
// lands in its account, to a recipient of its own, and returns the stored
// email's id.
func (r *reads) store(ctx context.Context, raw []byte) (string, error) {
	r.copies++
	rcpt := fmt.Sprintf("copy%d.%s@hostile.test", r.copies, r.run)
	c, err := dialRaw(ctx, r.t.SMTP, false)
	if err != nil {
		return "", err
	}
	defer c.close()
	if err := c.auth(r.t.APIKey); err != nil {
		return "", fmt.Errorf("AUTH: %w", err)
	}
	if err := c.transaction("hostile@bench.test", []string{rcpt}, raw); err != nil {
		return "", err
	}
	c.quit()
	api := &Client{Base: r.t.HTTP, Key: r.t.APIKey, HTTP: r.api}
	items, err := api.list(ctx, rcpt, 2, 0)
	if err != nil {
		return "", err
	}
	if len(items) != 1 {
		return "", fmt.Errorf("%d emails listed for %s, want 1", len(items), rcpt)
	}
	return items[0].ID, nil
}

// get sends one GET and reads its answer to the end; a 503 must say when
// to retry.
func (r *reads) get(ctx context.Context, path string, dashboard bool) (status int, n int64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.t.HTTP+path, nil)
	if err != nil {
		return 0, 0, err
	}
	if dashboard {
		req.AddCookie(r.cookie)
	} else {
		req.Header.Set("Authorization", "Bearer "+r.t.APIKey)
	}
	resp, err := r.api.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	n, err = io.Copy(io.Discard, resp.Body)
	if err == nil && resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
		err = errors.New("503 without Retry-After")
	}
	return resp.StatusCode, n, err
}

// delete deletes the email with id.
func (r *reads) delete(ctx context.Context, id string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, r.t.HTTP+"/v1/emails/"+id, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+r.t.APIKey)
	resp, err := r.api.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("DELETE: %s", resp.Status)
	}
	return nil
}

// signIn opens a dashboard session for the API key's account (POST
// /ui/session) and returns its cookie and the path it reads under.
func (r *reads) signIn(ctx context.Context) (*http.Cookie, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.t.HTTP+"/ui/session", nil)
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Authorization", "Bearer "+r.t.APIKey)
	resp, err := r.api.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	var answer struct {
		Base string `json:"base"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&answer); err != nil || answer.Base == "" {
		return nil, "", fmt.Errorf("POST /ui/session: %s, and no base path in the answer", resp.Status)
	}
	for _, c := range resp.Cookies() {
		if c.Value != "" {
			return c, answer.Base, nil
		}
	}
	return nil, "", fmt.Errorf("POST /ui/session: %s, and no session cookie", resp.Status)
}

// otherRecipient is the address of the other account's recipient k.
func (r *reads) otherRecipient(k int) string { return fmt.Sprintf("r%d.%s@other.test", k, r.run) }

// seedOther creates o.OtherEmails emails in the other account over four
// clients.
func (r *reads) seedOther(ctx context.Context) error {
	const workers = 4
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			for i := w; i < r.o.OtherEmails; i += workers {
				body, _ := json.Marshal(map[string]string{"recipient": r.otherRecipient(i % r.o.OtherRecipients),
					"sender": "sender@other.test", "subject": fmt.Sprintf("other %d", i), "text": "An email of the other account."})
				if err := r.create(ctx, body); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	var first error
	for range workers {
		if err := <-errs; first == nil {
			first = err
		}
	}
	return first
}

// create creates an email in the other account.
func (r *reads) create(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.t.HTTP+"/v1/emails", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+r.t.OtherKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.other.HTTP.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("create an email in the other account: %s", resp.Status)
	}
	return nil
}

// listOther starts the other account's client: every o.ListEvery it lists
// the emails of one of its recipients, picked at random, 25 at most, and
// keeps the time from sending the request to having read the answer. The
// returned function stops it.
func (r *reads) listOther(ctx context.Context) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		rnd := rand.New(rand.NewPCG(5, 6))
		tick := time.NewTicker(r.o.ListEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			t := time.Now()
			body, err := r.other.fetchList(ctx, r.otherRecipient(rnd.IntN(r.o.OtherRecipients)), 25, 0)
			s := listSample{start: t, latency: time.Since(t), err: err}
			if err == nil && !bytes.Contains(body, []byte(`"id"`)) {
				s.err = errors.New("the list answer holds no email")
			}
			r.samples.Lock()
			r.samples.list = append(r.samples.list, s)
			r.samples.Unlock()
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			<-finished
		})
	}
}

// listedBetween returns the latencies of the other account's list requests
// begun between from and to, and how many of them failed.
func (r *reads) listedBetween(from, to time.Time) (Latencies, int) {
	r.samples.Lock()
	defer r.samples.Unlock()
	var out Latencies
	failed := 0
	for _, s := range r.samples.list {
		switch {
		case s.start.Before(from) || s.start.After(to):
		case s.err != nil:
			failed++
		default:
			out = append(out, s.latency)
		}
	}
	return out, failed
}

// resetPeak resets the VmHWM of process pid to its current RSS.
func resetPeak(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// statusText shows answers by status, "8 × 200" or "3 × 200, 5 × 503".
func statusText(m map[int]int) string {
	var parts []string
	for _, code := range slices.Sorted(maps.Keys(m)) {
		label := strconv.Itoa(code)
		if code == 0 {
			label = "no answer"
		}
		parts = append(parts, fmt.Sprintf("%d × %s", m[code], label))
	}
	return strings.Join(parts, ", ")
}
