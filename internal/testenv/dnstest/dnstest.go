// Package dnstest serves DNS records on loopback for tests
// (github.com/miekg/dns), so that a check's lookups (DKIM keys, SPF and
// DMARC policies, link hosts) go to records the test publishes.
package dnstest

import (
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
)

// Server answers A, AAAA and TXT queries from the records set on it, over
// UDP and TCP on one loopback port; a name it has no record of is
// NXDOMAIN.
type Server struct {
	addr     string
	mu       sync.Mutex
	records  map[string][]dns.RR // by lower-case FQDN
	servFail map[string]bool
}

// Start serves until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{records: map[string][]dns.RR{}, servFail: map[string]bool{}}
	var pc net.PacketConn
	var l net.Listener
	// The UDP port must be free for TCP too: try a few.
	for range 20 {
		var err error
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if l, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
		pc = nil
	}
	if pc == nil {
		t.Fatal("dnstest: no port free for both UDP and TCP")
	}
	s.addr = pc.LocalAddr().String()
	udp := &dns.Server{PacketConn: pc, Handler: s}
	tcp := &dns.Server{Listener: l, Handler: s}
	go udp.ActivateAndServe()
	go tcp.ActivateAndServe()
	t.Cleanup(func() {
		udp.Shutdown()
		tcp.Shutdown()
	})
	return s
}

// Addr is the server's host:port, for MAILSINK_DNS_RESOLVER.
func (s *Server) Addr() string { return s.addr }

// TXT publishes a TXT record of name for each value (a value over 255
// bytes is split into strings, as DKIM keys are).
func (s *Server) TXT(name string, values ...string) {
	for _, v := range values {
		var parts []string
		for len(v) > 255 {
			parts = append(parts, v[:255])
			v = v[255:]
		}
		parts = append(parts, v)
		s.add(&dns.TXT{Hdr: header(name, dns.TypeTXT), Txt: parts})
	}
}

// A publishes the addresses of name (A or AAAA records by their kind).
func (s *Server) A(name string, ips ...string) {
	for _, v := range ips {
		ip := net.ParseIP(v)
		if ip.To4() != nil {
			s.add(&dns.A{Hdr: header(name, dns.TypeA), A: ip.To4()})
		} else {
			s.add(&dns.AAAA{Hdr: header(name, dns.TypeAAAA), AAAA: ip})
		}
	}
}

// ServFail makes queries for name fail with SERVFAIL, a temporary error.
func (s *Server) ServFail(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.servFail[strings.ToLower(dns.Fqdn(name))] = true
}

func header(name string, t uint16) dns.RR_Header {
	return dns.RR_Header{Name: dns.Fqdn(name), Rrtype: t, Class: dns.ClassINET, Ttl: 60}
}

func (s *Server) add(rr dns.RR) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := strings.ToLower(rr.Header().Name)
	s.records[k] = append(s.records[k], rr)
}

// ServeDNS answers one query.
func (s *Server) ServeDNS(w dns.ResponseWriter, q *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(q)
	m.Authoritative = true
	if len(q.Question) == 1 {
		qq := q.Question[0]
		s.mu.Lock()
		rrs, ok := s.records[strings.ToLower(qq.Name)]
		fail := s.servFail[strings.ToLower(qq.Name)]
		s.mu.Unlock()
		switch {
		case fail:
			m.Rcode = dns.RcodeServerFailure
			rrs = nil
		case !ok:
			m.Rcode = dns.RcodeNameError
		}
		for _, rr := range rrs {
			if rr.Header().Rrtype == qq.Qtype {
				m.Answer = append(m.Answer, rr)
			}
		}
	}
	w.WriteMsg(m)
}
