package loadgen

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-smtp"
)

// IngestOptions describe one SMTP load.
type IngestOptions struct {
	Messages    int  // how many messages to send
	Connections int  // concurrent SMTP clients
	Reuse       bool // send every message of a client over one connection; false: one connection per message
	// Pipeline sends MAIL, RCPT and DATA in one write (RFC 2920) instead of
	// one command at a time.
	Pipeline bool
	// GoSMTP sends with go-smtp's client instead of the tool's own
	// (rawConn); it cannot pipeline.
	GoSMTP bool
	// MaxErrors stops the run after this many failed messages; 0 means 100.
	MaxErrors int64
	// Rate, when above 0, paces the load: message i is sent no sooner than
	// i/Rate seconds after the start (messages per second in all).
	Rate float64
	// Stop, when closed, ends the load: messages not yet begun are neither
	// sent nor counted, and that is not an error.
	Stop <-chan struct{}
}

// IngestResult is what one SMTP load measured on the client side.
type IngestResult struct {
	Sent, Failed int
	Elapsed      time.Duration
	// Latency of each sent message: from MAIL FROM (from the dial when each
	// message has its own connection) to the 250 after DATA, which mailsink
	// answers only once the message is stored.
	Latency   Latencies
	FirstErrs []string
}

// PerSecond returns stored messages per second.
func (r *IngestResult) PerSecond() float64 { return float64(r.Sent) / r.Elapsed.Seconds() }

// Ingest sends o.Messages messages of m to addr over o.Connections clients
// and returns when all are answered, when too many failed, or when ctx is
// done (the messages left are then neither sent nor counted).
func Ingest(ctx context.Context, addr string, m *Messages, o IngestOptions) (*IngestResult, error) {
	if o.Messages < 1 || o.Connections < 1 {
		return nil, fmt.Errorf("need at least one message and one connection")
	}
	if o.GoSMTP && o.Pipeline {
		return nil, fmt.Errorf("go-smtp's client does not pipeline")
	}
	if o.MaxErrors == 0 {
		o.MaxErrors = 100
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next, failed atomic.Int64
		mu           sync.Mutex
		res          = &IngestResult{}
		wg           sync.WaitGroup
	)
	lat := make([][]time.Duration, o.Connections)
	fail := func(err error) {
		mu.Lock()
		if len(res.FirstErrs) < 5 {
			res.FirstErrs = append(res.FirstErrs, err.Error())
		}
		mu.Unlock()
		if failed.Add(1) >= o.MaxErrors {
			cancel()
		}
	}
	start := time.Now()
	for w := 0; w < o.Connections; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var c smtpConn
			defer func() {
				if c != nil {
					c.quit()
					c.close()
				}
			}()
			buf := make([]byte, 0, m.Size()+256)
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= o.Messages || !pace(ctx, o, start, i) {
					return
				}
				t0 := time.Now()
				if c == nil {
					var err error
					if c, err = connect(ctx, addr, o); err != nil {
						fail(err)
						continue
					}
				}
				buf = m.Build(i, buf[:0])
				err := c.send(m, i, buf)
				if err != nil {
					fail(fmt.Errorf("message %d: %w", i, err))
					// The connection's state is unknown: start a new one.
					c.close()
					c = nil
					continue
				}
				if !o.Reuse {
					err = c.quit()
					c.close()
					c = nil
					if err != nil {
						fail(fmt.Errorf("message %d: QUIT: %w", i, err))
						continue
					}
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	for _, l := range lat {
		res.Latency = append(res.Latency, l...)
		res.Sent += len(l)
	}
	res.Failed = int(failed.Load())
	if err := ctx.Err(); err != nil && res.Sent+res.Failed < o.Messages {
		if res.Failed >= int(o.MaxErrors) {
			return res, fmt.Errorf("stopped after %d failed messages; first: %v", res.Failed, res.FirstErrs)
		}
		return res, fmt.Errorf("stopped after %d of %d messages: %w", res.Sent+res.Failed, o.Messages, err)
	}
	return res, nil
}

// pace waits until message i is due (o.Rate) and reports whether to send
// it: false once o.Stop is closed or ctx is done.
func pace(ctx context.Context, o IngestOptions, start time.Time, i int) bool {
	var due <-chan time.Time
	if o.Rate > 0 {
		if d := time.Until(start.Add(time.Duration(float64(i) / o.Rate * float64(time.Second)))); d > 0 {
			t := time.NewTimer(d)
			defer t.Stop()
			due = t.C
		}
	}
	if due == nil {
		select {
		case <-o.Stop:
			return false
		default:
			return true
		}
	}
	select {
	case <-o.Stop:
		return false
	case <-ctx.Done():
		return false
	case <-due:
		return true
	}
}

func connect(ctx context.Context, addr string, o IngestOptions) (smtpConn, error) {
	if !o.GoSMTP {
		// Not returned directly: a nil *rawConn in the interface would
		// not be nil, and the caller would send on it.
		c, err := dialRaw(ctx, addr, o.Pipeline)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	c, err := dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return goSMTPConn{c}, nil
}

func dial(ctx context.Context, addr string) (*smtp.Client, error) {
	d := net.Dialer{Timeout: dialTimeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := smtp.NewClient(conn)
	c.CommandTimeout = replyTimeout
	c.SubmissionTimeout = doneTimeout
	if err := c.Hello("loadgen.bench.test"); err != nil {
		c.Close()
		return nil, fmt.Errorf("EHLO: %w", err)
	}
	return c, nil
}

// send runs one transaction: MAIL, a RCPT per recipient, DATA.
func send(c *smtp.Client, m *Messages, i int, raw []byte) error {
	if err := c.Mail("sender@bench.test", nil); err != nil {
		return fmt.Errorf("MAIL: %w", err)
	}
	for _, k := range m.RecipientsOf(i) {
		if err := c.Rcpt(m.Recipient(k), nil); err != nil {
			return fmt.Errorf("RCPT: %w", err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("DATA: %w", err)
	}
	if _, err := w.Write(raw); err != nil {
		w.Close()
		return fmt.Errorf("DATA: %w", err)
	}
	if err := w.Close(); err != nil {
		var se *smtp.SMTPError
		if errors.As(err, &se) {
			return fmt.Errorf("end of DATA: %d %s", se.Code, se.Message)
		}
		return fmt.Errorf("end of DATA: %w", err)
	}
	return nil
}
