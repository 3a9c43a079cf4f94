package smtpd

import (
	"context"
	"time"

	"github.com/emersion/go-smtp"
)

// room is the memory one message holds in Config.Buffers while it is read
// and stored: taken before each buffer is read into (readFirst), given back
// by release. A nil Config.Buffers gives room at once.
type room struct {
	s        *Server
	tx       context.Context // the transaction: a wait ends with it
	deadline time.Time       // the transfer's end, or zero
	keys     []string        // the shares it counts in (Session.share)
	gives    [2]func()       // what gives back each part taken
	parts    int
	held     int64
}

// errBusy refuses a message that found no room in Config.Buffers within the
// read timeout: go-smtp reads the rest of it and drops it, and the session
// goes on.
var errBusy = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 2},
	Message: "Too many messages being received at once (from your address, or in all): try again later"}

// take takes n bytes more. When there is no room now it waits, reading
// nothing meanwhile, until there is, at most ReadTimeout (then errBusy),
// and not past the transfer's deadline (context.DeadlineExceeded), the
// transaction's end (smtp.ErrDataReset) or the start of a shutdown
// (errShuttingDown).
func (r *room) take(n int64) error {
	budget := r.s.cfg.Buffers
	if budget == nil {
		return nil
	}
	give, err := budget.Acquire(r.s.noWait, n, r.keys...)
	if err != nil {
		if give, err = r.wait(n); err != nil {
			return err
		}
	}
	r.gives[r.parts] = give
	r.parts++
	r.held += n
	return nil
}

// wait is take's wait for room.
func (r *room) wait(n int64) (func(), error) {
	s := r.s
	until, atDeadline := r.deadline, !r.deadline.IsZero()
	if d := s.cfg.ReadTimeout; d > 0 {
		if busy := time.Now().Add(d); !atDeadline || busy.Before(until) {
			until, atDeadline = busy, false
		}
	}
	ctx := r.tx
	if !until.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, until)
		defer cancel()
	}
	ctx, stop := s.untilDraining(ctx)
	defer stop()
	give, err := s.cfg.Buffers.Acquire(ctx, n, r.keys...)
	switch {
	case err == nil:
		return give, nil
	case s.draining():
		return nil, errShuttingDown
	case r.tx.Err() != nil:
		return nil, smtp.ErrDataReset
	case atDeadline:
		return nil, context.DeadlineExceeded
	}
	return nil, errBusy
}

// shrink trades the room held for n bytes when n is at most half of it and
// there is room for n now; else it keeps what it holds, which is more.
func (r *room) shrink(n int64) {
	budget := r.s.cfg.Buffers
	if budget == nil || r.parts == 0 || 2*n > r.held {
		return
	}
	give, err := budget.Acquire(r.s.noWait, n, r.keys...)
	if err != nil {
		return
	}
	r.release()
	r.gives[0], r.parts, r.held = give, 1, n
}

// release gives back all the room held.
func (r *room) release() {
	for i := range r.parts {
		r.gives[i]()
		r.gives[i] = nil
	}
	r.parts, r.held = 0, 0
}

// untilDraining returns ctx, ended also when the server starts draining;
// stop ends it.
func (s *Server) untilDraining(ctx context.Context) (wait context.Context, stop context.CancelFunc) {
	wait, stop = context.WithCancel(ctx)
	go func() {
		select {
		case <-s.conns.stopping:
			stop()
		case <-wait.Done():
		}
	}()
	return wait, stop
}

// draining reports whether the server has started draining.
func (s *Server) draining() bool {
	select {
	case <-s.conns.stopping:
		return true
	default:
		return false
	}
}
