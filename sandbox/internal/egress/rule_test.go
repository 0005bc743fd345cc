package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
)

func TestParseRuleGood(t *testing.T) {
	for _, tc := range []struct {
		in       string
		name     string
		wildcard bool
		prefix   string
		port     uint16
		anyPort  bool
	}{
		{in: "example.com", name: "example.com"},
		{in: "Example.COM.", name: "example.com"},
		{in: "api.github.com:443", name: "api.github.com", port: 443},
		{in: "example.com:*", name: "example.com", anyPort: true},
		{in: "*.example.com", name: "example.com", wildcard: true},
		{in: "*.Dev.Test.:8080", name: "dev.test", wildcard: true, port: 8080},
		{in: "my_service.internal", name: "my_service.internal"},
		{in: "localhost", name: "localhost"},
		{in: "192.0.2.7", prefix: "192.0.2.7/32"},
		{in: "192.0.2.7:5432", prefix: "192.0.2.7/32", port: 5432},
		{in: "2001:db8::1", prefix: "2001:db8::1/128"},
		{in: "[2001:db8::1]", prefix: "2001:db8::1/128"},
		{in: "[2001:db8::1]:443", prefix: "2001:db8::1/128", port: 443},
		{in: "[::ffff:127.0.0.1]:80", prefix: "127.0.0.1/32", port: 80},
		{in: "10.0.0.0/8", prefix: "10.0.0.0/8"},
		{in: "10.0.0.0/8:*", prefix: "10.0.0.0/8", anyPort: true},
		{in: "127.0.0.0/8:65535", prefix: "127.0.0.0/8", port: 65535},
		{in: "fd00::/8", prefix: "fd00::/8"},
		{in: "[fd00::/8]:*", prefix: "fd00::/8", anyPort: true},
		{in: "::ffff:10.0.0.0/104", prefix: "10.0.0.0/8"},
		{in: "example.com:1", name: "example.com", port: 1},
	} {
		r, err := ParseRule(tc.in)
		if err != nil {
			t.Errorf("ParseRule(%q): %v", tc.in, err)
			continue
		}
		var wantPrefix netip.Prefix
		if tc.prefix != "" {
			wantPrefix = netip.MustParsePrefix(tc.prefix)
		}
		if r.name != tc.name || r.wildcard != tc.wildcard || r.prefix != wantPrefix || r.port != tc.port || r.anyPort != tc.anyPort {
			t.Errorf("ParseRule(%q) = name %q wildcard %v prefix %v port %d any %v", tc.in, r.name, r.wildcard, r.prefix, r.port, r.anyPort)
		}
		if r.String() != tc.in {
			t.Errorf("ParseRule(%q).String() = %q", tc.in, r.String())
		}
	}
}

func TestParseRuleBad(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "empty destination"},
		{"https://example.com/x", "a URL is not a destination; give HOST[:PORT], e.g. example.com"},
		{"http://user@example.com:8080", "e.g. example.com:8080"},
		{"example.com:0", "out of range"},
		{"example.com:65536", "out of range"},
		{"example.com:99999999999", "out of range"},
		{"example.com:http", "not a number"},
		{"example.com:-1", "not a number"},
		{"example.com:+80", "not a number"},
		{"example.com:", "empty port"},
		{"[2001:db8::1]:", "empty port"},
		{":443", "empty host"},
		{"*", "bare *"},
		{"*:443", "bare *"},
		{"*.", "needs a domain"},
		{"*..", "needs a domain"},
		{"a.*.example.com", "only as the whole first label"},
		{"*example.com", "only as the whole first label"},
		{"example.*", "only as the whole first label"},
		{"**.example.com", "only as the whole first label"},
		{"10.0.0.0/33", "not a CIDR prefix"},
		{"10.0.0.0/", "not a CIDR prefix"},
		{"10.1.2.3/8", "did you mean 10.0.0.0/8"},
		{"fd00::1/8", "did you mean fd00::/8"},
		{"example.com/8", "not a CIDR prefix"},
		{"example.com/path", "not a CIDR prefix"},
		{"exa mple.com", "white space"},
		{" example.com", "white space"},
		{"example.com\n", "white space"},
		{"[2001:db8::1", "missing ]"},
		{"[2001:db8::1]x", "unexpected"},
		{"2001:db8::1]", "brackets must enclose"},
		{"[192.0.2.7]:80", "brackets are for IPv6"},
		{"[example.com]:80", "not an IP address"},
		{"fe80::1%eth0", "zone"},
		{"256.1.1.1", "not a valid IP address"},
		{"10.0.0", "not a valid IP address"},
		{"example..com", "empty label"},
		{".example.com", "empty label"},
		{"ex@mple.com", "not allowed in a name"},
		{strings.Repeat("a", 64) + ".com", "longer than 63"},
		{strings.Repeat("a.", 127) + "com", "longer than 253"},
		{"a:b:c", "not an IP address"},
	} {
		_, err := ParseRule(tc.in)
		if err == nil {
			t.Errorf("ParseRule(%q) succeeded; want an error with %q", tc.in, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseRule(%q) = %q; want it to contain %q", tc.in, err, tc.want)
		}
	}
}

