package pidinit

// The init's part of transparent egress (SPEC.md, "Clients that ignore
// the proxy variables"; docs/network.md), in a network namespace under
// --allow-net: corral's DNS responder answers on the very addresses the
// runner's resolv.conf names, and the runner's TCP connects off loopback
// reach a relay of corral's.
//
// DNS: stub resolvers take a UDP reply only from the address they asked
// (glibc's "response from wrong server", musl, c-ares), so the responder
// must answer from the nameserver's own address. The init adds each
// nameserver address the resolver read at launch names to this
// namespace's loopback (a 127/8 one or ::1 is there already) and binds a
// UDP socket and a TCP listener on port 53 of each; the host side answers
// on them (egress). Every resolver works with nothing redirected: glibc's
// connected UDP, musl's unconnected sendto, Go's own, busybox's, TCP.
// Binding a resolv.conf of corral's over the runner's instead would show
// the runner a file that is not the caller's, and miss a client that names
// the nameserver itself (dig @ADDR, a resolver library with its own
// list); the addresses cost nothing and change no file.
//
// Connects: the engine's checker (package sockcheck, relay.go) makes a TCP
// connect to an address off loopback to the relay listener made here,
// after it asked the host side (Route, a call over the stage link) to
// decide the destination, dial it and note the source it bound the
// runner's socket to. The host side accepts on the listener, finds the
// route by the connection's source and splices both ways.

import (
	"context"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/internal/inet"
	"github.com/corral-sh/corral/internal/setuperr"
	"github.com/corral-sh/corral/sandbox/internal/plan"
	"github.com/corral-sh/corral/sandbox/internal/stage"
)

// relay is the init's side of the relay: where its listeners are, and the
// route call to the host side (stage.Relay).
type relay struct {
	link *stage.Link
	said <-chan struct{} // closed once the init said ready: the host reads its reports

	mu     sync.Mutex
	v4, v6 netip.AddrPort
	local  []netip.Addr // the nameservers' addresses, added to loopback
}

// newRelay is the relay of a run whose plan names nameservers (a namespace
// mode under --allow-net, plan.Network.Nameservers); nil otherwise.
func newRelay(link *stage.Link, n plan.Network, said <-chan struct{}) *relay {
	if len(n.Nameservers) == 0 {
		return nil
	}
	return &relay{link: link, said: said}
}

func (r *relay) Addrs() (v4, v6 netip.AddrPort) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.v4, r.v6
}

