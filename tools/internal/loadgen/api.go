package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Latencies are durations of single operations.
type Latencies []time.Duration

// Percentile returns the p-th percentile (0 < p <= 100), nearest rank.
func (l Latencies) Percentile(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	rank := int(float64(len(s))*p/100+0.999999) - 1
	return s[min(max(rank, 0), len(s)-1)]
}

// Max returns the longest duration.
func (l Latencies) Max() time.Duration {
	if len(l) == 0 {
		return 0
	}
	return slices.Max(l)
}

// Client calls mailsink's /v1 API with an API key, or a peer's list API.
type Client struct {
	Base string
	Key  string
	HTTP *http.Client
	// API is APIMailsink or a peer's flavour (APIInbucket), whose list
	// answers hold the whole mailbox: limit and offset are then ignored.
	API string
}

// NewClient returns a Client that keeps up to conns connections open.
func NewClient(base, key string, conns int) *Client {
	tr := &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: time.Minute}
	return &Client{Base: strings.TrimSuffix(base, "/"), Key: key, HTTP: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// listItem is the part of an email summary the load tool reads.
type listItem struct {
	ID        string  `json:"id"`
	Recipient string  `json:"recipient"`
	Subject   *string `json:"subject"`
}

// list calls GET /v1/emails with the given filters.
func (c *Client) list(ctx context.Context, recipient string, limit, offset int) ([]listItem, error) {
	body, err := c.fetchList(ctx, recipient, limit, offset)
	if err != nil {
		return nil, err
	}
	return c.decodeList(body)
}

// fetchList calls GET /v1/emails with the given filters and returns the
// answer's body, unread.
func (c *Client) fetchList(ctx context.Context, recipient string, limit, offset int) ([]byte, error) {
	var (
		req *http.Request
		err error
	)
	if c.API == APIInbucket {
		req, err = inbucketListRequest(ctx, c.Base, recipient)
	} else {
		q := url.Values{}
		q.Set("recipient", recipient)
		q.Set("limit", strconv.Itoa(limit))
		if offset > 0 {
			q.Set("offset", strconv.Itoa(offset))
		}
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, c.Base+"/v1/emails?"+q.Encode(), nil)
	}
	if err != nil {
		return nil, err
	}
	if c.Key != "" {
		req.Header.Set("Authorization", "Bearer "+c.Key)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %.200s", req.URL.RequestURI(), resp.Status, body)
	}
	return body, nil
}