func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"example.com", "*.a.b:80", "[::1]:443", "10.0.0.0/8:*", "fd00::/8", "https://x", "*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s)
		if err != nil {
			return
		}
		// Invariants: a rule is exactly one of name or address; a
		// wildcard never matches its own apex; no policy admits port 0.
		if (r.name == "") == !r.prefix.IsValid() {
			t.Fatalf("%q: name %q and prefix %v", s, r.name, r.prefix)
		}
		if r.wildcard && r.matchesName(r.name) {
			t.Fatalf("%q matches its apex", s)
		}
		host := r.name
		if r.IsAddress() {
			host = r.prefix.Addr().String()
		}
		if d := NewPolicy([]Rule{r}, &fakeResolver{}).Decide(context.Background(), host, 0); d.Allowed {
			t.Fatalf("%q allows port 0", s)
		}
		if strings.ContainsAny(r.name, " *:/[]") {
			t.Fatalf("%q: name %q", s, r.name)
		}
	})
}

func mustRules(t testing.TB, specs ...string) []Rule {
	t.Helper()
	var rs []Rule
	for _, s := range specs {
		r, err := ParseRule(s)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	return rs
}

// fakeResolver maps names to fixed addresses and counts lookups.
type fakeResolver struct {
	addrs map[string][]string
	calls int
}

func (f *fakeResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	f.calls++
	list, ok := f.addrs[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []netip.Addr
	for _, s := range list {
		out = append(out, netip.MustParseAddr(s))
	}
	return out, nil
}

func TestPolicyNames(t *testing.T) {
	res := &fakeResolver{addrs: map[string][]string{
		"example.com":      {"192.0.2.10"},
		"a.dev.test":       {"192.0.2.11"},
		"x.a.dev.test":     {"192.0.2.12"},
		"dev.test":         {"192.0.2.13"},
		"api.example.org":  {"2001:db8::10", "192.0.2.14"},
		"other.example":    {"192.0.2.15"},
		"db.example.com":   {"192.0.2.16"},
		"axdev.test":       {"192.0.2.17"},
		"bad.dev.test":     {"192.0.2.18", "127.0.0.1"},
		"upper.example":    {"192.0.2.19"},
		"any.example":      {"192.0.2.20"},
		"pinned.example":   {"192.0.2.21"},
		"gone.example.com": {},
	}}
	p := NewPolicy(mustRules(t, "example.com", "*.dev.test", "api.example.org:8443", "db.example.com:5432",
		"UPPER.example.", "any.example:*", "*.example.com", "192.0.2.21"), res)
	for _, tc := range []struct {
		host   string
		port   uint16
		ok     bool
		reason string
	}{
		{"example.com", 443, true, "allowed by example.com"},
		{"example.com", 80, true, "allowed by example.com"},
		{"EXAMPLE.com.", 80, true, ""},
		{"example.com", 8080, false, "port 8080 not allowed for example.com"},
		{"a.dev.test", 443, true, "allowed by *.dev.test"},
		{"x.a.dev.test", 80, true, ""},
		{"dev.test", 443, false, "no rule allows this host"},
		{"axdev.test", 443, false, "no rule allows this host"},
		{"api.example.org", 8443, true, ""},
		{"api.example.org", 443, false, "port 443 not allowed for api.example.org"},
		{"db.example.com", 5432, true, "allowed by db.example.com:5432"},
		{"db.example.com", 443, true, "allowed by *.example.com"},
		{"other.example", 443, false, "no rule allows this host"},
		{"upper.example", 443, true, ""},
		{"any.example", 1, true, ""},
		{"any.example", 65535, true, ""},
		{"bad.dev.test", 443, false, "resolves to loopback 127.0.0.1 (SSRF guard)"},
		{"pinned.example", 443, false, "no rule allows this host"},       // an address rule never admits a name
		{"192.0.2.10", 443, false, "IP address not covered by any rule"}, // a name rule never admits an address
		{"bad name", 443, false, "not a valid host name"},
		{"", 443, false, "not a valid host name"},
		{"example.com", 0, false, "port 0 is not a destination"},
	} {
		d := p.Decide(context.Background(), tc.host, tc.port)
		if d.Allowed != tc.ok || (tc.reason != "" && d.Reason != tc.reason) {
			t.Errorf("Decide(%q, %d) = %v %q; want %v %q", tc.host, tc.port, d.Allowed, d.Reason, tc.ok, tc.reason)
		}
		if d.Allowed && len(d.Addrs) == 0 {
			t.Errorf("Decide(%q, %d) allowed with no address", tc.host, tc.port)
		}
	}
	d := p.Decide(context.Background(), "api.example.org", 8443)
	if len(d.Addrs) != 2 || d.Addrs[0] != netip.MustParseAddr("2001:db8::10") {
		t.Errorf("addresses %v; want both, in the resolver's order", d.Addrs)
	}
	d = p.Decide(context.Background(), "nowhere.example.com", 443)
	if d.Allowed || !d.Failed || d.Reason != "cannot resolve nowhere.example.com: no such host" {
		t.Errorf("unresolvable name: %+v", d)
	}
	d = p.Decide(context.Background(), "gone.example.com", 443)
	if d.Allowed || !d.Failed {
		t.Errorf("name without addresses: %+v", d)
	}
}

// A name resolves once per decision, and names refused by rule are never
// looked up at all (no DNS traffic for a name the runner may not reach).
func TestPolicyResolvesOnce(t *testing.T) {
	res := &fakeResolver{addrs: map[string][]string{"example.com": {"192.0.2.1"}, "evil.test": {"192.0.2.2"}}}
	p := NewPolicy(mustRules(t, "example.com"), res)
	p.Decide(context.Background(), "example.com", 443)
	if res.calls != 1 {
		t.Errorf("%d lookups for one decision", res.calls)
	}
	p.Decide(context.Background(), "evil.test", 443)
	p.Decide(context.Background(), "example.com", 22)
	if res.calls != 1 {
		t.Errorf("refused names were looked up (%d lookups)", res.calls)
	}
}

func TestPolicySSRFGuard(t *testing.T) {
	for _, tc := range []struct{ addr, kind string }{
		{"127.0.0.1", "loopback"},
		{"127.8.9.10", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"10.0.0.1", "private"},
		{"172.16.5.4", "private"},
		{"192.168.1.1", "private"},
		{"fd12::1", "private"},
		{"169.254.169.254", "link-local"},
		{"fe80::1", "link-local"},
		{"0.0.0.0", "unspecified"},
		{"::", "unspecified"},
		{"224.0.0.1", "multicast"},
		{"ff02::1", "multicast"},
		{"100.64.0.1", "shared (CGNAT)"},
		{"255.255.255.255", "reserved"},
		{"64:ff9b::7f00:1", "loopback (via NAT64)"},
		{"64:ff9b::a9fe:a9fe", "link-local (via NAT64)"},
		{"64:ff9b:1::a00:1", "private (via NAT64)"},
		{"::ffff:0:7f00:1", "loopback (via IPv4-translated)"},
		{"::ffff:0:a9fe:a9fe", "link-local (via IPv4-translated)"},
		{"2002:7f00:1::", "loopback (via 6to4)"},
		{"2002:c0a8:101:1::1", "private (via 6to4)"},
		// Teredo: the client's IPv4 is the last 32 bits inverted
		// (~80ff:fffe = 127.0.0.1); the server's follows 2001:0.
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback (via Teredo client)"},
		{"2001:0:a00:1:8000:63bf:3fff:fdd2", "private (via Teredo server)"},
	} {
		shown := netip.MustParseAddr(tc.addr).Unmap().String()
		res := &fakeResolver{addrs: map[string][]string{"svc.test": {"192.0.2.1", tc.addr}}}
		p := NewPolicy(mustRules(t, "svc.test:*"), res)
		d := p.Decide(context.Background(), "svc.test", 443)
		want := "resolves to " + tc.kind + " " + shown + " (SSRF guard)"
		if d.Allowed || d.Reason != want {
			t.Errorf("%s: %v %q; want refused %q", tc.addr, d.Allowed, d.Reason, want)
		}
		// An address rule covering it lifts the guard, for its ports only.
		cidr := netip.MustParseAddr(tc.addr).Unmap().String()
		if strings.Contains(cidr, ":") {
			cidr = "[" + cidr + "]"
		}
		p = NewPolicy(mustRules(t, "svc.test:*", cidr+":443"), res)
		d = p.Decide(context.Background(), "svc.test", 443)
		if !d.Allowed || len(d.Addrs) != 2 || d.Addrs[1] != netip.MustParseAddr(shown) {
			t.Errorf("%s covered by %s: %+v; want allowed with both addresses", tc.addr, cidr, d)
		}
		d = p.Decide(context.Background(), "svc.test", 80)
		if d.Allowed {
			t.Errorf("%s covered on port 443 only, allowed on 80", tc.addr)
		}
	}
	res := &fakeResolver{addrs: map[string][]string{"svc.test": {"10.1.2.3"}, "meta.test": {"169.254.169.254"}}}
	p := NewPolicy(mustRules(t, "svc.test", "meta.test", "10.0.0.0/8:*"), res)
	if d := p.Decide(context.Background(), "svc.test", 443); !d.Allowed {
		t.Errorf("10.1.2.3 under 10.0.0.0/8:*: %q", d.Reason)
	}
	if d := p.Decide(context.Background(), "meta.test", 80); d.Allowed {
		t.Errorf("the metadata address allowed by an unrelated CIDR")
	}
	// Public addresses need no address rule.
	for _, a := range []string{"192.0.2.1", "8.8.8.8", "2001:db8::1", "2606:4700::1111", "::ffff:8.8.8.8"} {
		if k := specialKind(netip.MustParseAddr(a)); k != "" {
			t.Errorf("%s classed %q", a, k)
		}
	}
}

func TestPolicyAddresses(t *testing.T) {
	p := NewPolicy(mustRules(t, "127.0.0.0/8", "192.0.2.7:5432", "[2001:db8::/32]:*", "example.com:*"), &fakeResolver{})
	for _, tc := range []struct {
		host   string
		port   uint16
		ok     bool
		reason string
	}{
		{"127.0.0.1", 443, true, "allowed by 127.0.0.0/8"},
		{"127.0.0.1", 22, false, "port 22 not allowed for 127.0.0.1"},
		{"::ffff:127.0.0.1", 80, true, ""},
		{"[::ffff:127.0.0.1]", 80, true, ""},
		{"192.0.2.7", 5432, true, ""},
		{"192.0.2.7", 443, false, "port 443 not allowed for 192.0.2.7"},
		{"192.0.2.8", 5432, false, "IP address not covered by any rule"},
		{"2001:db8::5", 1, true, ""},
		{"2001:db9::5", 443, false, "IP address not covered by any rule"},
		{"10.0.0.1", 443, false, "IP address not covered by any rule"},
		{"fe80::1%eth0", 443, false, "an IPv6 zone is not allowed in a destination"},
	} {
		d := p.Decide(context.Background(), tc.host, tc.port)
		if d.Allowed != tc.ok || (tc.reason != "" && d.Reason != tc.reason) {
			t.Errorf("Decide(%q, %d) = %v %q; want %v %q", tc.host, tc.port, d.Allowed, d.Reason, tc.ok, tc.reason)
		}
	}
	d := p.Decide(context.Background(), "::ffff:127.0.0.1", 80)
	if len(d.Addrs) != 1 || d.Addrs[0] != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("mapped address dialled as %v; want 127.0.0.1", d.Addrs)
	}
}

func TestPolicyResolverContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := NewPolicy(mustRules(t, "example.com"), ctxResolver{})
	d := p.Decide(ctx, "example.com", 443)
	if d.Allowed || !d.Failed {
		t.Errorf("cancelled lookup: %+v", d)
	}
}

