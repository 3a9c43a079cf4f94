package loadgen

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mailsink/mailsink/internal/testenv"
)

// A small reads run against an in-process mailsink with two accounts on
// each store: every endpoint answers every request for every hostile
// message (404 only for an attachment the message lacks), the other
// account's list requests are timed throughout, and the report has a row
// per batch and a verdict per target.
func TestRunReads(t *testing.T) {
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			env := testenv.Start(t, b, nil)
			target := Target{SMTP: env.SMTP, HTTP: env.BaseURL, APIKey: testenv.AcmeKey, OtherKey: testenv.GlobexKey,
				PID: os.Getpid(), Backend: b.Name}
			o := DefaultReadsOptions(256 << 10)
			o.Concurrency, o.OtherEmails, o.OtherRecipients, o.Baseline = 2, 20, 4, 200*time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := RunReads(ctx, target, o)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := len(res.Batches), len(o.Shapes)*len(o.Endpoints); got != want {
				t.Fatalf("%d batches, want %d", got, want)
			}
			noAttachment := map[string]bool{"header-bomb": true, "links-parens": true, "invalid-utf8": true}
			for _, bt := range res.Batches {
				want := map[int]int{200: o.Concurrency}
				if noAttachment[bt.Shape] && strings.Contains(bt.Endpoint, "/attachments/") {
					want = map[int]int{404: o.Concurrency}
				}
				if fmt.Sprint(bt.Status) != fmt.Sprint(want) || len(bt.Errors) > 0 || bt.HWM <= 0 {
					t.Errorf("%s %s: answers %v, errors %v, VmHWM %d; want %v", bt.Shape, bt.Endpoint, bt.Status, bt.Errors, bt.HWM, want)
				}
			}
			if len(res.Other) == 0 || res.OtherErrors > 0 || len(res.Baseline) == 0 {
				t.Errorf("the other account's list requests: %d timed during the batches, %d failed, %d in the baseline",
					len(res.Other), res.OtherErrors, len(res.Baseline))
			}
			md := (&ReadsReport{Options: o, Results: []*ReadsResult{res}}).Markdown()
			for _, want := range []string{
				"| `header-bomb` | `/ui/a/{account}/preview/{id}` | 2 × 200 |",
				"| `links-parens` | `/v1/emails/{id}/attachments/{i}` | 2 × 404 |",
				"| no request over 2 s of CPU | " + b.Name + " | ",
				"| peak RSS under 1 GiB | " + b.Name + " | ",
				"| the other account's list p99 under 50 ms | " + b.Name + " | ",
			} {
				if !strings.Contains(md, want) {
					t.Errorf("the report lacks %q", want)
				}
			}
		})
	}
}
