// Package auth checks a message's authentication as a receiving server
// would: its DKIM signatures, verified over the raw source as stored
// (github.com/emersion/go-msgauth), SPF for the SMTP client that delivered
// it (blitiri.com.ar/go/spf), and DMARC, the From domain's policy and
// whether a passing DKIM or SPF identity aligns with it (RFC 7489;
// organisational domains from golang.org/x/net/publicsuffix).
//
// SPF is evaluated when the check runs, from what the SMTP transcript
// recorded at receipt (the client's address after trusted proxies, HELO
// and MAIL FROM), so that receiving mail never waits for DNS; a message
// that came over HTTP has no transcript and gets "none". Results are
// RFC 8601's: pass, fail, softfail, neutral, none, temperror, permerror,
// each with the reason.
//
// Every DNS lookup is bounded by the resolver's timeout, at most
// MaxSignatures signatures are verified, and the body is read once per
// signature as it is canonicalised: time is linear in the message's
// length.
package auth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/mail"
	"net/netip"
	"regexp"
	"strings"
	"time"

	"blitiri.com.ar/go/spf"
	"github.com/emersion/go-msgauth/dkim"
	"github.com/emersion/go-msgauth/dmarc"
	"golang.org/x/net/publicsuffix"

	"github.com/mailsink/mailsink/internal/checks/resolve"
	"github.com/mailsink/mailsink/store"
)

// MaxSignatures bounds the DKIM signatures verified; the others are
// counted in Report.DKIMIgnored.
const MaxSignatures = 5

// Timeout bounds a whole check, its lookups together.
const Timeout = 30 * time.Second

// The results, RFC 8601's.
const (
	Pass      = "pass"
	Fail      = "fail"
	None      = "none"
	TempError = "temperror"
	PermError = "permerror"
)

// Report is the authentication of one message.
type Report struct {
	DKIM []DKIM `json:"dkim"`
	// DKIMIgnored counts the signatures past MaxSignatures, not verified.
	DKIMIgnored int   `json:"dkimIgnored"`
	SPF         SPF   `json:"spf"`
	DMARC       DMARC `json:"dmarc"`
}

// DKIM is the verification of one signature.
type DKIM struct {
	// Domain and Selector are the signature's d= and s=; the key is the
	// TXT record of Selector._domainkey.Domain.
	Domain   string `json:"domain"`
	Selector string `json:"selector"`
	// Result is pass, fail (the signature or the body hash does not
	// verify), permerror (the signature or its key is unusable) or
	// temperror (the key could not be fetched now).
	Result string `json:"result"`
	Reason string `json:"reason"`
}

// SPF is the check of the client that delivered the message.
type SPF struct {
	// Result is pass, fail, softfail, neutral, none, temperror or
	// permerror.
	Result string `json:"result"`
	// Domain is the domain whose policy was checked: MAIL FROM's, or
	// HELO's for a null sender; empty when there was none.
	Domain string `json:"domain"`
	// ClientIP, Helo and MailFrom are what the check was given, from the
	// SMTP transcript.
	ClientIP string `json:"clientIp"`
	Helo     string `json:"helo"`
	MailFrom string `json:"mailFrom"`
	Reason   string `json:"reason"`
}

// DMARC is the From domain's policy and its outcome.
type DMARC struct {
	// Result is pass (an aligned DKIM or SPF pass), fail, none (no
	// policy), temperror or permerror.
	Result string `json:"result"`
	// Domain is the From header's domain; PolicyDomain the domain whose
	// record applies (Domain's, else its organisational domain's).
	Domain       string `json:"domain"`
	PolicyDomain string `json:"policyDomain"`
	// Policy is what the record asks receivers to do with mail that
	// fails (none, quarantine, reject): its p=, or its sp= for a
	// subdomain.
	Policy string `json:"policy"`
	// DKIMAligned and SPFAligned say whether a passing identity of each
	// aligns with Domain (in the record's mode, relaxed or strict).
	DKIMAligned bool   `json:"dkimAligned"`
	SPFAligned  bool   `json:"spfAligned"`
	Reason      string `json:"reason"`
}

// Checker checks messages' authentication through a resolver.
type Checker struct {
	Resolver *resolve.Resolver
}

// Check checks raw, which tr delivered (nil: not SMTP). It returns ctx's
// error when ctx ends first; a DNS failure is a temperror of the result
// it concerns, not an error.
func (c *Checker) Check(ctx context.Context, raw []byte, tr *store.Transcript) (*Report, error) {
	head := header(raw, "DKIM-Signature", "From")
	r := &Report{}
	var err error
	r.DKIM, r.DKIMIgnored, err = c.dkim(ctx, raw, head)
	if err != nil {
		return nil, err
	}
	r.SPF = c.spf(ctx, tr)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.DMARC = c.dmarc(ctx, head, r.DKIM, r.SPF)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return r, nil
}