type ctxResolver struct{}

func (ctxResolver) LookupNetIP(ctx context.Context, _, _ string) ([]netip.Addr, error) {
	<-ctx.Done()
	return nil, errors.Join(ctx.Err())
}

// Public IPv6 forms of public IPv4 addresses pass the guard.
func TestPolicyCarriersPublic(t *testing.T) {
	for _, a := range []string{"64:ff9b::808:808", "::ffff:0:808:808", "2002:808:808::1",
		"2001:0:4136:e378:8000:63bf:f7f7:f7f7", "2001:db8::1"} {
		if k := specialKind(netip.MustParseAddr(a)); k != "" {
			t.Errorf("%s: %q; want public", a, k)
		}
	}
}

// The host's own interface addresses count as local, also carried in an
// IPv6 address; an address rule lifts that as it lifts the rest.
func TestPolicyHostAddresses(t *testing.T) {
	if own := interfaceAddrs(); !own[netip.MustParseAddr("127.0.0.1")] {
		t.Errorf("interfaceAddrs %v: want loopback's 127.0.0.1 at least", own)
	}
	res := &fakeResolver{addrs: map[string][]string{
		"own.test": {"203.0.113.5"}, "own6.test": {"2002:cb00:7105::1"}, "other.test": {"203.0.113.6"}}}
	p := NewPolicy(mustRules(t, "*.test:*"), res)
	p.local = map[netip.Addr]bool{netip.MustParseAddr("203.0.113.5"): true}
	for host, want := range map[string]string{
		"own.test":   "resolves to local (this host's) 203.0.113.5 (SSRF guard)",
		"own6.test":  "resolves to local (this host's, via 6to4) 2002:cb00:7105::1 (SSRF guard)",
		"other.test": "allowed by *.test:*",
	} {
		if d := p.Decide(context.Background(), host, 443); d.Reason != want {
			t.Errorf("%s: %q; want %q", host, d.Reason, want)
		}
	}
	p = NewPolicy(mustRules(t, "*.test:*", "203.0.113.5:443"), res)
	p.local = map[netip.Addr]bool{netip.MustParseAddr("203.0.113.5"): true}
	if d := p.Decide(context.Background(), "own.test", 443); !d.Allowed {
		t.Errorf("an address rule for the host's address: %q", d.Reason)
	}
}

