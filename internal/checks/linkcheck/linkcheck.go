// Package linkcheck fetches the links and images of a message to tell
// which answer: HEAD, then GET when HEAD is refused, reading no body and
// keeping no cookies, through the SSRF-guarded dialer of outbound webhooks
// (package webhooks: every address of every hop is checked, private and
// loopback ones only for accounts that allow private targets). Each URL
// gets Config.Timeout in all and at most Config.MaxRedirects redirects; at
// most Config.PerHost requests go to one host at once.
//
// The request to check is the opt-in: the message's author can see the
// requests, so nothing is fetched when mail arrives.
package linkcheck

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/mailsink/mailsink/internal/webhooks"
)

// Defaults of Config's zero fields.
const (
	DefaultMaxURLs      = 100
	DefaultPerHost      = 2
	DefaultWorkers      = 8
	DefaultTimeout      = 5 * time.Second
	DefaultMaxRedirects = 10
)

// UserAgent is what the requests say they are.
const UserAgent = "mailsink-link-check/1"

// Config bounds a check.
type Config struct {
	// MaxURLs is how many URLs one check fetches; the others are counted
	// as omitted.
	MaxURLs int
	// PerHost bounds the requests to one host at once, Workers those of
	// one check.
	PerHost, Workers int
	// Timeout bounds one URL, its redirects included.
	Timeout time.Duration
	// MaxRedirects bounds the redirects followed for one URL.
	MaxRedirects int
	// LookupHost resolves host names (nil: the system's resolver).
	LookupHost func(ctx context.Context, host string) ([]netip.Addr, error)
}

// Target is a URL to check and what the message uses it as.
type Target struct {
	URL string
	// Kind is "link" or "image".
	Kind string
}

// Report is the answer of a check.
type Report struct {
	Items []Item `json:"items"`
	// Omitted counts the URLs past Config.MaxURLs, not fetched.
	Omitted int `json:"omitted"`
}

// Item is what one URL answered.
type Item struct {
	URL  string `json:"url"`
	Kind string `json:"kind"`
	// Status is the HTTP status of the last hop; nil when there was no
	// answer (Error says why).
	Status *int `json:"status"`
	// FinalURL is the URL of the last hop, after redirects.
	FinalURL  *string `json:"finalUrl"`
	Redirects int     `json:"redirects"`
	// Method is the last method tried: HEAD, or GET when HEAD was
	// refused.
	Method string `json:"method"`
	// TimeMs is how long the URL took, in milliseconds.
	TimeMs int64   `json:"timeMs"`
	Error  *string `json:"error"`
}

// Checker fetches URLs. It is safe for concurrent use.
type Checker struct {
	cfg    Config
	dialer *webhooks.Dialer
}

// New returns a Checker with cfg's bounds.
func New(cfg Config) *Checker {
	if cfg.MaxURLs <= 0 {
		cfg.MaxURLs = DefaultMaxURLs
	}
	if cfg.PerHost <= 0 {
		cfg.PerHost = DefaultPerHost
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxRedirects <= 0 {
		cfg.MaxRedirects = DefaultMaxRedirects
	}
	return &Checker{cfg: cfg, dialer: &webhooks.Dialer{LookupHost: cfg.LookupHost, Timeout: cfg.Timeout}}
}

// MaxURLs is how many URLs a check fetches.
func (c *Checker) MaxURLs() int { return c.cfg.MaxURLs }

// Check fetches targets, the first MaxURLs of them, allowing private and
// loopback addresses when allowPrivate. It returns ctx's error when ctx
// ends first.
func (c *Checker) Check(ctx context.Context, targets []Target, allowPrivate bool) (*Report, error) {
	r := &Report{Items: []Item{}}
	if len(targets) > c.cfg.MaxURLs {
		r.Omitted = len(targets) - c.cfg.MaxURLs
		targets = targets[:c.cfg.MaxURLs]
	}
	// A transport of its own: its connections carry no other check's
	// requests, and end with it.
	tr := &http.Transport{
		Proxy:                  nil, // the address checked must be the one dialled
		DialContext:            c.dialer.DialContext(allowPrivate),
		MaxResponseHeaderBytes: 16 << 10, // each URL's context bounds its time
		DisableCompression:     true,
		MaxIdleConnsPerHost:    c.cfg.PerHost,
		IdleConnTimeout:        c.cfg.Timeout,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{
		Transport: tr, // no Jar: no cookies
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > c.cfg.MaxRedirects {
				return fmt.Errorf("stopped after %d redirects", c.cfg.MaxRedirects)
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return fmt.Errorf("redirected to a %s: URL", req.URL.Scheme)
			}
			return nil
		},
	}
	items := make([]Item, len(targets))
	hosts := &hostSlots{per: c.cfg.PerHost, slots: map[string]chan struct{}{}}
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(c.cfg.Workers, len(targets)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				items[i] = c.fetch(ctx, client, hosts, targets[i])
			}
		}()
	}
