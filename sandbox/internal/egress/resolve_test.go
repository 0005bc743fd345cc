package egress

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// dnsServer is a tiny DNS server on 127.0.0.1, UDP and TCP on one port,
// answering from a table: name -> records ("A 1.2.3.4", "AAAA ::1",
// "CNAME x.test."). A name marked "TC" answers truncated over UDP; "SPOOF"
// sends a wrong-id answer first.
type dnsServer struct {
	addr    netip.AddrPort
	records map[string][]string
	udp     net.PacketConn
	tcp     net.Listener
	queries chan string
}

func startDNS(t *testing.T, records map[string][]string) *dnsServer {
	t.Helper()
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddrPort(udp.LocalAddr().String())
	tcp, err := net.Listen("tcp", addr.String())
	if err != nil {
		udp.Close()
		t.Skip("cannot listen on TCP at the UDP port:", err)
	}
	s := &dnsServer{addr: addr, records: records, udp: udp, tcp: tcp, queries: make(chan string, 100)}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := udp.ReadFrom(buf)
			if err != nil {
				return
			}
			for _, out := range s.answer(buf[:n], true) {
				udp.WriteTo(out, from)
			}
		}
	}()
	go func() {
		for {
			c, err := tcp.Accept()
			if err != nil {
				return
			}
			var l [2]byte
			io.ReadFull(c, l[:])
			msg := make([]byte, binary.BigEndian.Uint16(l[:]))
			io.ReadFull(c, msg)
			for _, out := range s.answer(msg, false) {
				c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(out))), out...))
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { udp.Close(); tcp.Close() })
	return s
}

func (s *dnsServer) answer(msg []byte, udp bool) [][]byte {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	name := strings.ToLower(q.Name.String())
	s.queries <- q.Type.String() + " " + name
	recs, ok := s.records[name]
	rh := dnsmessage.Header{ID: h.ID, Response: true, RecursionAvailable: true}
	if !ok {
		rh.RCode = dnsmessage.RCodeNameError
	}
	var out [][]byte
	if slices.Contains(recs, "SPOOF") {
		bad := rh
		bad.ID++
		out = append(out, build(bad, q, []string{"A 192.0.2.66", "AAAA 2001:db8::66"}))
	}
	if udp && slices.Contains(recs, "TC") {
		rh.Truncated = true
		return append(out, build(rh, q, nil))
	}
	return append(out, build(rh, q, recs))
}

func build(h dnsmessage.Header, q dnsmessage.Question, recs []string) []byte {
	b := dnsmessage.NewBuilder(nil, h)
	b.StartQuestions()
	b.Question(q)
	b.StartAnswers()
	owner := q.Name
	for _, r := range recs {
		kind, val, _ := strings.Cut(r, " ")
		hdr := dnsmessage.ResourceHeader{Name: owner, Class: dnsmessage.ClassINET, TTL: 60}
		switch {
		case kind == "CNAME":
			b.CNAMEResource(hdr, dnsmessage.CNAMEResource{CNAME: dnsmessage.MustNewName(val)})
			owner = dnsmessage.MustNewName(val)
		case kind == "A" && q.Type == dnsmessage.TypeA:
			b.AResource(hdr, dnsmessage.AResource{A: netip.MustParseAddr(val).As4()})
		case kind == "AAAA" && q.Type == dnsmessage.TypeAAAA:
			b.AAAAResource(hdr, dnsmessage.AAAAResource{AAAA: netip.MustParseAddr(val).As16()})
		}
	}
	out, _ := b.Finish()
	return out
}

