package egress

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// corral's DNS responder: the runner's lookups are answered from the resolver
// fixed at launch, under the policy. A name an --allow-net entry admits
// (on any port) gets its addresses, less those the SSRF guard or a
// --deny-net entry for every port refuses; every other name is NXDOMAIN,
// named once on stderr and in the log (via dns). Each address answered is
// remembered with the names it was answered for (answers), so that a
// direct connect to it is decided as the proxy would decide the name
// (DirectConnect, RelayRoute). In subreaper mode, where the runner shares
// the host's network, the engine's checker brings the runner's queries
// here: a TCP connect to port 53 and a UDP socket's connect to port 53 are
// made to these listeners instead (ServeDNS). In a namespace mode it
// answers on sockets made inside the runner's network namespace, on the
// nameservers' own addresses (ServeDNSOn, relay.go).

// The table's bounds (DESIGN.md, "Memory a runner can make corral hold"):
// a runner that looks up names without end fills it, after which new
// answers are still given but not remembered (a connect to such an
// address is refused, as past the proxy).
const (
	maxAnswered      = 4096    // addresses
	maxNamesPerAddr  = 8       // names remembered for one address
	maxAnsweredBytes = 1 << 20 // the names' bytes, all together
)

// answers is the per-run table address → the admitted names answered with
// it.
type answers struct {
	mu    sync.Mutex
	names map[netip.Addr][]string
	bytes int
}

func (t *answers) add(a netip.Addr, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.names == nil {
		t.names = map[netip.Addr][]string{}
	}
	have, ok := t.names[a]
	for _, n := range have {
		if n == name {
			return
		}
	}
	if (!ok && len(t.names) >= maxAnswered) || len(have) >= maxNamesPerAddr || t.bytes+len(name) > maxAnsweredBytes {
		return
	}
	t.names[a] = append(have, name)
	t.bytes += len(name)
}

func (t *answers) lookup(a netip.Addr) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.names[a]...)
}

// DNSAddrs are where ServeDNS listens, on the host's loopback.
type DNSAddrs struct {
	TCP, UDP netip.AddrPort
}

// ServeDNS starts the responder on the host's loopback and fills the
// table with the admitted names of the hosts file read at launch (a
// client that reads that file itself asks no one). It returns at once;
// Close ends it.
func (p *Proxy) ServeDNS() (DNSAddrs, error) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return DNSAddrs{}, err
	}
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		l.Close()
		return DNSAddrs{}, err
	}
	p.rememberHosts()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.Close()
		pc.Close()
		return DNSAddrs{}, net.ErrClosed
	}
	p.packets = append(p.packets, pc)
	p.wg.Add(1)
	p.mu.Unlock()
	go p.serveDNSPackets(pc)
	p.start(l, func(c net.Conn) { p.admit(c, stageHandshake, p.serveDNSConn) })
	return DNSAddrs{TCP: l.Addr().(*net.TCPAddr).AddrPort(), UDP: pc.LocalAddr().(*net.UDPAddr).AddrPort()}, nil
}

// rememberHosts fills the table with the admitted names of the hosts
// file read at launch: a client that reads that file itself asks no one.
func (p *Proxy) rememberHosts() {
	lr, ok := p.cfg.Resolver.(*LaunchResolver)
	if !ok {
		return
	}
	for name, addrs := range lr.hosts {
		if !p.policy.nameAdmitted(name) {
			continue
		}
		for _, a := range addrs {
			if p.policy.answerable(a) {
				p.answered.add(a.Unmap(), name)
			}
		}
	}
}

func (p *Proxy) serveDNSPackets(pc net.PacketConn) {
	defer p.wg.Done()
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if p.isClosed() || errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if out := p.answerDNS(buf[:n], dnsUDPMax); out != nil {
			pc.WriteTo(out, from)
		}
	}
}

// serveDNSConn answers the queries of one TCP connection (RFC 7766: each
// message after its two-byte length), until the client closes it or is
// silent for HandshakeTimeout.
func (p *Proxy) serveDNSConn(c net.Conn) {
	defer c.Close()
	var lenBuf [2]byte
	for {
		c.SetDeadline(time.Now().Add(p.cfg.HandshakeTimeout))
		if _, err := io.ReadFull(c, lenBuf[:]); err != nil {
			return
		}
		msg := make([]byte, binary.BigEndian.Uint16(lenBuf[:]))
		if _, err := io.ReadFull(c, msg); err != nil {
			return
		}
		out := p.answerDNS(msg, 0xffff)
		if out == nil {
			return
		}
		if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(out))), out...)); err != nil {
			return
		}
	}
}

