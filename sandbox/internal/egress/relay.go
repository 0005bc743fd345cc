package egress

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"
)

// The relay of the namespace modes (SPEC.md, "Clients that ignore the
// proxy variables": "In namespace modes the connect reaches a relay of
// corral's through the sandbox's loopback, which dials the checked address
// from the host"). The runner's network namespace has loopback only; the
// engine's checker makes a TCP connect off loopback to a relay listener
// made inside that namespace, from a loopback source it bound the runner's
// socket to, after RelayRoute decided the destination and noted source →
// destination. RelayRoute dials the decided address from the host then
// and there, so that the runner's connect fails as it would have (refused,
// unreachable, timed out: the checker returns the errno) and a client
// with several addresses goes on to the next one (happy eyeballs, a host
// without IPv6); ServeRelay accepts, takes the route by the connection's
// source (once) and splices both ways between it and the connection
// dialled: the relay knows where a connection goes before its first byte,
// and never dials anything the checker did not ask for and the policy did
// not allow. A connection from a source with no route is closed at once.
// A route to port 53 is served by the DNS responder itself (a TCP query
// to any nameserver is answered by corral).

// Routes are kept until their connection comes, at most routeTTL and
// maxRoutes of them (a runner that connects without end cannot grow
// corral's memory or hold the host's connections): the checker connects
// right after the route is noted, so a route older than this belongs to a
// connect that never came (a caller killed meanwhile).
const (
	maxRoutes = 4096
	routeTTL  = 30 * time.Second
)

type relayRoute struct {
	dst netip.AddrPort
	up  net.Conn // dialled by RelayRoute; nil for dns
	at  *attempt // its log lines
	dns bool     // port 53: corral's DNS responder answers
	// noted is when the route was noted.
	noted time.Time
}

// drop ends a route no connection took: its dialled connection is closed
// and its end line written.
func (r relayRoute) drop(p *Proxy) {
	if r.up != nil {
		p.untrack(r.up)
		r.at.end()
	}
}

// routes are the relay's noted routes by source address.
type routes struct {
	mu sync.Mutex
	m  map[netip.AddrPort]relayRoute
}

// put notes r for src, and returns the routes it put out: one src had
// (a connect made again from the same socket), those expired, and the
// oldest when the table is full. The caller drops them.
func (t *routes) put(src netip.AddrPort, r relayRoute) []relayRoute {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[netip.AddrPort]relayRoute{}
	}
	var out []relayRoute
	if old, ok := t.m[src]; ok {
		out = append(out, old)
	}
	if len(t.m) >= 64 { // a few stale routes are no burden; a scan each time would be
		var oldest netip.AddrPort
		for k, v := range t.m {
			if r.noted.Sub(v.noted) > routeTTL {
				out = append(out, v)
				delete(t.m, k)
			} else if !oldest.IsValid() || v.noted.Before(t.m[oldest].noted) {
				oldest = k
			}
		}
		if _, ok := t.m[src]; !ok && len(t.m) >= maxRoutes {
			out = append(out, t.m[oldest])
			delete(t.m, oldest)
		}
	}
	t.m[src] = r
	return out
}

// take takes src's route, if it has one that has not expired (one that
// has is returned too, for the caller to drop).
func (t *routes) take(src netip.AddrPort, now time.Time) (relayRoute, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.m[src]
	delete(t.m, src)
	return r, ok && now.Sub(r.noted) <= routeTTL
}

// drain takes every route, at Close.
func (t *routes) drain() []relayRoute {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]relayRoute, 0, len(t.m))
	for k, r := range t.m {
		out = append(out, r)
		delete(t.m, k)
	}
	return out
}

// Nameservers are the addresses of the nameservers the resolver read at
// launch names (with its defaults, 127.0.0.1 and ::1, when it names none):
// where a namespace mode's responder answers inside.
func (p *Proxy) Nameservers() []netip.Addr {
	lr, ok := p.cfg.Resolver.(*LaunchResolver)
	if !ok {
		return nil
	}
	var out []netip.Addr
	for _, s := range lr.servers {
		a := s.Addr().Unmap()
		dup := false
		for _, o := range out {
			dup = dup || o == a
		}
		if !dup {
			out = append(out, a)
		}
	}
	return out
}

