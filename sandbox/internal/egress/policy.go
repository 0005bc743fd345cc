package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
)

// Resolver looks up the addresses of a name. *net.Resolver satisfies it;
// tests give a fixed table.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Policy decides which destinations a connection may reach. It is immutable
// and safe for concurrent use.
type Policy struct {
	rules    []Rule
	deny     []Rule              // --deny-net: refuse even where rules allow
	local    map[netip.Addr]bool // the host's own interface addresses
	resolver Resolver
}

// NewPolicy returns a Policy over rules that resolves names with res (nil:
// the host's resolver, net.DefaultResolver). NewProxy adds its deny rules
// and the host's interface addresses.
func NewPolicy(rules []Rule, res Resolver) *Policy {
	if res == nil {
		res = net.DefaultResolver
	}
	return &Policy{rules: append([]Rule(nil), rules...), resolver: res}
}

// Decision is the outcome of Policy.Decide.
type Decision struct {
	// Allowed: the connection may be made, to one of Addrs.
	Allowed bool
	// Addrs are the checked addresses, in the resolver's order; the
	// connection must go to one of these and nowhere else. Empty when
	// refused before resolving.
	Addrs []netip.Addr
	// Reason is short and human: why refused, or which rule allowed.
	Reason string
	// Failed is set when the policy admits the name but it could not be
	// resolved: not a refusal, a failure (Allowed is false too).
	Failed bool
}

// Decide checks host (a DNS name or an IP literal, as a client sent it) and
// port against the rules. A name is resolved once, here; every address it
// resolves to is checked and returned, so the caller dials exactly what was
// checked and never resolves again (DNS rebinding).
func (p *Policy) Decide(ctx context.Context, host string, port uint16) Decision {
	if port == 0 {
		return Decision{Reason: "port 0 is not a destination"}
	}
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")); err == nil {
		return p.decideAddr(a, port)
	}
	name, err := normalizeName(host)
	if err != nil {
		return Decision{Reason: "not a valid host name"}
	}
	for i := range p.deny {
		if r := &p.deny[i]; r.matchesName(name) && r.allowsPort(port) {
			return Decision{Reason: "denied by --deny-net " + r.text}
		}
	}
	var rule *Rule
	portRefused := false
	for i := range p.rules {
		r := &p.rules[i]
		if !r.matchesName(name) {
			continue
		}
		if r.allowsPort(port) {
			rule = r
			break
		}
		portRefused = true
	}
	if rule == nil {
		if portRefused {
			return Decision{Reason: fmt.Sprintf("port %d not allowed for %s", port, name)}
		}
		return Decision{Reason: "no rule allows this host"}
	}
	if rule.loopback() {
		// Never resolved: a localhost name is the loopback (RFC 6761),
		// whatever a hosts file or a nameserver would say.
		return Decision{Allowed: true, Addrs: slices.Clone(loopbackAddrs), Reason: "allowed by " + rule.text + " (the host's loopback)"}
	}
	addrs, err := p.resolver.LookupNetIP(ctx, "ip", name)
	if err != nil {
		return Decision{Failed: true, Reason: "cannot resolve " + name + ": " + resolveError(err)}
	}
	if len(addrs) == 0 {
		return Decision{Failed: true, Reason: "cannot resolve " + name + ": no address"}
	}
	checked := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		a = a.Unmap()
		if r := p.denyCovering(a, port); r != nil {
			return Decision{Reason: fmt.Sprintf("resolves to %s, denied by --deny-net %s", a, r.text)}
		}
		if kind := p.kind(a); kind != "" && !p.addrRuleAllows(a, port) {
			return Decision{Reason: fmt.Sprintf("resolves to %s %s (SSRF guard)", kind, a)}
		}
		checked = append(checked, a)
	}
	return Decision{Allowed: true, Addrs: checked, Reason: "allowed by " + rule.text}
}

func (p *Policy) decideAddr(a netip.Addr, port uint16) Decision {
	if a.Zone() != "" {
		return Decision{Reason: "an IPv6 zone is not allowed in a destination"}
	}
	a = a.Unmap()
	if r := p.denyCovering(a, port); r != nil {
		return Decision{Reason: "denied by --deny-net " + r.text}
	}
	covered := false
	for i := range p.rules {
		r := &p.rules[i]
		if !r.covers(a) {
			continue
		}
		if r.allowsPort(port) {
			return Decision{Allowed: true, Addrs: []netip.Addr{a}, Reason: "allowed by " + r.text}
		}
		covered = true
	}
	if a.IsLoopback() {
		// A localhost entry admits the loopback by address too: clients
		// turn localhost into 127.0.0.1 or ::1 before they ask.
		for i := range p.rules {
			if r := &p.rules[i]; r.loopback() && r.allowsPort(port) {
				return Decision{Allowed: true, Addrs: []netip.Addr{a}, Reason: "allowed by " + r.text + " (the host's loopback)"}
			}
		}
	}
	if covered {
		return Decision{Reason: fmt.Sprintf("port %d not allowed for %s", port, a)}
	}
	return Decision{Reason: "IP address not covered by any rule"}
}

// denyCovering returns the deny rule that covers a and port, or nil.
func (p *Policy) denyCovering(a netip.Addr, port uint16) *Rule {
	for i := range p.deny {
		if r := &p.deny[i]; r.covers(a) && r.allowsPort(port) {
			return r
		}
	}
	return nil
}

func (p *Policy) addrRuleAllows(a netip.Addr, port uint16) bool {
	for i := range p.rules {
		if p.rules[i].covers(a) && p.rules[i].allowsPort(port) {
			return true
		}
	}
	return false
}

