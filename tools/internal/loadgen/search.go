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
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/store/pebblestore"
)

// SearchOptions describe a search benchmark.
type SearchOptions struct {
	// Steps are the account's sizes, ascending, at which the queries are
	// timed: the corpus is sent up to each in turn.
	Steps []int
	// Requests is how many requests each query category gets at the last
	// step; StepRequests at the earlier ones.
	Requests, StepRequests int
	// Connections is how many SMTP clients send the corpus.
	Connections int
	// LagEmails are sent one at a time, each with a body word of its own,
	// while LagRate messages a second arrive in the background; the word
	// is searched for every Poll.
	LagEmails int
	LagRate   float64
	Poll      time.Duration
	// Samples is how many emails' digests are measured in the store.
	Samples int
	// ProfileDir, when set, receives the server's CPU profiles of the last
	// step (the server needs its pprof listener): digest.pprof while the
	// corpus is sent and indexed, queries-*.pprof during some categories'
	// queries.
	ProfileDir string
	Log        func(format string, args ...any) `json:"-"`
}

// DefaultSearchOptions are the benchmark's settings: 100,000 emails, timed
// at 10k, 30k and 100k.
func DefaultSearchOptions() SearchOptions {
	return SearchOptions{Steps: []int{10_000, 30_000, 100_000}, Requests: 1000, StepRequests: 200, Connections: 4,
		LagEmails: 50, LagRate: 50, Poll: 5 * time.Millisecond, Samples: 200}
}

// Query categories of the benchmark.
const (
	CatOperators  = "operators"
	CatCommonWord = "common word"
	CatRareWord   = "rare word"
	CatTwoWords   = "two words"
	CatWordAndOp  = "word + operator"
	CatCountQuery = "count?q=is:unread"
	CatStats      = "stats"
)

// SearchCategories are the categories in the order they are timed.
var SearchCategories = []string{CatOperators, CatCommonWord, CatRareWord, CatTwoWords, CatWordAndOp, CatCountQuery, CatStats}

// isBodyCategory says whether a category's queries have body words.
func isBodyCategory(c string) bool {
	return c == CatCommonWord || c == CatRareWord || c == CatTwoWords || c == CatWordAndOp
}

// QueryTiming is the requests of one query kind.
type QueryTiming struct {
	Category, Kind string
	Latency        Latencies
	// Matched is the items (or the count) of the answers, summed.
	Matched int64
}

// SearchStep is what the benchmark measured at one size of the account.
type SearchStep struct {
	Emails, Added int
	// Ingest is the time to send the added messages (every 250 answered),
	// Indexed the time from the first message to the last one's body word
	// being found.
	Ingest, Indexed time.Duration
	// CPUIngest is the server's CPU while the messages were sent, CPUAll
	// until they were all indexed.
	CPUIngest, CPUAll time.Duration
	// After is the server's process after indexing.
	After ProcSample
	// Queries by category, then by kind.
	Categories map[string]*QueryTiming
	Kinds      []*QueryTiming
}

// CPUPerEmail is the server's CPU per added email, from the first message
// to the last one indexed.
func (s *SearchStep) CPUPerEmail() time.Duration { return s.CPUAll / time.Duration(max(s.Added, 1)) }

// QueryProfile is a CPU profile of the server during a query category.
type QueryProfile struct {
	Category, File string
	Top            string // go tool pprof -top
}

// profiled are the categories whose queries are profiled at the last
// step: one per target on query latency.
var profiled = map[string]bool{CatOperators: true, CatRareWord: true, CatCountQuery: true}