// --deny-net: without a port every port; a match refuses where an allow
// rule admits, names, addresses a name resolves to, and IP literals alike.
func TestPolicyDeny(t *testing.T) {
	r, err := ParseDenyRule("bad.example.com")
	if err != nil || !r.allowsPort(22) || !r.allowsPort(443) {
		t.Errorf("ParseDenyRule without a port: %+v %v; want every port", r, err)
	}
	if _, err := ParseDenyRule("http://x"); err == nil || !strings.HasPrefix(err.Error(), `--deny-net "http://x"`) {
		t.Errorf("ParseDenyRule error %v; want it to name --deny-net", err)
	}
	var deny []Rule
	for _, s := range []string{"bad.example.com", "203.0.113.0/24", "198.51.100.7:22", "*.corp.example.com:8080"} {
		r, err := ParseDenyRule(s)
		if err != nil {
			t.Fatal(err)
		}
		deny = append(deny, r)
	}
	res := &fakeResolver{addrs: map[string][]string{
		"bad.example.com": {"192.0.2.1"}, "ok.example.com": {"192.0.2.2"}, "doc.example.com": {"203.0.113.9"},
		"x.corp.example.com": {"192.0.2.3"}}}
	p := NewPolicy(mustRules(t, "*.example.com:*", "198.51.100.0/24:*"), res)
	p.deny = deny
	for _, tc := range []struct {
		host string
		port uint16
		want string
	}{
		{"bad.example.com", 443, "denied by --deny-net bad.example.com"},
		{"bad.example.com", 22, "denied by --deny-net bad.example.com"},
		{"ok.example.com", 443, "allowed by *.example.com:*"},
		{"doc.example.com", 443, "resolves to 203.0.113.9, denied by --deny-net 203.0.113.0/24"},
		{"x.corp.example.com", 8080, "denied by --deny-net *.corp.example.com:8080"},
		{"x.corp.example.com", 443, "allowed by *.example.com:*"},
		{"198.51.100.7", 22, "denied by --deny-net 198.51.100.7:22"},
		{"198.51.100.7", 443, "allowed by 198.51.100.0/24:*"},
	} {
		if d := p.Decide(context.Background(), tc.host, tc.port); d.Reason != tc.want || d.Allowed != strings.HasPrefix(tc.want, "allowed") {
			t.Errorf("%s:%d: %v %q; want %q", tc.host, tc.port, d.Allowed, d.Reason, tc.want)
		}
	}
	if res.calls != 3 {
		t.Errorf("%d lookups; want 3 (a name denied by name is never resolved)", res.calls)
	}
}