// lookupTXT is the TXT lookup the go-msgauth packages call, which take no
// context.
func (c *Checker) lookupTXT(ctx context.Context) func(string) ([]string, error) {
	return func(name string) ([]string, error) { return c.Resolver.LookupTXT(ctx, name) }
}

// ctxReader reads r until ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p[:min(len(p), 256<<10)])
}

func (c *Checker) dkim(ctx context.Context, raw []byte, head []field) ([]DKIM, int, error) {
	out := []DKIM{}
	for _, f := range head {
		if strings.EqualFold(f.name, "DKIM-Signature") {
			tags := tagList(f.value)
			out = append(out, DKIM{Domain: tags["d"], Selector: tags["s"]})
		}
	}
	if len(out) == 0 {
		return out, 0, nil
	}
	ignored := max(len(out)-MaxSignatures, 0)
	out = out[:len(out)-ignored]
	verifs, err := dkim.VerifyWithOptions(ctxReader{ctx, bytes.NewReader(raw)}, &dkim.VerifyOptions{
		LookupTXT: c.lookupTXT(ctx), MaxVerifications: MaxSignatures,
	})
	if cerr := ctx.Err(); cerr != nil {
		return nil, 0, cerr
	}
	if err != nil && !errors.Is(err, dkim.ErrTooManySignatures) {
		// The message could not be read as a signed message at all.
		for i := range out {
			out[i].Result, out[i].Reason = PermError, err.Error()
		}
		return out, ignored, nil
	}
	for i := range out {
		if i >= len(verifs) {
			out[i].Result, out[i].Reason = PermError, "not verified"
			continue
		}
		v := verifs[i]
		if v.Domain != "" {
			out[i].Domain = v.Domain
		}
		switch err := v.Err; {
		case err == nil:
			out[i].Result = Pass
			out[i].Reason = fmt.Sprintf("verified with the key at %s._domainkey.%s", out[i].Selector, out[i].Domain)
		case dkim.IsTempFail(err):
			out[i].Result, out[i].Reason = TempError, trimDKIM(err)
		case dkim.IsPermFail(err):
			out[i].Result, out[i].Reason = PermError, trimDKIM(err)
		default:
			out[i].Result, out[i].Reason = Fail, trimDKIM(err)
		}
	}
	return out, ignored, nil
}

func trimDKIM(err error) string { return strings.TrimPrefix(err.Error(), "dkim: ") }

// spf checks the client of tr.
func (c *Checker) spf(ctx context.Context, tr *store.Transcript) SPF {
	if tr == nil {
		return SPF{Result: None, Reason: "the message did not come over SMTP: there is no client to check"}
	}
	out := SPF{Helo: tr.Helo, MailFrom: tr.Mail.Address}
	host := tr.ClientAddress
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		out.Result, out.Reason = None, fmt.Sprintf("the client's address %q is not an IP address", tr.ClientAddress)
		return out
	}
	ip = ip.Unmap()
	out.ClientIP = ip.String()
	if _, domain, ok := strings.Cut(out.MailFrom, "@"); ok {
		out.Domain = strings.ToLower(domain)
	} else {
		out.Domain = strings.ToLower(out.Helo)
	}
	if out.Domain == "" {
		out.Result, out.Reason = None, "neither MAIL FROM nor HELO named a domain"
		return out
	}
	res, err := spf.CheckHostWithSender(net.IP(ip.AsSlice()), out.Helo, out.MailFrom,
		spf.WithContext(ctx), spf.WithResolver(c.Resolver))
	out.Result = string(res)
	switch {
	case res == spf.Pass:
		out.Reason = fmt.Sprintf("%s may send mail for %s", out.ClientIP, out.Domain)
	case err != nil:
		out.Reason = err.Error()
	default:
		out.Reason = fmt.Sprintf("%s's policy gives %s for %s", out.Domain, res, out.ClientIP)
	}
	return out
}