func resolveError(err error) string {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		if dnsErr.IsNotFound {
			return "no such host"
		}
		if dnsErr.IsTimeout {
			return "timed out"
		}
		return dnsErr.Err
	}
	return err.Error()
}

// special lists the addresses that are not the public internet, with the
// word a refusal uses. Order matters only for overlaps (none today).
// It is parsed on first use, not at package initialisation: corral links
// this package into every launch, and most runs have no proxy.
var special = sync.OnceValue(func() []specialRange {
	return []specialRange{
		{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"}, // "this network": Linux connects 0.0.0.0 to loopback
		{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
		{netip.MustParsePrefix("10.0.0.0/8"), "private"},
		{netip.MustParsePrefix("172.16.0.0/12"), "private"},
		{netip.MustParsePrefix("192.168.0.0/16"), "private"},
		{netip.MustParsePrefix("100.64.0.0/10"), "shared (CGNAT)"},
		{netip.MustParsePrefix("169.254.0.0/16"), "link-local"}, // the cloud metadata address 169.254.169.254
		{netip.MustParsePrefix("192.0.0.0/24"), "reserved"},     // IETF protocol assignments, some metadata services
		{netip.MustParsePrefix("198.18.0.0/15"), "reserved"},    // benchmarking, used for internal networks
		{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
		{netip.MustParsePrefix("240.0.0.0/4"), "reserved"}, // with the broadcast address
		{netip.MustParsePrefix("::/128"), "unspecified"},
		{netip.MustParsePrefix("::1/128"), "loopback"},
		{netip.MustParsePrefix("::/96"), "reserved"}, // IPv4-compatible, deprecated
		{netip.MustParsePrefix("fc00::/7"), "private"},
		{netip.MustParsePrefix("fec0::/10"), "private"}, // site-local, deprecated
		{netip.MustParsePrefix("fe80::/10"), "link-local"},
		{netip.MustParsePrefix("ff00::/8"), "multicast"},
		{netip.MustParsePrefix("100::/64"), "reserved"}, // discard-only
	}
})

type specialRange struct {
	prefix netip.Prefix
	kind   string
}

// kind is specialKind, with the host's own interface addresses (and any
// address carrying one) counted as local: a public address of this host
// reaches its services listening on the any-address.
func (p *Policy) kind(a netip.Addr) string {
	if k := specialKind(a); k != "" {
		return k
	}
	a = a.Unmap().WithZone("")
	if p.local[a] {
		return "local (this host's)"
	}
	for _, e := range embeddedIPv4(a) {
		if p.local[e.addr] {
			return "local (this host's, via " + e.via + ")"
		}
	}
	return ""
}

// interfaceAddrs reads the host's interface addresses, once, when the
// Proxy is made. An error leaves the set empty: every private, loopback
// and link-local address is refused anyway.
func interfaceAddrs() map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return out
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out[ip.Unmap()] = true
			}
		}
	}
	return out
}

// embedded is an IPv4 address an IPv6 one carries, and how.
type embedded struct {
	addr netip.Addr
	via  string
}

// carriers are the IPv6 prefixes that carry an IPv4 address, parsed on
// first use like special.
var carriers = sync.OnceValue(func() (c struct{ translated, nat64, nat64Local, sixToFour, teredo netip.Prefix }) {
	c.translated = netip.MustParsePrefix("::ffff:0:0:0/96")
	c.nat64 = netip.MustParsePrefix("64:ff9b::/96")
	c.nat64Local = netip.MustParsePrefix("64:ff9b:1::/48")
	c.sixToFour = netip.MustParsePrefix("2002::/16")
	c.teredo = netip.MustParsePrefix("2001::/32")
	return c
})

// embeddedIPv4 returns the IPv4 addresses an IPv6 address carries, which a
// gateway or tunnel would connect to: 64:ff9b::7f00:1 reaches 127.0.0.1
// through NAT64. IPv4-mapped addresses are unmapped before this. In the
// local-use NAT64 block 64:ff9b:1::/48 the operator picks the prefix
// length; only the /96 form (the IPv4 address last) is read, as the other
// RFC 6052 positions would read zero bytes of most addresses as 0.0.0.0
// and refuse every one.
func embeddedIPv4(a netip.Addr) []embedded {
	if !a.Is6() {
		return nil
	}
	b, pfx := a.As16(), carriers()
	at := func(i, j, k, l int) netip.Addr { return netip.AddrFrom4([4]byte{b[i], b[j], b[k], b[l]}) }
	switch {
	case pfx.translated.Contains(a):
		return []embedded{{at(12, 13, 14, 15), "IPv4-translated"}}
	case pfx.nat64.Contains(a):
		return []embedded{{at(12, 13, 14, 15), "NAT64"}}
	case pfx.nat64Local.Contains(a):
		return []embedded{{at(12, 13, 14, 15), "NAT64"}}
	case pfx.sixToFour.Contains(a):
		return []embedded{{at(2, 3, 4, 5), "6to4"}}
	case pfx.teredo.Contains(a):
		client := netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
		return []embedded{{client, "Teredo client"}, {at(4, 5, 6, 7), "Teredo server"}}
	}
	return nil
}

// specialKind names the kind of a non-public address, or returns "" for a
// public one. An IPv6 address carrying an IPv4 one is judged by it too.
func specialKind(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	for _, s := range special() {
		if s.prefix.Contains(a) {
			return s.kind
		}
	}
	for _, e := range embeddedIPv4(a) {
		if k := specialKind(e.addr); k != "" {
			return k + " (via " + e.via + ")"
		}
	}
	return ""
}