func (r *relay) Local(a netip.Addr) bool {
	a = a.Unmap()
	if a.IsLoopback() || a.IsUnspecified() {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.local {
		if l == a {
			return true
		}
	}
	return false
}

// routeTimeout bounds the wait for the host side's answer: its decision
// and its dial, which has a deadline of its own (egress.DefaultDialTimeout).
const routeTimeout = 15 * time.Second

func (r *relay) Route(src, dst netip.AddrPort) (bool, syscall.Errno) {
	<-r.said
	ctx, cancel := context.WithTimeout(context.Background(), routeTimeout)
	defer cancel()
	reply, err := r.link.Call(ctx, stage.MsgRelayRoute, &stage.RelayRoute{Src: src.String(), Dst: dst.String()})
	if err != nil {
		return true, syscall.ETIMEDOUT // the host side is gone or stuck: the run is ending
	}
	routed := reply.(*stage.RelayRouted)
	return routed.Allowed, syscall.Errno(routed.Errno)
}

// egressListeners puts the nameservers' addresses on loopback and makes,
// inside, the DNS responder's sockets (a UDP socket and a TCP listener on
// port 53 of each address) and the relay's listeners, adding them to msg.
func (r *relay) egressListeners(msg *stage.NetListeners, n plan.Network) *setuperr.SetupError {
	for _, s := range n.Nameservers {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return &setuperr.SetupError{Step: "the nameserver address " + s, Err: err}
		}
		a = a.Unmap()
		if a.IsUnspecified() || a.IsMulticast() {
			continue // no address to answer from: the runner's query to it fails, as on the host
		}
		udp, tcp, step, err := nameserverSockets(a)
		if err != nil {
			if a.Is6() {
				// No IPv6 in the namespace (disabled by sysctl): the
				// resolver goes on to the next nameserver, as it would
				// on the host.
				continue
			}
			return &setuperr.SetupError{Step: step, Err: err}
		}
		msg.FDs = append(msg.FDs, udp, tcp)
		msg.Nameservers = append(msg.Nameservers, a.String())
		r.mu.Lock()
		r.local = append(r.local, a)
		r.mu.Unlock()
	}
	// The relay: a port the kernel picks on 127.0.0.1 (no port a runner's
	// own server would choose), and the same one on [::1] where IPv6 is
	// up, for IPv6 sockets.
	v4, err := inetSocket(netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), 0), unix.SOCK_STREAM)
	if err != nil {
		return &setuperr.SetupError{Step: "listen for the relay on 127.0.0.1 in the new network namespace", Err: err}
	}
	msg.FDs = append(msg.FDs, v4)
	at4, err := inet.Sockname(v4)
	if err != nil {
		return &setuperr.SetupError{Step: "the relay's address in the new network namespace", Err: err}
	}
	msg.Relay = append(msg.Relay, at4.String())
	var at6 netip.AddrPort
	for _, port := range []uint16{at4.Port(), 0} {
		v6, err := inetSocket(netip.AddrPortFrom(netip.IPv6Loopback(), port), unix.SOCK_STREAM)
		if err != nil {
			continue // no IPv6 here: IPv6 sockets reach the relay v4-mapped
		}
		if at6, err = inet.Sockname(v6); err != nil {
			unix.Close(v6)
			continue
		}
		msg.FDs = append(msg.FDs, v6)
		msg.Relay = append(msg.Relay, at6.String())
		break
	}
	r.mu.Lock()
	r.v4, r.v6 = at4, at6
	r.mu.Unlock()
	return nil
}

// nameserverSockets puts a on loopback (a 127/8 one or ::1 is there
// already) and binds a UDP socket and a TCP listener on its port 53.
func nameserverSockets(a netip.Addr) (udp, tcp int, step string, err error) {
	if !a.IsLoopback() {
		if err := addLoopbackAddr(a); err != nil {
			return -1, -1, "add the nameserver address " + a.String() + " to the new network namespace's loopback", err
		}
	}
	ap := netip.AddrPortFrom(a, 53)
	if udp, err = inetSocket(ap, unix.SOCK_DGRAM); err != nil {
		return -1, -1, "listen for DNS queries at " + ap.String() + " (UDP) in the new network namespace", err
	}
	if tcp, err = inetSocket(ap, unix.SOCK_STREAM); err != nil {
		unix.Close(udp)
		return -1, -1, "listen for DNS queries at " + ap.String() + " (TCP) in the new network namespace", err
	}
	return udp, tcp, "", nil
}

// inetSocket is a socket of typ bound at ap (IPv6 alone for an IPv6
// address), listening when it is a stream.
func inetSocket(ap netip.AddrPort, typ int) (int, error) {
	domain := unix.AF_INET6
	var sa unix.Sockaddr = &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
	if ap.Addr().Is4() {
		domain = unix.AF_INET
		sa = &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	}
	fd, err := unix.Socket(domain, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if domain == unix.AF_INET6 {
		err = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1)
	}
	if err == nil {
		err = unix.Bind(fd, sa)
	}
	if err == nil && typ == unix.SOCK_STREAM {
		err = unix.Listen(fd, unix.SOMAXCONN)
	}
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// followReplies reads the link after ready when nothing else does (no
// --publish), so that the answers to Route reach their calls.
func followReplies(link *stage.Link) {
	for {
		if _, _, err := link.Receive(stage.StepInitRequests); err != nil {
			return
		}
		// A request with no one here to answer it (a PublishDial
		// without --publish): the host side broke the protocol.
		_ = link.Close()
		return
	}
}