// SearchResult is a search benchmark on one server.
type SearchResult struct {
	Backend string
	Empty   ProcSample // the server before any mail
	Steps   []*SearchStep
	// DigestShare is the share of the server's CPU spent in the search
	// service's digest worker during the last step's profile (0 without
	// one), DigestProfile the profile's file.
	DigestShare   float64
	DigestProfile string
	// DigestBytes is the mean size of a digest's value in the store,
	// DigestKeyBytes (Redis) the mean MEMORY USAGE of an email's check
	// results hash, over DigestSamples emails.
	DigestBytes, DigestKeyBytes float64
	DigestSamples               int
	// DataBytes is the embedded store's directory size after the run.
	DataBytes int64
	// Lag is, per lag email, the time from its 250 to the first answer
	// that lists it for its body word; MetaFirst how many of them the
	// first subject: query after the 250 found; LagFailed how many were
	// not found within 10s.
	Lag                  Latencies
	MetaFirst, LagFailed int
	LagBackground        int // emails sent in the background meanwhile
	// Restart: Ready is the time from starting the process to its
	// banner, Found to an old email found by a body word; After is the
	// process then.
	Ready, Found time.Duration
	RestartCPU   time.Duration
	RestartAfter ProcSample
	// QueryProfiles are CPU profiles of the server during the first 5s of
	// some categories at the last step.
	QueryProfiles []QueryProfile
	Elapsed       time.Duration
	MachineBusy   float64
	MachineSteal  float64
	ToolCPU       time.Duration
	RareChecked   int // rare words whose count matched what was sent
	ExpectedRares map[int]int
}

// Last returns the last step.
func (r *SearchResult) Last() *SearchStep {
	if len(r.Steps) == 0 {
		return nil
	}
	return r.Steps[len(r.Steps)-1]
}

// searchRun is one run of the benchmark.
type searchRun struct {
	srv    *Server
	o      SearchOptions
	c      *Corpus
	run    string
	http   *http.Client
	res    *SearchResult
	rares  map[int]int // rare word -> emails holding it
	firsts map[int]int // rare word -> first message holding it
	ids    []string    // every corpus email's id, newest first
	// sentRares are the rare words sent so far, in order.
	sentRares []int
	// since is the time the last step began, for after: queries.
	since time.Time
	// markSent is when the step's last message was sent.
	markSent time.Time
}