// A localhost entry admits the host's loopback on its ports, by name
// (never looked up: RFC 6761) and by address, and nothing else: no other
// port, no other loopback-resolving name, no private address.
func TestPolicyLocalhost(t *testing.T) {
	res := &fakeResolver{addrs: map[string][]string{"localhost": {"10.9.9.9"}, "sneaky.test": {"127.0.0.1"}}}
	p := NewPolicy(mustRules(t, "localhost:8787", "api.localhost:9000", "sneaky.test:8787"), res)
	for _, tc := range []struct {
		host string
		port uint16
		ok   bool
	}{
		{"localhost", 8787, true},
		{"LOCALHOST.", 8787, true},
		{"localhost", 8788, false},
		{"localhost", 443, false},
		{"127.0.0.1", 8787, true},
		{"::1", 8787, true},
		{"::ffff:127.0.0.1", 8787, true},
		{"127.0.0.5", 8787, true}, // all of 127/8 is the host's loopback
		{"127.0.0.1", 8788, false},
		{"10.9.9.9", 8787, false},
		{"api.localhost", 9000, true},
		{"api.localhost", 8787, false},
		{"sneaky.test", 8787, false}, // a name of its own that resolves to loopback: the SSRF guard
	} {
		d := p.Decide(context.Background(), tc.host, tc.port)
		if d.Allowed != tc.ok {
			t.Errorf("Decide(%q, %d) = %v %q; want %v", tc.host, tc.port, d.Allowed, d.Reason, tc.ok)
		}
		if d.Allowed {
			for _, a := range d.Addrs {
				if !a.IsLoopback() {
					t.Errorf("Decide(%q, %d) admits %v, not the loopback", tc.host, tc.port, a)
				}
			}
		}
	}
	if res.calls > 1 { // sneaky.test only
		t.Errorf("%d lookups: a localhost name must never be resolved", res.calls)
	}
}
