package clustertest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mailsink/mailsink/store"
)

// EventStream reads an account's /v1/events as an EventSource does: when
// the server ends the stream it connects again with Last-Event-ID. It
// collects the subjects of the emails created, so that a failover test can
// tell which acknowledged emails never reached the stream.
type EventStream struct {
	mu       sync.Mutex
	subjects map[string]bool
	again    int
}

// OpenEventStream opens the stream of the account with key at base and
// reads it until ctx ends. It fails when the stream does not open within
// 10 seconds.
func OpenEventStream(ctx context.Context, base, key string) (*EventStream, error) {
	s := &EventStream{subjects: map[string]bool{}}
	opened := make(chan struct{})
	go func() {
		var last string
		for first := true; ctx.Err() == nil; first = false {
			if !first {
				s.mu.Lock()
				s.again++
				s.mu.Unlock()
			}
			last = s.read(ctx, base, key, last, opened)
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond): // the stream's retry, shortened
			}
		}
	}()
	select {
	case <-opened:
		return s, nil
	case <-time.After(10 * time.Second):
		return nil, errors.New("an event stream did not open within 10s")
	}
}

// read reads one connection of the stream and returns the last event id.
func (s *EventStream) read(ctx context.Context, base, key, last string, opened chan struct{}) string {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return last
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return last
	}
	select {
	case <-opened:
	default:
		close(opened)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var id, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		case line == "" && data != "":
			var ev struct {
				Type string `json:"type"`
				Item struct {
					Subject string `json:"subject"`
				} `json:"item"`
			}
			if json.Unmarshal([]byte(data), &ev) == nil && ev.Type == string(store.EmailCreated) {
				s.mu.Lock()
				s.subjects[ev.Item.Subject] = true
				s.mu.Unlock()
			}
			if id != "" {
				last = id
			}
			id, data = "", ""
		}
	}
	return last
}

// Missing returns the subjects the stream has not carried.
func (s *EventStream) Missing(subjects []string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, sub := range subjects {
		if !s.subjects[sub] {
			out = append(out, sub)
		}
	}
	return out
}

// Reconnects returns how many times the stream connected again.
func (s *EventStream) Reconnects() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.again
}