feed:
	for i := range targets {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.Items = items
	return r, nil
}

// hostSlots bounds the requests to each host.
type hostSlots struct {
	per   int
	mu    sync.Mutex
	slots map[string]chan struct{}
}

// take waits for a slot of host, and returns its release.
func (h *hostSlots) take(ctx context.Context, host string) (func(), error) {
	h.mu.Lock()
	s, ok := h.slots[host]
	if !ok {
		s = make(chan struct{}, h.per)
		h.slots[host] = s
	}
	h.mu.Unlock()
	select {
	case s <- struct{}{}:
		return func() { <-s }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// fetch checks one URL.
func (c *Checker) fetch(ctx context.Context, client *http.Client, hosts *hostSlots, t Target) (it Item) {
	it = Item{URL: t.URL, Kind: t.Kind, Method: http.MethodHead}
	fail := func(msg string) Item {
		it.Error = &msg
		return it
	}
	u, err := url.Parse(t.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return fail("not an http or https URL that can be fetched")
	}
	release, err := hosts.take(ctx, strings.ToLower(u.Hostname()))
	if err != nil {
		return fail("the check ended before this URL was fetched")
	}
	defer release()
	start := time.Now()
	defer func() { it.TimeMs = time.Since(start).Milliseconds() }()
	uctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	resp, redirects, err := c.do(uctx, client, http.MethodHead, u)
	if err == nil && (resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusNotImplemented) {
		it.Method = http.MethodGet
		resp, redirects, err = c.do(uctx, client, http.MethodGet, u)
	}
	it.Redirects = redirects
	if err != nil {
		return fail(c.describe(uctx, err))
	}
	status, final := resp.StatusCode, resp.Request.URL.String()
	it.Status, it.FinalURL = &status, &final
	return it
}

// do sends one request, following redirects, and closes the answer's body
// unread; it returns how many redirects it followed.
func (c *Checker) do(ctx context.Context, client *http.Client, method string, u *url.URL) (*http.Response, int, error) {
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("User-Agent", UserAgent)
	resp, err := client.Do(req)
	redirects := 0
	if resp != nil {
		resp.Body.Close()
		for r := resp.Request; r != nil && r.Response != nil; r = r.Response.Request {
			redirects++
		}
	}
	if err != nil {
		return nil, redirects, err
	}
	return resp, redirects, nil
}

// describe says what went wrong with a request, for people.
func (c *Checker) describe(ctx context.Context, err error) string {
	var refused *webhooks.RefusedAddressError
	if errors.As(err, &refused) {
		return fmt.Sprintf("refused: %s is not fetched (%s)", refused.Addr, refused.Reason)
	}
	var ne net.Error
	if ctx.Err() != nil || errors.As(err, &ne) && ne.Timeout() {
		return fmt.Sprintf("no answer within %s", c.cfg.Timeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}