// decodeList reads the items of a list answer.
func (c *Client) decodeList(body []byte) ([]listItem, error) {
	if c.API == APIInbucket {
		return decodeInbucketList(body)
	}
	var page struct {
		Items []listItem `json:"items"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, fmt.Errorf("list answer: %v", err)
	}
	return page.Items, nil
}

// VerifyResult says how many of a run's emails the API lists.
type VerifyResult struct {
	Expected, Found, Missing, Unexpected, Duplicates int
	Requests                                         int
	Elapsed                                          time.Duration
}

// OK reports whether every expected email was found exactly once.
func (v *VerifyResult) OK() bool {
	return v.Found == v.Expected && v.Missing == 0 && v.Unexpected == 0 && v.Duplicates == 0
}

// Verify pages through every recipient of m (limit=100, offset steps) and
// checks that each of the first `messages` messages is stored once for each
// of its recipients, and nothing else is.
func (c *Client) Verify(ctx context.Context, m *Messages, messages int) (*VerifyResult, error) {
	start := time.Now()
	// want[k] holds the message numbers recipient k should have.
	want := make([]map[int]bool, m.Recipients)
	for k := range want {
		want[k] = map[int]bool{}
	}
	res := &VerifyResult{}
	for i := 0; i < messages; i++ {
		for _, k := range m.RecipientsOf(i) {
			want[k][i] = true
			res.Expected++
		}
	}
	prefix := "bench " + m.Run + " m"
	// Recipients are checked by a few workers; each page is bounded by the
	// count the recipient should have, plus one page to see the end.
	const workers = 4
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		first error
		next  = make(chan int)
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				found, unexpected, dups, reqs, err := c.verifyRecipient(ctx, m.Recipient(k), prefix, want[k])
				mu.Lock()
				res.Found += found
				res.Unexpected += unexpected
				res.Duplicates += dups
				res.Requests += reqs
				if err != nil && first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	for k := 0; k < m.Recipients && ctx.Err() == nil; k++ {
		next <- k
	}
	close(next)
	wg.Wait()
	res.Missing = res.Expected - res.Found
	res.Elapsed = time.Since(start)
	if first == nil {
		first = ctx.Err()
	}
	return res, first
}

func (c *Client) verifyRecipient(ctx context.Context, addr, prefix string, want map[int]bool) (found, unexpected, dups, reqs int, err error) {
	seen := make(map[int]bool, len(want))
	maxPages := len(want)/100 + 2 // Inbucket: one answer holds the mailbox
	for page := 0; page < maxPages; page++ {
		items, err := c.list(ctx, addr, 100, page*100)
		reqs++
		if err != nil {
			return found, unexpected, dups, reqs, err
		}
		for _, it := range items {
			if it.Subject == nil || !strings.HasPrefix(*it.Subject, prefix) {
				unexpected++
				continue
			}
			i, err := strconv.Atoi(strings.TrimPrefix(*it.Subject, prefix))
			switch {
			case err != nil || !want[i]:
				unexpected++
			case seen[i]:
				dups++
			default:
				seen[i] = true
				found++
			}
		}
		if len(items) < 100 || c.API == APIInbucket {
			return found, unexpected, dups, reqs, nil
		}
	}
	return found, unexpected, dups, reqs, fmt.Errorf("recipient %s: more pages than the %d emails expected", addr, len(want))
}

// QueryOptions describe a list-latency measurement.
type QueryOptions struct {
	Queries     int // how many requests
	Concurrency int // clients sending them; 1 measures latency without queueing
	Limit       int // page size, 25 by default
}

// QueryResult is what a list-latency measurement saw.
type QueryResult struct {
	Requests int
	Items    int // emails returned in all
	Elapsed  time.Duration
	Latency  Latencies
}

// ListLatency sends o.Queries requests GET /v1/emails?recipient=X&limit=25
// for recipients X of m picked at random, and times each from sending the
// request to reading the whole answer.
func (c *Client) ListLatency(ctx context.Context, m *Messages, o QueryOptions) (*QueryResult, error) {
	if o.Limit == 0 {
		o.Limit = 25
	}
	o.Concurrency = max(o.Concurrency, 1)
	// Warm the connections so the first requests do not time a dial.
	for range o.Concurrency {
		if _, err := c.list(ctx, m.Recipient(0), 1, 0); err != nil {
			return nil, err
		}
	}
	res := &QueryResult{}
	lat := make([]Latencies, o.Concurrency)
	items := make([]int, o.Concurrency)
	per := (o.Queries + o.Concurrency - 1) / o.Concurrency
	var wg sync.WaitGroup
	errs := make([]error, o.Concurrency)
	start := time.Now()
	for w := range o.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for q := 0; q < per && w*per+q < o.Queries; q++ {
				if err := ctx.Err(); err != nil {
					errs[w] = err
					return
				}
				addr := m.Recipient(r.IntN(m.Recipients))
				// Timed: from sending the request to having read the
				// whole answer; decoding it is the tool's business.
				t0 := time.Now()
				body, err := c.fetchList(ctx, addr, o.Limit, 0)
				if err != nil {
					errs[w] = err
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
				got, err := c.decodeList(body)
				if err != nil {
					errs[w] = err
					return
				}
				if len(got) == 0 {
					errs[w] = fmt.Errorf("recipient %s: no emails listed", addr)
					return
				}
				items[w] += len(got)
			}
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	for w := range lat {
		res.Latency = append(res.Latency, lat[w]...)
		res.Items += items[w]
		if errs[w] != nil {
			return res, errs[w]
		}
	}
	res.Requests = len(res.Latency)
	return res, nil
}