// dmarc evaluates the From domain's policy against the DKIM and SPF
// results.
func (c *Checker) dmarc(ctx context.Context, head []field, sigs []DKIM, spfResult SPF) DMARC {
	var from []string
	for _, f := range head {
		if strings.EqualFold(f.name, "From") {
			from = append(from, f.value)
		}
	}
	if len(from) != 1 {
		return DMARC{Result: PermError, Reason: fmt.Sprintf("the message has %d From fields; DMARC needs exactly one", len(from))}
	}
	domain, err := fromDomain(from[0])
	if err != nil {
		return DMARC{Result: PermError, Reason: err.Error()}
	}
	out := DMARC{Domain: domain, PolicyDomain: domain}
	opts := &dmarc.LookupOptions{LookupTXT: c.lookupTXT(ctx)}
	rec, err := dmarc.LookupWithOptions(domain, opts)
	org := orgDomain(domain)
	if errors.Is(err, dmarc.ErrNoPolicy) && org != domain {
		out.PolicyDomain = org
		rec, err = dmarc.LookupWithOptions(org, opts)
	}
	switch {
	case errors.Is(err, dmarc.ErrNoPolicy):
		out.Result, out.Reason = None, fmt.Sprintf("no DMARC record at _dmarc.%s", out.PolicyDomain)
		if org != domain {
			out.Reason += " nor at _dmarc." + domain
		}
		return out
	case dmarc.IsTempFail(err):
		out.Result, out.Reason = TempError, strings.TrimPrefix(err.Error(), "dmarc: ")
		return out
	case err != nil:
		out.Result, out.Reason = PermError, strings.TrimPrefix(err.Error(), "dmarc: ")
		return out
	}
	out.Policy = string(rec.Policy)
	if out.PolicyDomain != domain && rec.SubdomainPolicy != "" {
		out.Policy = string(rec.SubdomainPolicy)
	}
	for _, s := range sigs {
		if s.Result == Pass && aligned(s.Domain, domain, rec.DKIMAlignment) {
			out.DKIMAligned = true
		}
	}
	out.SPFAligned = spfResult.Result == Pass && aligned(spfResult.Domain, domain, rec.SPFAlignment)
	switch {
	case out.DKIMAligned || out.SPFAligned:
		out.Result = Pass
		var how []string
		if out.DKIMAligned {
			how = append(how, "DKIM")
		}
		if out.SPFAligned {
			how = append(how, "SPF")
		}
		out.Reason = fmt.Sprintf("%s passed aligned with %s", strings.Join(how, " and "), domain)
	default:
		out.Result = Fail
		out.Reason = fmt.Sprintf("no DKIM signature or SPF result passed aligned with %s; the policy says %s", domain, out.Policy)
	}
	return out
}

// aligned reports whether identity aligns with the From domain: the same
// domain in strict mode, the same organisational domain in relaxed mode
// (the default).
func aligned(identity, from string, mode dmarc.AlignmentMode) bool {
	identity = strings.TrimSuffix(strings.ToLower(identity), ".")
	if identity == "" {
		return false
	}
	if mode == dmarc.AlignmentStrict {
		return identity == from
	}
	return orgDomain(identity) == orgDomain(from)
}

// orgDomain is a domain's organisational domain: its public suffix and one
// label more.
func orgDomain(domain string) string {
	org, err := publicsuffix.EffectiveTLDPlusOne(domain)
	if err != nil {
		return domain
	}
	return org
}

// addrSpec finds the domain of the last address in a From value that
// net/mail cannot parse.
var addrSpec = regexp.MustCompile(`@([A-Za-z0-9.-]+)\s*>?\s*$`)

// fromDomain returns the domain of a From field's one address.
func fromDomain(value string) (string, error) {
	var domain string
	if addrs, err := mail.ParseAddressList(value); err == nil {
		if len(addrs) != 1 {
			return "", fmt.Errorf("the From field has %d addresses; DMARC needs exactly one", len(addrs))
		}
		_, domain, _ = strings.Cut(addrs[0].Address, "@")
	} else if m := addrSpec.FindStringSubmatch(value); m != nil {
		domain = m[1]
	}
	domain = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(domain)), ".")
	if domain == "" {
		return "", errors.New("the From field has no address with a domain")
	}
	return domain, nil
}

// field is one header field, unfolded.
type field struct {
	name, value string
}

// maxHeaderFields bounds the fields read of a header.
const maxHeaderFields = 10000

// header returns the fields of raw's header named one of names
// (case-insensitive), unfolded, in order, reading at most maxHeaderFields
// fields.
func header(raw []byte, names ...string) []field {
	var out []field
	keep := func(start, end int) {
		f := raw[start:end]
		name, value, ok := bytes.Cut(f, []byte(":"))
		if !ok {
			return
		}
		n := string(bytes.TrimSpace(name))
		for _, want := range names {
			if strings.EqualFold(n, want) {
				out = append(out, field{name: n, value: strings.Join(strings.Fields(string(value)), " ")})
				return
			}
		}
	}
	start, fields := -1, 0
	for pos := 0; pos < len(raw) && fields < maxHeaderFields; {
		end := bytes.IndexByte(raw[pos:], '\n')
		next := len(raw)
		if end >= 0 {
			next = pos + end + 1
		}
		line := bytes.TrimRight(raw[pos:next], "\r\n")
		switch {
		case len(line) == 0:
			fields = maxHeaderFields // the end of the header
		case line[0] == ' ' || line[0] == '\t':
			// A continuation of the field being read.
		default:
			if start >= 0 {
				keep(start, pos)
				fields++
			}
			start = pos
		}
		if len(line) == 0 {
			if start >= 0 {
				keep(start, pos)
			}
			start = -1
		}
		pos = next
	}
	if start >= 0 && fields < maxHeaderFields {
		keep(start, len(raw))
	}
	return out
}

// tagList parses a DKIM tag list, "v=1; a=rsa-sha256; d=example.com",
// without its white space.
func tagList(v string) map[string]string {
	out := map[string]string{}
	for _, part := range strings.Split(v, ";") {
		k, val, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		out[strings.TrimSpace(k)] = strings.Join(strings.Fields(val), "")
	}
	return out
}