// answerDNS answers one query (nil: none is owed).
func (p *Proxy) answerDNS(msg []byte, max int) []byte {
	q, headerOK, err := parseDNSQuery(msg)
	if err != nil {
		if !headerOK {
			return nil
		}
		q.question = nil
		return dnsAnswer(q, rcodeFormErr, nil, max)
	}
	if q.flags&0x7800 != 0 { // an opcode other than QUERY
		return dnsAnswer(q, rcodeNotImp, nil, max)
	}
	name, err := normalizeName(q.name)
	if err != nil || q.qclass != dnsClassIN {
		return dnsAnswer(q, rcodeNXDomain, nil, max)
	}
	if !p.policy.nameAdmitted(name) {
		if !p.searchExpansion(name) {
			p.deniedLookup(name)
		}
		return dnsAnswer(q, rcodeNXDomain, nil, max)
	}
	if q.qtype != dnsTypeA && q.qtype != dnsTypeAAAA {
		// HTTPS and SVCB (which clients ask beside A and AAAA), MX,
		// TXT: an empty answer, so the client goes on with the addresses.
		return dnsAnswer(q, rcodeOK, nil, max)
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.DialTimeout)
	defer cancel()
	addrs, err := p.policy.resolveAdmitted(ctx, name)
	if err != nil {
		var de *net.DNSError
		if errors.As(err, &de) && de.IsNotFound {
			return dnsAnswer(q, rcodeNXDomain, nil, max)
		}
		return dnsAnswer(q, rcodeServFail, nil, max)
	}
	var shown []string
	for _, a := range addrs {
		if (q.qtype == dnsTypeA) == a.Is4() {
			p.answered.add(a, name)
			shown = append(shown, a.String())
		}
	}
	if q.qtype == dnsTypeA || len(shown) > 0 {
		// One line per lookup (its A query; an AAAA one only when it
		// has addresses), not one per record type asked; at most
		// refusalsPerSecond a second, with a count of those left out:
		// anyone on the host can ask the responder, and the log must
		// not become the way to fill a disk.
		if ok, leftOut := p.dnsLines.take(time.Now()); ok {
			p.cfg.Log.decision(&DecisionLine{Host: name, Address: strings.Join(shown, ","),
				Decision: "allow", Reason: "answered by corral", Via: ViaDNS, LeftOut: leftOut}, p.cfg.Stderr)
		}
	}
	return dnsAnswer(q, rcodeOK, addrs, max)
}

// searchExpansion reports whether name is an admitted name with a suffix
// of the search list after it: what a resolver asks first for a name with
// fewer dots than ndots, before the name itself. Refused quietly: the
// lookup goes on and succeeds.
func (p *Proxy) searchExpansion(name string) bool {
	lr, ok := p.cfg.Resolver.(*LaunchResolver)
	if !ok {
		return false
	}
	for _, s := range lr.search {
		s = strings.ToLower(s)
		if base, ok := strings.CutSuffix(name, "."+s); ok && base != "" && p.policy.nameAdmitted(base) {
			return true
		}
	}
	return false
}

// deniedLookup names a refused lookup once, on stderr and in the log.
func (p *Proxy) deniedLookup(name string) {
	if !p.firstDenial("lookup " + name) {
		return
	}
	const reason = "no rule allows this host"
	p.cfg.Log.decision(&DecisionLine{Host: name, Decision: "deny", Reason: reason, Via: ViaDNS}, p.cfg.Stderr)
	p.warnf("corral: network: denied lookup of %s: %s\n", name, reason)
}

// nameAdmitted reports whether an entry admits name on some port and no
// --deny-net entry refuses it on every port.
func (p *Policy) nameAdmitted(name string) bool {
	for i := range p.deny {
		if r := &p.deny[i]; r.matchesName(name) && r.anyPort {
			return false
		}
	}
	for i := range p.rules {
		if p.rules[i].matchesName(name) {
			return true
		}
	}
	return false
}

// answerable reports whether a may be given out for an admitted name: the
// SSRF guard lets it through (or an address entry covers it, on some
// port), and no --deny-net entry covers it on every port.
func (p *Policy) answerable(a netip.Addr) bool {
	a = a.Unmap()
	for i := range p.deny {
		if r := &p.deny[i]; r.covers(a) && r.anyPort {
			return false
		}
	}
	if p.kind(a) == "" {
		return true
	}
	for i := range p.rules {
		if p.rules[i].covers(a) {
			return true
		}
	}
	return false
}

// resolveAdmitted resolves an admitted name with the launch resolver (a
// localhost name is the loopback, never asked), less the addresses not
// answerable.
func (p *Policy) resolveAdmitted(ctx context.Context, name string) ([]netip.Addr, error) {
	for i := range p.rules {
		if r := &p.rules[i]; r.matchesName(name) && r.loopback() {
			return append([]netip.Addr(nil), loopbackAddrs...), nil
		}
	}
	addrs, err := p.resolver.LookupNetIP(ctx, "ip", name)
	if err != nil {
		return nil, err
	}
	out := addrs[:0:0]
	for _, a := range addrs {
		if p.answerable(a) {
			out = append(out, a.Unmap())
		}
	}
	return out, nil
}

// decideAnswered decides a connect to a, on port, as the proxy would
// decide one of the names a was answered for: the first of them whose
// entry admits port, with no --deny-net entry against the name or the
// address on it, and the guard's word on the address for that port.
func (p *Policy) decideAnswered(names []string, a netip.Addr, port uint16) (string, Decision, bool) {
	if r := p.denyCovering(a, port); r != nil {
		return "", Decision{}, false
	}
	if kind := p.kind(a); kind != "" && !p.addrRuleAllows(a, port) {
		return "", Decision{}, false
	}
names:
	for _, name := range names {
		for i := range p.deny {
			if r := &p.deny[i]; r.matchesName(name) && r.allowsPort(port) {
				continue names
			}
		}
		for i := range p.rules {
			if r := &p.rules[i]; r.matchesName(name) && r.allowsPort(port) {
				return name, Decision{Allowed: true, Addrs: []netip.Addr{a}, Reason: "allowed by " + r.text}, true
			}
		}
	}
	return "", Decision{}, false
}
