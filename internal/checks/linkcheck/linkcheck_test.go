package linkcheck

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// site is a web server on loopback with the answers a message's links
// meet.
func site(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var inFlight, most atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Cookie") != "" {
			w.WriteHeader(http.StatusTeapot) // a cookie came back
			return
		}
		w.Write([]byte("fine"))
	})
	mux.HandleFunc("/missing", http.NotFound)
	mux.HandleFunc("/get-only", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		w.Write([]byte(strings.Repeat("x", 1<<20)))
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "track", Value: "1"})
		http.Redirect(w, r, "/ok", http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		select {
		case <-time.After(150 * time.Millisecond):
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s, &most
}

func statusOf(it Item) string {
	if it.Status == nil {
		return "none"
	}
	return fmt.Sprint(*it.Status)
}

// Links that answer 200 and 404 are told apart, HEAD refused falls back
// to GET, redirects are followed (without cookies) and bounded, a host
// gets two requests at once, and a URL that does not answer in time has
// an error.
func TestAnswers(t *testing.T) {
	t.Parallel()
	s, most := site(t)
	c := New(Config{Timeout: 2 * time.Second})
	targets := []Target{
		{s.URL + "/ok", "link"}, {s.URL + "/missing", "image"}, {s.URL + "/get-only", "link"}, {s.URL + "/moved", "link"},
		{s.URL + "/loop", "link"}, {"https://exa mple.com/", "link"},
	}
	for range 6 {
		targets = append(targets, Target{s.URL + "/slow", "image"})
	}
	r, err := c.Check(context.Background(), targets, true)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		status, method string
		redirects      int
		err            string
	}{
		{"200", "HEAD", 0, ""}, {"404", "HEAD", 0, ""}, {"200", "GET", 0, ""}, {"200", "HEAD", 1, ""},
		{"none", "HEAD", 10, "stopped after 10 redirects"}, {"none", "HEAD", 0, "not an http or https URL"},
	}
	for i, w := range want {
		it := r.Items[i]
		if statusOf(it) != w.status || it.Method != w.method || it.Redirects != w.redirects || it.URL != targets[i].URL || it.Kind != targets[i].Kind {
			t.Errorf("%s: status %s, method %s, %d redirects; want %s, %s, %d", it.URL, statusOf(it), it.Method, it.Redirects, w.status, w.method, w.redirects)
		}
		if (it.Error == nil) != (w.err == "") || it.Error != nil && !strings.Contains(*it.Error, w.err) {
			t.Errorf("%s: error %v, want %q", it.URL, it.Error, w.err)
		}
	}
	if f := r.Items[3].FinalURL; f == nil || *f != s.URL+"/ok" {
		t.Errorf("redirected URL's final URL = %v", f)
	}
	if m := most.Load(); m != 2 {
		t.Errorf("at most %d requests to one host at once, want 2", m)
	}

	hang := New(Config{Timeout: 200 * time.Millisecond})
	r, err = hang.Check(context.Background(), []Target{{s.URL + "/hang", "link"}}, true)
	if err != nil {
		t.Fatal(err)
	}
	if it := r.Items[0]; it.Error != nil && !strings.Contains(*it.Error, "no answer within 200ms") {
		t.Errorf("error = %q", *it.Error)
	}
	if it := r.Items[0]; it.Status != nil || it.Error == nil || !strings.Contains(*it.Error, "no answer within 200ms") || it.TimeMs < 200 {
		t.Errorf("a URL that does not answer: %+v", it)
	}
}

// Without private targets allowed, a loopback URL is refused before it is
// dialled, and so is a public name that resolves to loopback, or a
// redirect to loopback.
func TestRefusedTargets(t *testing.T) {
	t.Parallel()
	s, _ := site(t)
	var hits atomic.Int32
	s.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })
	c := New(Config{LookupHost: func(ctx context.Context, host string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}})
	port := s.URL[strings.LastIndexByte(s.URL, ':'):]
	r, err := c.Check(context.Background(), []Target{{s.URL + "/ok", "link"}, {"http://public.example" + port + "/", "image"},
		{"http://169.254.169.254/latest/meta-data/", "link"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range r.Items {
		if it.Status != nil || it.Error == nil || !strings.HasPrefix(*it.Error, "refused: ") {
			t.Errorf("%s: status %s, error %v; want refused", it.URL, statusOf(it), it.Error)
		}
	}
	if !strings.Contains(*r.Items[0].Error, "allowPrivateTargets") {
		t.Errorf("the refusal does not say which setting allows it: %s", *r.Items[0].Error)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the refused server got %d requests", n)
	}
}

// At most MaxURLs are fetched; the rest are counted. A cancelled check
// returns its context's error.
func TestBounds(t *testing.T) {
	t.Parallel()
	s, _ := site(t)
	c := New(Config{MaxURLs: 3})
	var targets []Target
	for i := range 5 {
		targets = append(targets, Target{fmt.Sprintf("%s/ok?%d", s.URL, i), "link"})
	}
	r, err := c.Check(context.Background(), targets, true)
	if err != nil || len(r.Items) != 3 || r.Omitted != 2 {
		t.Fatalf("5 URLs with a limit of 3: %d items, %d omitted, err %v", len(r.Items), r.Omitted, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	s.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(cancel)
		<-r.Context().Done()
	})
	if _, err := c.Check(ctx, targets, true); err == nil {
		t.Error("a cancelled check answered")
	}
}
