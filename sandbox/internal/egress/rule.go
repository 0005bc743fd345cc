package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// defaultPorts are the ports a destination without one allows: plain HTTP
// and HTTPS, what a package registry or a model API is reached on.
var defaultPorts = []uint16{80, 443}

// Rule is one parsed --allow-net destination. The zero Rule allows nothing.
//
// A Rule is either a name rule (an exact DNS name, or a wildcard that
// matches the name's subdomains) or an address rule (an IP address or a CIDR
// prefix). A name rule never admits an IP literal and an address rule never
// admits a name; an address rule also lifts the SSRF guard for the addresses
// it covers.
type Rule struct {
	text     string       // as given, for messages
	name     string       // lower case, no trailing dot; the suffix for a wildcard
	wildcard bool         // name is "*.name": subdomains at any depth, never name itself
	prefix   netip.Prefix // valid for an address rule; IPv4 stays IPv4 (unmapped)
	anyPort  bool
	port     uint16 // 0: the default ports
}

// allowsPort reports whether r admits port.
func (r Rule) allowsPort(port uint16) bool {
	switch {
	case r.anyPort:
		return true
	case r.port != 0:
		return r.port == port
	}
	for _, p := range defaultPorts {
		if p == port {
			return true
		}
	}
	return false
}

// matchesName reports whether the name rule r matches name (already
// normalised: lower case, no trailing dot).
func (r Rule) matchesName(name string) bool {
	if r.prefix.IsValid() || r.name == "" {
		return false
	}
	if !r.wildcard {
		return name == r.name
	}
	return len(name) > len(r.name)+1 && strings.HasSuffix(name, r.name) &&
		name[len(name)-len(r.name)-1] == '.'
}

// loopback reports whether r is a localhost entry: the name localhost, a
// name beneath .localhost, or *.localhost. Such names are the host's
// loopback (RFC 6761 §6.3: never sent to DNS), so the entry admits the
// loopback addresses on its ports, by name and by address: a local mock
// API at --allow-net localhost:8787 needs nothing else.
func (r Rule) loopback() bool {
	return !r.prefix.IsValid() && (r.name == "localhost" || strings.HasSuffix(r.name, ".localhost") || (r.wildcard && r.name == "localhost"))
}

// loopbackAddrs are what a localhost name reaches: the host's loopback,
// v4 first (what most local servers listen on).
var loopbackAddrs = []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.IPv6Loopback()}

// covers reports whether the address rule r covers a (unmapped).
func (r Rule) covers(a netip.Addr) bool {
	return r.prefix.IsValid() && r.prefix.Contains(a.WithZone(""))
}

// ParseRule parses one destination, HOST[:PORT]:
//
//	example.com           a DNS name, ports 80 and 443
//	example.com:8443      one port
//	example.com:*         every port
//	*.example.com         subdomains at any depth (a.example.com,
//	                      x.a.example.com), never example.com itself
//	192.0.2.7, 192.0.2.7:5432
//	2001:db8::1           an IPv6 address without a port
//	[2001:db8::1]:443     an IPv6 address with a port
//	10.0.0.0/8, 10.0.0.0/8:*
//	fd00::/8              an IPv6 prefix without a port
//	[fd00::/8]:*          an IPv6 prefix with a port
//
// Names are matched case-insensitively and a trailing dot is ignored. An
// IPv6 address or prefix takes a port only inside brackets, so a bare one
// (with more than one colon) is never split at a colon. A prefix must have
// no bits set past its length (10.0.0.0/8, not 10.1.2.3/8). IPv4-mapped IPv6
// forms (::ffff:10.0.0.1) are taken as the IPv4 address they map.
//
// The error says what is wrong in a form the caller prints after "usage: ".
// A destination never contains a comma, so a comma-separated list can be
// split before parsing.
func ParseRule(s string) (Rule, error) {
	r, err := parseRule(s)
	if err != nil {
		return Rule{}, fmt.Errorf("--allow-net %q: %w", s, err)
	}
	r.text = s
	return r, nil
}

// ParseDenyRule parses one --deny-net destination: the syntax of
// ParseRule, except that a destination without a port denies every port
// (where an allowed one admits only 80 and 443).
func ParseDenyRule(s string) (Rule, error) {
	r, err := parseRule(s)
	if err != nil {
		return Rule{}, fmt.Errorf("--deny-net %q: %w", s, err)
	}
	if r.port == 0 {
		r.anyPort = true
	}
	r.text = s
	return r, nil
}