// ServeDNSOn starts the DNS responder on sockets it is handed (made inside
// the runner's network namespace, on the nameservers' addresses) and fills
// the table with the admitted names of the hosts file read at launch. It
// returns at once; the Proxy owns the sockets and Close ends them.
func (p *Proxy) ServeDNSOn(ls []net.Listener, pcs []net.PacketConn) {
	p.rememberHosts()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		for _, l := range ls {
			l.Close()
		}
		for _, pc := range pcs {
			pc.Close()
		}
		return
	}
	p.packets = append(p.packets, pcs...)
	p.wg.Add(len(pcs))
	p.mu.Unlock()
	for _, pc := range pcs {
		go p.serveDNSPackets(pc)
	}
	for _, l := range ls {
		p.start(l, func(c net.Conn) { p.admit(c, stageHandshake, p.serveDNSConn) })
	}
}

// RelayRoute decides a TCP connect the runner made to dst, which the
// engine's checker will make to the relay from src: allowed as a direct
// connect would be (DirectConnect: an IP or CIDR entry, or an address
// corral's DNS answered for an admitted name, on a port its entry
// admits), or any connect to port 53 (answered by corral). An allowed one
// is dialled now, within DialTimeout, with its decision line (naming the
// failure when the dial fails), and noted for ServeRelay. It reports
// whether the policy allows the connect and, when it does, the dial's
// errno (0: connected); a refusal is the caller's to name (Direct).
func (p *Proxy) RelayRoute(src, dst netip.AddrPort) (bool, syscall.Errno) {
	src = netip.AddrPortFrom(src.Addr().Unmap(), src.Port())
	dst = netip.AddrPortFrom(dst.Addr().Unmap().WithZone(""), dst.Port())
	r := relayRoute{dst: dst, noted: time.Now()}
	if dst.Port() == 53 {
		r.dns = true
	} else {
		host, reason, ok := p.decideDirect(dst)
		if !ok {
			return false, 0
		}
		at := p.newAttempt(host, dst.Port())
		at.via = ViaDirect
		up, addr, err := p.dial([]netip.Addr{dst.Addr()}, dst.Port())
		at.address = addr.String()
		if err != nil {
			at.allow(dialErrorReason(err))
			at.end()
			return true, dialErrno(err)
		}
		at.allow(reason)
		r.up, r.at, r.noted = up, at, time.Now()
	}
	for _, old := range p.relayRoutes.put(src, r) {
		old.drop(p)
	}
	if p.isClosed() { // Close drained the table before this route came
		for _, r := range p.relayRoutes.drain() {
			r.drop(p)
		}
		return true, syscall.ECONNREFUSED
	}
	return true, 0
}

// dialErrno is the errno a dial failed with, as the runner's own connect
// would have: ETIMEDOUT for the dial's deadline, ECONNREFUSED when no
// errno says more.
func dialErrno(err error) syscall.Errno {
	var e syscall.Errno
	var ne net.Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.As(err, &ne) && ne.Timeout():
		return syscall.ETIMEDOUT
	}
	return syscall.ECONNREFUSED
}

// ServeRelay accepts on l, a relay listener made inside the runner's
// network namespace, and relays each connection along its route. It
// returns at once; the Proxy owns l.
func (p *Proxy) ServeRelay(l net.Listener) {
	p.start(l, func(c net.Conn) { p.admit(c, stageActive, p.serveRelay) })
}

func (p *Proxy) serveRelay(c net.Conn) {
	src, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return
	}
	r, ok := p.relayRoutes.take(netip.AddrPortFrom(src.Addr().Unmap(), src.Port()), time.Now())
	if !ok {
		r.drop(p) // expired, or none (a zero route drops nothing)
		resetClose(c)
		return // no connect of the checker's: nothing to relay
	}
	if r.dns {
		p.serveDNSConn(c)
		return
	}
	defer r.drop(p) // closes the dialled side, writes the end line
	r.at.up, r.at.down = p.join(c, r.up, nil, true)
}

// resetClose closes c with a reset (SO_LINGER 0), not a clean end: the
// client sees its connection fail, not an empty answer.
func resetClose(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}