// The resolver keeps the hosts file and resolv.conf it read when made: a
// rewrite of either afterwards (what a uid-0 runner could do to /etc/hosts)
// changes nothing. Hosts lines come first, then DNS to the nameservers
// named, with the search list, CNAMEs, TCP after a truncated answer, and
// answers with another id ignored.
func TestLaunchResolver(t *testing.T) {
	dir := t.TempDir()
	hosts, resolv := filepath.Join(dir, "hosts"), filepath.Join(dir, "resolv.conf")
	os.WriteFile(hosts, []byte("# comment\n127.0.0.9 fixed.test Alias.Test # trailing\n::1 fixed.test\n"), 0o644)
	os.WriteFile(resolv, []byte("nameserver 127.0.0.1\nsearch corp.test\noptions ndots:2 timeout:2 attempts:1\n"), 0o644)
	r := NewLaunchResolver(hosts, resolv)
	// The runner's rewrite, after the proxy was made.
	os.WriteFile(hosts, []byte("127.0.0.66 fixed.test alias.test evil.test\n"), 0o644)
	os.WriteFile(resolv, []byte("nameserver 192.0.2.53\n"), 0o644)

	srv := startDNS(t, map[string][]string{
		"fixed.test.":      {"A 192.0.2.99"},
		"dns.test.":        {"A 192.0.2.10", "AAAA 2001:db8::10"},
		"alias.dns.test.":  {"CNAME dns.test.", "A 192.0.2.10"},
		"short.corp.test.": {"A 192.0.2.20"},
		"big.test.":        {"TC", "A 192.0.2.30"},
		"spoof.test.":      {"SPOOF", "A 192.0.2.40"},
		"v6only.test.":     {"AAAA 2001:db8::50"},
	})
	if r.ndots != 2 || r.timeout != 2*time.Second || r.attempts != 1 || !slices.Equal(r.search, []string{"corp.test"}) ||
		!slices.Equal(r.servers, []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:53")}) {
		t.Fatalf("resolv.conf read as %+v", r)
	}
	r.servers = []netip.AddrPort{srv.addr} // resolv.conf has no port; the test server has one
	ctx := context.Background()
	for _, tc := range []struct{ host, want string }{
		{"fixed.test", "[127.0.0.9 ::1]"},
		{"ALIAS.test.", "[127.0.0.9]"},
		{"dns.test", "[192.0.2.10 2001:db8::10]"},
		{"alias.dns.test", "[192.0.2.10]"},
		{"short", "[192.0.2.20]"},
		{"big.test", "[192.0.2.30]"},
		{"spoof.test", "[192.0.2.40]"},
		{"v6only.test", "[2001:db8::50]"},
	} {
		got, err := r.LookupNetIP(ctx, "ip", tc.host)
		if err != nil || strings.Join(strings.Fields(strings.Trim(fmtAddrs(got), "[]")), " ") != strings.Trim(tc.want, "[]") {
			t.Errorf("%s: %v %v; want %s", tc.host, got, err, tc.want)
		}
	}
	_, err := r.LookupNetIP(ctx, "ip", "evil.test")
	var de *net.DNSError
	if !errors.As(err, &de) || !de.IsNotFound {
		t.Errorf("evil.test (only in the rewritten hosts file): %v; want not found", err)
	}
	// A silent server is a timeout within the context's bound.
	silent, _ := net.ListenPacket("udp", "127.0.0.1:0")
	defer silent.Close()
	r.servers = []netip.AddrPort{netip.MustParseAddrPort(silent.LocalAddr().String())}
	ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := r.LookupNetIP(ctx, "ip", "dns.test"); err == nil || time.Since(start) > time.Second {
		t.Errorf("silent server: %v after %v", err, time.Since(start))
	}
}

func fmtAddrs(a []netip.Addr) string {
	var s []string
	for _, x := range a {
		s = append(s, x.String())
	}
	return "[" + strings.Join(s, " ") + "]"
}

// Without a resolv.conf the nameservers are the C library's defaults.
func TestLaunchResolverDefaults(t *testing.T) {
	r := NewLaunchResolver("/nonexistent/hosts", "/nonexistent/resolv.conf")
	if len(r.hosts) != 0 || len(r.servers) != 2 || r.servers[0].String() != "127.0.0.1:53" || r.ndots != 1 {
		t.Errorf("%+v", r)
	}
	if got := r.candidates("a"); !slices.Equal(got, []string{"a."}) {
		t.Errorf("candidates %v", got)
	}
}
