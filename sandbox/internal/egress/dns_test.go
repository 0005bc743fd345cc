package egress

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dnsProxy is a Proxy whose launch resolver read hosts and a resolv.conf
// with a search list, serving its DNS responder.
func dnsProxy(t testing.TB, hosts string, rules ...string) (*testProxy, DNSAddrs) {
	t.Helper()
	dir := t.TempDir()
	hp, rp := filepath.Join(dir, "hosts"), filepath.Join(dir, "resolv.conf")
	os.WriteFile(hp, []byte(hosts), 0o644)
	os.WriteFile(rp, []byte("nameserver 127.0.0.1\nsearch corp.example\n"), 0o644)
	p := startProxy(t, Config{Resolver: NewLaunchResolver(hp, rp)}, rules...)
	addrs, err := p.ServeDNS()
	if err != nil {
		t.Fatal(err)
	}
	return p, addrs
}

// goResolver asks only the responder at a, over the network given.
func goResolver(a netip.AddrPort, network string) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, a.String())
	}}
}

func TestDNSResponder(t *testing.T) {
	p, addrs := dnsProxy(t, "8.8.4.4 api.example\n10.1.2.3 api.example\n192.0.2.1 other.example\n",
		"api.example:443", "*.dev.example")
	for _, c := range []struct {
		network string
		at      netip.AddrPort
	}{{"udp", addrs.UDP}, {"tcp", addrs.TCP}} {
		r := goResolver(c.at, c.network)
		got, err := r.LookupNetIP(context.Background(), "ip4", "api.example")
		if err != nil || len(got) != 1 || got[0] != netip.MustParseAddr("8.8.4.4") {
			t.Errorf("%s: api.example: %v %v; want 8.8.4.4 alone (10.1.2.3 is private: the guard leaves it out)", c.network, got, err)
		}
		for range 2 {
			_, err = r.LookupNetIP(context.Background(), "ip4", "other.example")
			var de *net.DNSError
			if !errors.As(err, &de) || !de.IsNotFound {
				t.Errorf("%s: other.example: %v; want not found", c.network, err)
			}
		}
		_, err = r.LookupNetIP(context.Background(), "ip4", "api.example.corp.example")
		if err == nil {
			t.Errorf("%s: the search-list expansion resolved", c.network)
		}
	}
	if got := p.stderr.lines(); len(got) != 1 || got[0] != "corral: network: denied lookup of other.example: no rule allows this host" {
		t.Errorf("stderr: %q; want one line naming other.example (none for the search-list expansion)", got)
	}
	if !p.DirectConnect(netip.MustParseAddrPort("8.8.4.4:443")) {
		t.Error("a connect to the answered address on the name's port was refused")
	}
	for _, refused := range []string{"8.8.4.4:22", "10.1.2.3:443", "192.0.2.1:443"} {
		if p.DirectConnect(netip.MustParseAddrPort(refused)) {
			t.Errorf("a connect to %s was allowed", refused)
		}
	}
}

// HTTPS and SVCB queries for an admitted name get an empty NOERROR answer
// (the client goes on with A and AAAA); a malformed query gets FORMERR; a
// response is not answered.
func TestDNSResponderTypes(t *testing.T) {
	p, _ := dnsProxy(t, "8.8.4.4 api.example\n", "api.example")
	query := func(name string, qtype uint16) []byte {
		b := []byte{0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}
		for _, l := range strings.Split(name, ".") {
			b = append(b, byte(len(l)))
			b = append(b, l...)
		}
		b = append(b, 0)
		b = binary.BigEndian.AppendUint16(b, qtype)
		return binary.BigEndian.AppendUint16(b, dnsClassIN)
	}
	for _, c := range []struct {
		name           string
		qtype          uint16
		rcode, ancount int
	}{
		{"api.example", dnsTypeHTTPS, rcodeOK, 0},
		{"api.example", dnsTypeSVCB, rcodeOK, 0},
		{"api.example", dnsTypeA, rcodeOK, 1},
		{"api.example", dnsTypeAAAA, rcodeOK, 0},
		{"nope.example", dnsTypeHTTPS, rcodeNXDomain, 0},
	} {
		out := p.answerDNS(query(c.name, c.qtype), dnsUDPMax)
		if len(out) < dnsHeaderLen || binary.BigEndian.Uint16(out) != 0x1234 || out[2]&0x80 == 0 ||
			int(out[3]&0xf) != c.rcode || int(binary.BigEndian.Uint16(out[6:])) != c.ancount {
			t.Errorf("%s type %d: answer % x; want rcode %d with %d answers", c.name, c.qtype, out, c.rcode, c.ancount)
		}
	}
	bad := query("api.example", dnsTypeA)
	bad[dnsHeaderLen] = 0xc0 // a compression pointer in the question
	if out := p.answerDNS(bad, dnsUDPMax); len(out) != dnsHeaderLen || out[3]&0xf != rcodeFormErr {
		t.Errorf("a compressed question: % x; want FORMERR", out)
	}
	resp := query("api.example", dnsTypeA)
	resp[2] |= 0x80
	if out := p.answerDNS(resp, dnsUDPMax); out != nil {
		t.Errorf("a response was answered: % x", out)
	}
}
