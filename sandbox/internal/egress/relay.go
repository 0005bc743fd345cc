package egress

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// The relay of the namespace modes (SPEC.md, "Clients that ignore the
// proxy variables": "In namespace modes the connect reaches a relay of
// corral's through the sandbox's loopback, which dials the checked address
// from the host"). The runner's network namespace has loopback only; the
// engine's checker makes a TCP connect off loopback to a relay listener
// made inside that namespace, from a loopback source it bound the runner's
// socket to, after RelayRoute decided the destination and noted source →
// destination. ServeRelay accepts, takes the route by the connection's
// source (once), dials the decided address from the host and splices both
// ways: the relay knows where a connection goes before its first byte,
// and never dials anything the checker did not ask for and the policy did
// not allow. A connection from a source with no route is closed at once.
// A route to port 53 is served by the DNS responder itself (a TCP query
// to any nameserver is answered by corral).

// Routes are kept until their connection comes, at most routeTTL and
// maxRoutes of them (a runner that connects without end cannot grow
// corral's memory): the checker connects right after the route is noted,
// so a route older than this belongs to a connect that failed.
const (
	maxRoutes = 4096
	routeTTL  = 30 * time.Second
)

type relayRoute struct {
	dst    netip.AddrPort
	host   string // for the log: the admitted name, or the address
	reason string
	dns    bool // port 53: corral's DNS responder answers
	at     time.Time
}

// routes are the relay's noted routes by source address.
type routes struct {
	mu sync.Mutex
	m  map[netip.AddrPort]relayRoute
}

func (t *routes) put(src netip.AddrPort, r relayRoute) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[netip.AddrPort]relayRoute{}
	}
	if _, ok := t.m[src]; !ok && len(t.m) >= maxRoutes {
		var oldest netip.AddrPort
		for k, v := range t.m {
			if r.at.Sub(v.at) > routeTTL {
				delete(t.m, k)
			} else if !oldest.IsValid() || v.at.Before(t.m[oldest].at) {
				oldest = k
			}
		}
		if len(t.m) >= maxRoutes {
			delete(t.m, oldest)
		}
	}
	t.m[src] = r
}

func (t *routes) take(src netip.AddrPort, now time.Time) (relayRoute, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.m[src]
	delete(t.m, src)
	if ok && now.Sub(r.at) > routeTTL {
		return relayRoute{}, false
	}
	return r, ok
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
// is noted for ServeRelay, which writes its log lines; a refusal is the
// caller's to name (Direct).
func (p *Proxy) RelayRoute(src, dst netip.AddrPort) bool {
	src = netip.AddrPortFrom(src.Addr().Unmap(), src.Port())
	dst = netip.AddrPortFrom(dst.Addr().Unmap().WithZone(""), dst.Port())
	r := relayRoute{dst: dst, at: time.Now()}
	if dst.Port() == 53 {
		r.dns = true
	} else {
		host, reason, ok := p.decideDirect(dst)
		if !ok {
			return false
		}
		r.host, r.reason = host, reason
	}
	p.relayRoutes.put(src, r)
	return true
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
		resetClose(c)
		return // no connect of the checker's: nothing to relay
	}
	if r.dns {
		p.serveDNSConn(c)
		return
	}
	at := p.newAttempt(r.host, r.dst.Port())
	at.via = ViaDirect
	up, addr, err := p.dial([]netip.Addr{r.dst.Addr()}, r.dst.Port())
	at.address = addr.String()
	if err != nil {
		at.allow(dialErrorReason(err))
		at.end()
		// The runner's connect already succeeded (to the relay): a reset
		// is the closest to the refusal or silence it would have met.
		resetClose(c)
		return
	}
	defer p.untrack(up)
	at.allow(r.reason)
	defer at.end()
	at.up, at.down = p.join(c, up, nil)
}

// resetClose closes c with a reset (SO_LINGER 0), not a clean end: the
// client sees its connection fail, not an empty answer.
func resetClose(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}