func parseRule(s string) (Rule, error) {
	if s == "" {
		return Rule{}, errors.New("empty destination; give HOST[:PORT], e.g. example.com:443")
	}
	if strings.ContainsAny(s, " \t\r\n\v\f") {
		return Rule{}, errors.New("contains white space; give one HOST[:PORT] per value")
	}
	if i := strings.Index(s, "://"); i >= 0 {
		return Rule{}, fmt.Errorf("a URL is not a destination; give HOST[:PORT], e.g. %s", urlHint(s[i+3:]))
	}
	host, port, bracketed, err := splitHostPort(s)
	if err != nil {
		return Rule{}, err
	}
	var r Rule
	switch {
	case port == "":
	case port == "*":
		r.anyPort = true
	default:
		p, err := parsePort(port)
		if err != nil {
			return Rule{}, err
		}
		r.port = p
	}
	if host == "" {
		return Rule{}, errors.New("empty host; give HOST[:PORT], e.g. example.com:443")
	}
	if strings.Contains(host, "/") {
		pfx, err := parsePrefix(host)
		if err != nil {
			return Rule{}, err
		}
		if bracketed && !pfx.Addr().Is6() && !strings.Contains(host, ":") {
			return Rule{}, errors.New("brackets are for IPv6 addresses only")
		}
		r.prefix = pfx
		return r, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return Rule{}, errors.New("an IPv6 zone (%...) is not allowed in a destination")
		}
		if bracketed && a.Is4() {
			return Rule{}, errors.New("brackets are for IPv6 addresses only")
		}
		a = a.Unmap()
		r.prefix = netip.PrefixFrom(a, a.BitLen())
		return r, nil
	}
	if bracketed || strings.Contains(host, ":") {
		return Rule{}, fmt.Errorf("%q is not an IP address", host)
	}
	if host == "*" {
		return Rule{}, errors.New("a bare * would allow every host; name the hosts, e.g. *.example.com")
	}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		if rest == "" || rest == "." {
			return Rule{}, errors.New("a wildcard needs a domain after \"*.\", e.g. *.example.com")
		}
		r.wildcard = true
		host = rest
	}
	if strings.Contains(host, "*") {
		return Rule{}, errors.New("a wildcard is allowed only as the whole first label, e.g. *.example.com")
	}
	name, err := normalizeName(host)
	if err != nil {
		return Rule{}, err
	}
	r.name = name
	return r, nil
}

// splitHostPort splits s at the port separator. Unlike net.SplitHostPort it
// allows no port, and it never splits a bare IPv6 address.
func splitHostPort(s string) (host, port string, bracketed bool, err error) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", "", false, errors.New("missing ] after an IPv6 address")
		}
		host, rest := s[1:end], s[end+1:]
		switch {
		case rest == "":
			return host, "", true, nil
		case rest[0] == ':':
			if rest[1:] == "" {
				return "", "", false, errors.New("empty port after ':'")
			}
			return host, rest[1:], true, nil
		}
		return "", "", false, fmt.Errorf("unexpected %q after ]", rest)
	}
	if strings.ContainsAny(s, "[]") {
		return "", "", false, errors.New("brackets must enclose the whole IPv6 address, e.g. [2001:db8::1]:443")
	}
	switch strings.Count(s, ":") {
	case 0:
		return s, "", false, nil
	case 1:
		host, port, _ := strings.Cut(s, ":")
		if port == "" {
			return "", "", false, errors.New("empty port after ':'")
		}
		return host, port, false, nil
	}
	// More than one colon: a bare IPv6 address or prefix, no port.
	return s, "", false, nil
}

func parsePort(s string) (uint16, error) {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("port %q is not a number from 1 to 65535 or *", s)
		}
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("port %s is out of range; give 1 to 65535 or *", s)
	}
	return uint16(n), nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR prefix like 10.0.0.0/8 or fd00::/8", s)
	}
	if m := p.Masked(); m != p {
		return netip.Prefix{}, fmt.Errorf("CIDR %s has bits set past /%d; did you mean %s?", s, p.Bits(), m)
	}
	// A prefix inside ::ffff:0:0/96 is an IPv4 prefix: the proxy compares
	// unmapped addresses, so keep rules in the same form.
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p, nil
}

// normalizeName lower-cases a DNS name, drops one trailing dot and checks
// it is a plausible host name: labels of letters, digits, '-' and '_' (seen
// in real service names), 1 to 63 bytes each, 253 in all. A name whose last
// label is all digits is refused: clients and URL parsers read such hosts as
// (odd forms of) IPv4 addresses, so it can only be a mistyped address.
func normalizeName(s string) (string, error) {
	name := strings.ToLower(strings.TrimSuffix(s, "."))
	if name == "" {
		return "", errors.New("empty host name")
	}
	if len(name) > 253 {
		return "", errors.New("host name longer than 253 bytes")
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" {
			return "", fmt.Errorf("host name %q has an empty label", s)
		}
		if len(l) > 63 {
			return "", fmt.Errorf("host name %q has a label longer than 63 bytes", s)
		}
		for _, c := range []byte(l) {
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("host name %q has a character %q not allowed in a name", s, c)
			}
		}
	}
	if last := labels[len(labels)-1]; strings.Trim(last, "0123456789") == "" {
		return "", fmt.Errorf("%q is not a valid IP address or host name", s)
	}
	return name, nil
}

// urlHint turns the rest of a URL after "scheme://" into the destination
// the user probably meant.
func urlHint(rest string) string {
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:]
	}
	if rest == "" {
		return "example.com:443"
	}
	return rest
}
