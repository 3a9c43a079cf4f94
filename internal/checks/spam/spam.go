// Package spam scores a message with SpamAssassin's spamd, over the SPAMC
// protocol (spamd(1), "PROTOCOL"): one REPORT request per message, whose
// answer gives the score, the threshold and the verdict in its Spam header
// and the rules that hit, with their scores and descriptions, in its
// report's table.
//
// A message is sent whole up to MaxBytes and cut there, as spamc does by
// default (it leaves larger messages unscored; a cut message is scored on
// what it starts with, and the answer says so). Time is bounded by the
// client's timeout, and memory by MaxBytes and maxAnswer.
package spam

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// MaxBytes is how much of a message is scored: spamc's default limit of
// 500 KB.
const MaxBytes = 500 * 1024

// maxAnswer bounds what is read of spamd's answer: a report is a few KB.
const maxAnswer = 1 << 20

// Report is spamd's verdict on a message.
type Report struct {
	Score     float64 `json:"score"`
	Threshold float64 `json:"threshold"`
	IsSpam    bool    `json:"isSpam"`
	Rules     []Rule  `json:"rules"`
	// ScoredBytes is how much of the message was scored; Truncated is set
	// when that is less than all of it (MaxBytes).
	ScoredBytes int  `json:"scoredBytes"`
	Truncated   bool `json:"truncated"`
}

// Rule is one SpamAssassin rule that hit.
type Rule struct {
	Name        string  `json:"name"`
	Score       float64 `json:"score"`
	Description string  `json:"description"`
}

// Client asks one spamd.
type Client struct {
	// Addr is spamd's host:port.
	Addr string
	// Timeout bounds one request, from dialling to the end of the
	// answer.
	Timeout time.Duration
}

// Error is a failure of spamd or of the way to it: it cannot be reached,
// it answers with an error, or its answer does not parse.
type Error struct {
	Err error
}

func (e *Error) Error() string { return "spamd: " + e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

// Check scores raw. It returns an *Error when spamd fails, and ctx's error
// when ctx ends first.
func (c *Client) Check(ctx context.Context, raw []byte) (*Report, error) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	msg := raw[:min(len(raw), MaxBytes)]
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", c.Addr)
	if err != nil {
		return nil, c.fail(ctx, err)
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		conn.SetDeadline(deadline)
	}
	// A context that ends before the deadline (the client went away)
	// ends the exchange too.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	head := fmt.Sprintf("REPORT SPAMC/1.5\r\nContent-length: %d\r\n\r\n", len(msg))
	if _, err := conn.Write(append([]byte(head), msg...)); err != nil {
		return nil, c.fail(ctx, err)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
	r, err := parseAnswer(io.LimitReader(conn, maxAnswer))
	if err != nil {
		return nil, c.fail(ctx, err)
	}
	r.ScoredBytes, r.Truncated = len(msg), len(msg) < len(raw)
	return r, nil
}

// fail is err as Check returns it: ctx's error when ctx ended, else an
// *Error.
func (c *Client) fail(ctx context.Context, err error) error {
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ctx.Err()
	}
	// The connection's deadline is the context's: either may be seen
	// first.
	var ne net.Error
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		err = fmt.Errorf("no answer within %s", c.Timeout)
	}
	return &Error{Err: err}
}

// spamHeader is the answer's "Spam: True ; 1003.3 / 5.0".
var spamHeader = regexp.MustCompile(`^(?i:spam):\s*(\w+)\s*;\s*(-?[\d.]+)\s*/\s*(-?[\d.]+)\s*$`)

// parseAnswer reads spamd's answer to REPORT.
func parseAnswer(r io.Reader) (*Report, error) {
	br := bufio.NewReader(r)
	status, err := br.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	// "SPAMD/1.1 0 EX_OK"
	fields := strings.Fields(status)
	if len(fields) < 2 || !strings.HasPrefix(fields[0], "SPAMD/") {
		return nil, fmt.Errorf("not a spamd answer: %q", clip(status))
	}
	if fields[1] != "0" {
		return nil, fmt.Errorf("answered %q", clip(strings.TrimSpace(status)))
	}
	rep := &Report{Rules: []Rule{}}
	var sawSpam bool
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("reading the answer's headers: %w", err)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			break
		}
		if m := spamHeader.FindStringSubmatch(line); m != nil {
			rep.IsSpam = strings.EqualFold(m[1], "true") || strings.EqualFold(m[1], "yes")
			rep.Score, _ = strconv.ParseFloat(m[2], 64)
			rep.Threshold, _ = strconv.ParseFloat(m[3], 64)
			sawSpam = true
		}
	}
	if !sawSpam {
		return nil, errors.New("the answer has no Spam header")
	}
	body, err := io.ReadAll(br)
	if err != nil {
		return nil, fmt.Errorf("reading the report: %w", err)
	}
	rep.Rules = parseRules(body)
	return rep, nil
}

// ruleLine is a line of the report's table: " 0.6 MISSING_MID  Missing
// Message-Id: header".
var ruleLine = regexp.MustCompile(`^\s*(-?\d+(?:\.\d+)?)\s+([A-Za-z0-9_.]+)\s+(.*)$`)

// parseRules reads the rules table of a report: after its line of dashes
// (or, in a report whose template has none, anywhere), each line that
// starts with a score and a rule name, with the indented lines after it
// continuing its description.
func parseRules(report []byte) []Rule {
	lines := strings.Split(string(bytes.ReplaceAll(report, []byte("\r\n"), []byte("\n"))), "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "---- ") {
			lines = lines[i+1:]
			break
		}
	}
	rules := []Rule{}
	for _, l := range lines {
		if m := ruleLine.FindStringSubmatch(l); m != nil {
			score, _ := strconv.ParseFloat(m[1], 64)
			rules = append(rules, Rule{Name: m[2], Score: score, Description: strings.TrimSpace(m[3])})
			continue
		}
		text := strings.TrimSpace(l)
		switch {
		case text == "":
			if len(rules) > 0 {
				return rules // the table ends with a blank line
			}
		case len(rules) > 0 && l[0] == ' ':
			last := &rules[len(rules)-1]
			last.Description = strings.TrimSpace(last.Description + " " + text)
		}
	}
	return rules
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