// RunSearch sends the corpus to srv's account up to each step and times
// the queries there; then times how soon a new email's body word is found,
// measures the digests in the store, and restarts the server to time the
// index's load.
func RunSearch(ctx context.Context, srv *Server, o SearchOptions) (*SearchResult, error) {
	if srv.PID == 0 {
		return nil, errors.New("the search benchmark needs a server it started")
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	tag, err := randomHex(4)
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	r := &searchRun{srv: srv, o: o, c: NewCorpus(tag), run: tag, http: &http.Client{Transport: tr, Timeout: 2 * time.Minute},
		res: &SearchResult{Backend: srv.Backend}, rares: map[int]int{}, firsts: map[int]int{}}
	start, toolBefore := time.Now(), SelfCPU()
	machineBefore, _ := ReadMachine()
	if r.res.Empty, err = ReadProc(srv.PID); err != nil {
		return r.res, err
	}
	sent := 0
	for k, n := range o.Steps {
		last := k == len(o.Steps)-1
		step, err := r.step(ctx, sent, n, last)
		if step != nil {
			r.res.Steps = append(r.res.Steps, step)
		}
		if err != nil {
			return r.res, fmt.Errorf("step %d: %w", n, err)
		}
		sent = n
	}
	if err := r.lag(ctx); err != nil {
		return r.res, fmt.Errorf("lag: %w", err)
	}
	if err := r.restart(ctx); err != nil {
		return r.res, fmt.Errorf("restart: %w", err)
	}
	r.res.Elapsed = time.Since(start)
	r.res.ToolCPU = SelfCPU() - toolBefore
	if machineAfter, err := ReadMachine(); err == nil {
		r.res.MachineBusy, r.res.MachineSteal = BusyShare(machineBefore, machineAfter)
	}
	return r.res, nil
}

// mark is the body word of the last message of a step, by which the
// benchmark sees that every message before it is indexed (the service
// makes digests in the order the emails arrive).
func (r *searchRun) mark(n int) string { return fmt.Sprintf("mark%sn%d", r.run, n) }

// step sends messages [from, to), waits until they are indexed, marks
// some read and labelled, and times the queries.
func (r *searchRun) step(ctx context.Context, from, to int, last bool) (*SearchStep, error) {
	s := &SearchStep{Emails: to, Added: to - from, Categories: map[string]*QueryTiming{}}
	r.since = time.Now().Add(-time.Second)
	var profileDone func() (string, error)
	if last && r.o.ProfileDir != "" {
		// Long enough to cover most of the step's sending and indexing.
		secs := max(5, min(30, s.Added/4000))
		profileDone = r.profile(ctx, "digest.pprof", secs)
	}
	before, err := ReadProc(r.srv.PID)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	r.o.Log("search: sending messages %d to %d over %d connections", from, to, r.o.Connections)
	if err := r.send(ctx, from, to); err != nil {
		return nil, err
	}
	s.Ingest = time.Since(t0)
	mid, err := ReadProc(r.srv.PID)
	if err != nil {
		return nil, err
	}
	if err := r.waitFound(ctx, r.mark(to), r.markSent.Add(-time.Second), 5*time.Minute); err != nil {
		return s, fmt.Errorf("the last message's body word: %w", err)
	}
	s.Indexed = time.Since(t0)
	end, err := ReadProc(r.srv.PID)
	if err != nil {
		return nil, err
	}
	s.CPUIngest, s.CPUAll = mid.CPU-before.CPU, end.CPU-before.CPU
	r.o.Log("search: %d emails: sent in %s, indexed in %s; server CPU %s (%s per email; %s while sending)",
		to, s.Ingest.Round(time.Millisecond), s.Indexed.Round(time.Millisecond), s.CPUAll, fmtDur(s.CPUPerEmail()), s.CPUIngest)
	if profileDone != nil {
		path, err := profileDone()
		if err != nil {
			return s, fmt.Errorf("digest profile: %w", err)
		}
		r.res.DigestProfile = path
		if top, err := pprofTop(ctx, path, true); err == nil {
			r.res.DigestShare, _ = cumShare(top, "search.(*Service).digests")
		}
	}
	if err := r.checkRares(ctx); err != nil {
		return s, err
	}
	r.sentRares = slices.Sorted(maps.Keys(r.rares))
	if err := r.collectIDs(ctx, to-from); err != nil {
		return s, err
	}
	if err := r.markSome(ctx, r.ids[:to-from]); err != nil {
		return s, err
	}
	if s.After, err = ReadProc(r.srv.PID); err != nil {
		return s, err
	}
	n := r.o.StepRequests
	if last {
		n = r.o.Requests
	}
	for _, cat := range SearchCategories {
		var done func() (string, error)
		if last && r.o.ProfileDir != "" && profiled[cat] {
			done = r.profile(ctx, "queries-"+strings.NewReplacer(" ", "-", "?", "-", ":", "-", "+", "").Replace(cat)+".pprof", 5)
		}
		kinds, err := r.time(ctx, cat, n)
		if err != nil {
			return s, fmt.Errorf("%s: %w", cat, err)
		}
		all := &QueryTiming{Category: cat, Kind: cat}
		for _, k := range kinds {
			all.Latency = append(all.Latency, k.Latency...)
			all.Matched += k.Matched
		}
		s.Categories[cat] = all
		s.Kinds = append(s.Kinds, kinds...)
		r.o.Log("search: %d emails: %s: p50 %s p95 %s p99 %s over %d requests", to, cat,
			fmtDur(all.Latency.Percentile(50)), fmtDur(all.Latency.Percentile(95)), fmtDur(all.Latency.Percentile(99)), len(all.Latency))
		if done != nil {
			path, err := done()
			if err != nil {
				return s, fmt.Errorf("query profile: %w", err)
			}
			top, _ := pprofTop(ctx, path, false)
			r.res.QueryProfiles = append(r.res.QueryProfiles, QueryProfile{Category: cat, File: path, Top: top})
		}
	}
	return s, nil
}

// send sends corpus messages [from, to-1) over r.o.Connections pipelining
// clients, then the last, which carries the step's mark, alone.
func (r *searchRun) send(ctx context.Context, from, to int) error {
	var (
		next  atomic.Int64
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	next.Store(int64(from))
	for range r.o.Connections {
		wg.Go(func() {
			c, err := dialRaw(ctx, r.srv.SMTP, true)
			if err != nil {
				mu.Lock()
				first = errors.Join(first, err)
				mu.Unlock()
				return
			}
			defer c.close()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= to-1 {
					c.quit()
					return
				}
				m := r.c.Message(i, "")
				if err := c.transaction(m.From, []string{m.To}, m.Raw); err != nil {
					mu.Lock()
					first = errors.Join(first, fmt.Errorf("message %d: %w", i, err))
					mu.Unlock()
					return
				}
				if m.Rare >= 0 {
					mu.Lock()
					if r.rares[m.Rare] == 0 || i < r.firsts[m.Rare] {
						r.firsts[m.Rare] = i
					}
					r.rares[m.Rare]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	if first != nil {
		return first
	}
	// The last message, with the step's mark, goes alone after the others.
	c, err := dialRaw(ctx, r.srv.SMTP, true)
	if err != nil {
		return err
	}
	defer c.close()
	m := r.c.Message(to-1, r.mark(to))
	r.markSent = time.Now()
	if err := c.transaction(m.From, []string{m.To}, m.Raw); err != nil {
		return fmt.Errorf("message %d: %w", to-1, err)
	}
	if m.Rare >= 0 {
		if r.rares[m.Rare] == 0 || to-1 < r.firsts[m.Rare] {
			r.firsts[m.Rare] = to - 1
		}
		r.rares[m.Rare]++
	}
	return c.quit()
}

// checkRares checks that a few rare words are counted in as many emails as
// were sent with them: the index has every digest and finds them all.
func (r *searchRun) checkRares(ctx context.Context) error {
	checked := 0
	for w, want := range r.rares {
		if checked == 5 {
			break
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, err := r.count(ctx, r.c.RareWord(w))
			if err != nil {
				return err
			}
			if got == int64(want) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("q=%s counts %d emails; %d were sent with it", r.c.RareWord(w), got, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
		checked++
	}
	r.res.RareChecked += checked
	return nil
}

// collectIDs lists the newest n emails' ids in front of r.ids.
func (r *searchRun) collectIDs(ctx context.Context, n int) error {
	var ids []string
	before := ""
	for len(ids) < n {
		v := url.Values{"limit": {"100"}}
		if before != "" {
			v.Set("before", before)
		}
		items, err := r.list(ctx, v)
		if err != nil {
			return err
		}
		if len(items) == 0 {
			return fmt.Errorf("listed %d emails, want %d", len(ids), n)
		}
		for _, it := range items {
			ids = append(ids, it.ID)
		}
		before = items[len(items)-1].ID
	}
	r.ids = append(ids[:n], r.ids...)
	return nil
}

// markSome marks every 20th email read and labels every 50th "invoice"
// and every 250th "vip", so that is:unread and label: have work to do.
func (r *searchRun) markSome(ctx context.Context, ids []string) error {
	for i, id := range ids {
		var labels []string
		if i%50 == 0 {
			labels = append(labels, "invoice")
		}
		if i%250 == 0 {
			labels = append(labels, "vip")
		}
		if i%20 != 0 && labels == nil {
			continue
		}
		patch := map[string]any{"read": i%20 == 0}
		if labels != nil {
			patch["labels"] = labels
		}
		body, _ := json.Marshal(patch)
		status, _, err := r.do(ctx, http.MethodPatch, "/v1/emails/"+id, body)
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return fmt.Errorf("PATCH /v1/emails/%s: %d", id, status)
		}
	}
	return nil
}

// searchQuery is one request of a category: its kind (for the report) and
// its path.
type searchQuery struct {
	kind, path string
}

// queries returns a random query of the category.
func (r *searchRun) query(cat string, rnd *rand.Rand) searchQuery {
	list := func(kind, q string) searchQuery {
		return searchQuery{kind, "/v1/emails?" + url.Values{"q": {q}, "limit": {"25"}}.Encode()}
	}
	common := func(lo, hi int) string { return r.c.CommonWord(lo + rnd.IntN(hi-lo)) }
	last := strings.ToLower(lastNames[rnd.IntN(len(lastNames))])
	domain := senderDomains[rnd.IntN(len(senderDomains))]
	to := fmt.Sprintf("user%d", rnd.IntN(corpusRecipients))
	after := r.since.UTC().Format(time.RFC3339)
	switch cat {
	case CatOperators:
		ops := []searchQuery{
			list("from:name", "from:"+last),
			list("from:domain", "from:"+domain),
			list("to:", "to:"+to),
			list("subject:", "subject:"+[]string{"invoice", "password", "shipped", "digest", "meeting", "receipt"}[rnd.IntN(6)]),
			list("label:", "label:"+[]string{"invoice", "vip"}[rnd.IntN(2)]),
			list("is:unread", "is:unread"),
			list("has:attachment", "has:attachment"),
			list("after:", "after:"+after),
			list("larger:", "larger:10KB"),
			list("from: has:attachment", "from:"+last+" has:attachment"),
			list("label: is:unread", "label:invoice is:unread"),
			list("to: is:unread after:", "to:"+to+" is:unread after:"+after),
			list("subject: larger:", "subject:invoice larger:5KB"),
			list("from: -has:attachment label:", "from:"+domain+" -has:attachment label:vip"),
		}
		return ops[rnd.IntN(len(ops))]
	case CatCommonWord:
		return list("common word", common(0, 10))
	case CatRareWord:
		// One that was sent: a rare word no email holds would only
		// measure the Bloom filters.
		return list("rare word", r.c.RareWord(r.sentRares[rnd.IntN(len(r.sentRares))]))
	case CatTwoWords:
		return list("two words", common(0, 20)+" "+common(20, 200))
	case CatWordAndOp:
		if rnd.IntN(2) == 0 {
			return list("word has:attachment", common(0, 20)+" has:attachment")
		}
		return list("word from:", common(0, 50)+" from:"+last)
	case CatCountQuery:
		return searchQuery{"count is:unread", "/v1/emails/count?q=is%3Aunread"}
	default:
		return searchQuery{"stats", "/v1/emails/stats"}
	}
}

// time sends n random queries of the category, one at a time on one
// keep-alive connection, and returns their timings by kind.
func (r *searchRun) time(ctx context.Context, cat string, n int) ([]*QueryTiming, error) {
	rnd := rand.New(rand.NewPCG(uint64(len(cat)), uint64(n)))
	byKind := map[string]*QueryTiming{}
	var order []*QueryTiming
	for range n {
		q := r.query(cat, rnd)
		t0 := time.Now()
		status, body, err := r.do(ctx, http.MethodGet, q.path, nil)
		lat := time.Since(t0)
		if err != nil {
			return order, err
		}
		if status != http.StatusOK {
			return order, fmt.Errorf("GET %s: %d: %.200s", q.path, status, body)
		}
		k := byKind[q.kind]
		if k == nil {
			k = &QueryTiming{Category: cat, Kind: q.kind}
			byKind[q.kind] = k
			order = append(order, k)
		}
		k.Latency = append(k.Latency, lat)
		var answer struct {
			Items []json.RawMessage `json:"items"`
			Count int64             `json:"count"`
			Total int64             `json:"total"`
		}
		if json.Unmarshal(body, &answer) == nil {
			k.Matched += int64(len(answer.Items)) + answer.Count + answer.Total
		}
	}
	return order, nil
}

// lag sends r.o.LagEmails emails one at a time, each with a body word and
// a subject word of its own, while others arrive in the background, and
// times how soon each is found by its body word after its 250.
func (r *searchRun) lag(ctx context.Context) error {
	stop := make(chan struct{})
	var bg sync.WaitGroup
	var background atomic.Int64
	bg.Go(func() {
		c, err := dialRaw(ctx, r.srv.SMTP, true)
		if err != nil {
			return
		}
		defer c.close()
		tick := time.NewTicker(time.Duration(float64(time.Second) / r.o.LagRate))
		defer tick.Stop()
		for i := 10_000_000; ; i++ {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			m := r.c.Message(i, "")
			if c.transaction(m.From, []string{m.To}, m.Raw) != nil {
				return
			}
			background.Add(1)
		}
	})
	defer func() {
		close(stop)
		bg.Wait()
		r.res.LagBackground = int(background.Load())
	}()
	for k := range r.o.LagEmails {
		word := fmt.Sprintf("lag%sw%d", r.run, k)
		subject := fmt.Sprintf("lagsubject%sw%d", r.run, k)
		m := r.c.Message(20_000_000+k, word)
		raw := bytes.Replace(m.Raw, []byte("Subject: "), []byte("Subject: "+subject+" "), 1)
		c, err := dialRaw(ctx, r.srv.SMTP, true)
		if err != nil {
			return err
		}
		sent := time.Now()
		err = c.transaction(m.From, []string{m.To}, raw)
		acked := time.Now()
		c.quit()
		c.close()
		if err != nil {
			return err
		}
		n, err := r.found(ctx, "subject:"+subject, time.Time{})
		if err != nil {
			return err
		}
		if n > 0 {
			r.res.MetaFirst++
		}
		if err := r.waitFound(ctx, word, sent.Add(-time.Second), 10*time.Second); err != nil {
			r.res.LagFailed++
			continue
		}
		r.res.Lag = append(r.res.Lag, time.Since(acked))
	}
	r.o.Log("search: body words found %s (p50) %s (max) after the 250; subject: at once for %d of %d",
		fmtDur(r.res.Lag.Percentile(50)), fmtDur(r.res.Lag.Max()), r.res.MetaFirst, r.o.LagEmails)
	return nil
}

// restart measures the digests in the store, restarts the server on the
// same store, and times until an old email is found by a body word.
func (r *searchRun) restart(ctx context.Context) error {
	sample := r.sampleIDs()
	if r.srv.redis != nil {
		if err := r.redisDigests(ctx); err != nil {
			return err
		}
	}
	// The oldest email with a rare word: found only once the whole
	// account is loaded.
	oldest, word := -1, ""
	for w, i := range r.firsts {
		if oldest < 0 || i < oldest {
			oldest, word = i, r.c.RareWord(w)
		}
	}
	if word == "" {
		return errors.New("no rare word was sent")
	}
	r.http.CloseIdleConnections()
	var started time.Time
	err := r.srv.Restart(ctx, func() error {
		if dir := r.srv.DataDir(); dir != "" {
			if err := r.pebbleDigests(ctx, dir, sample); err != nil {
				return err
			}
		}
		started = time.Now()
		return nil
	})
	if err != nil {
		return err
	}
	r.res.Ready = time.Since(started)
	if err := r.waitFound(ctx, word, time.Time{}, 5*time.Minute); err != nil {
		return fmt.Errorf("an old email by its body word %q: %w", word, err)
	}
	r.res.Found = time.Since(started)
	if r.res.RestartAfter, err = ReadProc(r.srv.PID); err != nil {
		return err
	}
	r.res.RestartCPU = r.res.RestartAfter.CPU
	if dir := r.srv.DataDir(); dir != "" {
		r.res.DataBytes, _ = dirSize(dir)
	}
	r.o.Log("search: restarted: ready in %s, old email found by a body word in %s; RSS %s (anon %s)",
		r.res.Ready.Round(time.Millisecond), r.res.Found.Round(time.Millisecond), MiB(r.res.RestartAfter.RSS), MiB(r.res.RestartAfter.RSSAnon))
	return nil
}

// sampleIDs picks r.o.Samples corpus emails' ids at random.
func (r *searchRun) sampleIDs() []string {
	rnd := rand.New(rand.NewPCG(7, 8))
	out := make([]string, 0, r.o.Samples)
	for range min(r.o.Samples, len(r.ids)) {
		out = append(out, r.ids[rnd.IntN(len(r.ids))])
	}
	return out
}

// redisDigests measures digests on Redis: of r.o.Samples check results
// hashes (the first SCAN finds, in Redis's hash order), the value's length
// (HSTRLEN) and the hash's MEMORY USAGE.
func (r *searchRun) redisDigests(ctx context.Context) error {
	c := r.srv.redis
	var keys []string
	var cursor uint64
	for len(keys) < r.o.Samples {
		page, next, err := c.Scan(ctx, cursor, r.srv.prefix+"*ck:*", 1000).Result()
		if err != nil {
			return err
		}
		keys = append(keys, page...)
		if cursor = next; cursor == 0 {
			break
		}
	}
	var value, key int64
	n := 0
	for _, k := range keys[:min(len(keys), r.o.Samples)] {
		v, err := c.HStrLen(ctx, k, "search-digest").Result()
		if err != nil {
			return err
		}
		m, err := c.MemoryUsage(ctx, k).Result()
		if err != nil {
			return err
		}
		if v > 0 {
			value, key, n = value+v, key+m, n+1
		}
	}
	if n == 0 {
		return errors.New("no digest found in Redis")
	}
	r.res.DigestBytes, r.res.DigestKeyBytes, r.res.DigestSamples = float64(value)/float64(n), float64(key)/float64(n), n
	return nil
}

// pebbleDigests measures the sampled emails' digests in the embedded
// store's directory, opened while the server is stopped.
func (r *searchRun) pebbleDigests(ctx context.Context, dir string, ids []string) error {
	// serve keeps the store in the "store" directory of MAILSINK_DATA_DIR
	// (app.StoreDir; the app package is not imported for a constant).
	st, err := pebblestore.Open(filepath.Join(dir, "store"))
	if err != nil {
		return err
	}
	defer st.Close()
	got, err := st.GetChecks(ctx, config.DeriveAccountID("default"), ids, "search-digest")
	if err != nil {
		return err
	}
	var total int
	for _, v := range got {
		total += len(v)
	}
	if len(got) == 0 {
		return errors.New("no digest found in the store for the sampled emails")
	}
	r.res.DigestBytes, r.res.DigestSamples = float64(total)/float64(len(got)), len(got)
	return nil
}

// waitFound polls q=word every r.o.Poll until an email received after
// since is listed. A since just before the email was sent keeps each poll
// from scanning the whole account while the email is not indexed yet: the
// polls would compete with the indexing they wait for.
func (r *searchRun) waitFound(ctx context.Context, word string, since time.Time, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		n, err := r.found(ctx, word, since)
		if err == nil && n > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("not found within %s", limit)
			}
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(r.o.Poll):
		}
	}
}

// found returns how many emails (at most one) q lists among those received
// after since (all when it is zero).
func (r *searchRun) found(ctx context.Context, q string, since time.Time) (int, error) {
	v := url.Values{"q": {q}, "limit": {"1"}}
	if !since.IsZero() {
		v.Set("since", since.UTC().Format(time.RFC3339Nano))
	}
	items, err := r.list(ctx, v)
	return len(items), err
}

func (r *searchRun) list(ctx context.Context, v url.Values) ([]listItem, error) {
	status, body, err := r.do(ctx, http.MethodGet, "/v1/emails?"+v.Encode(), nil)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/emails?%s: %d: %.200s", v.Encode(), status, body)
	}
	var page struct {
		Items []listItem `json:"items"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, err
	}
	return page.Items, nil
}

func (r *searchRun) count(ctx context.Context, q string) (int64, error) {
	status, body, err := r.do(ctx, http.MethodGet, "/v1/emails/count?"+url.Values{"q": {q}}.Encode(), nil)
	if err != nil {
		return 0, err
	}
	if status != http.StatusOK {
		return 0, fmt.Errorf("count %q: %d: %.200s", q, status, body)
	}
	var answer struct {
		Count int64 `json:"count"`
	}
	return answer.Count, json.Unmarshal(body, &answer)
}

// do sends one request with the API key and reads the whole answer.
func (r *searchRun) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.srv.HTTP+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+r.srv.APIKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// profile starts a CPU profile of the server for secs seconds; the
// returned function waits for it and returns its file.
func (r *searchRun) profile(ctx context.Context, name string, secs int) func() (string, error) {
	path := filepath.Join(r.o.ProfileDir, r.srv.Backend+"-"+name)
	wait := cpuProfile(ctx, r.srv.PProf, secs, path)
	return func() (string, error) { return path, wait() }
}

// pprofTop returns `go tool pprof -top` of a profile, by cumulative time
// when cum.
func pprofTop(ctx context.Context, path string, cum bool) (string, error) {
	args := []string{"tool", "pprof", "-top", "-nodecount=25"}
	if cum {
		args = []string{"tool", "pprof", "-top", "-cum", "-nodecount=400"}
	}
	out, err := exec.CommandContext(ctx, "go", append(args, path)...).Output()
	return string(out), err
}

// cumShare returns the cumulative share (cum%) of the first function in
// a `go tool pprof -top` listing whose name ends with fn.
func cumShare(top, fn string) (float64, bool) {
	for _, line := range strings.Split(top, "\n") {
		f := strings.Fields(line)
		if len(f) != 6 || !strings.HasSuffix(f[5], fn) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSuffix(f[4], "%"), 64)
		if err == nil {
			return v / 100, true
		}
	}
	return 0, false
}
