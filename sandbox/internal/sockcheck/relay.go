package sockcheck

import (
	"math/rand/v2"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/internal/inet"
	"github.com/corral-sh/corral/internal/seccomp"
)

// A namespace mode's TCP connects off the sandbox's loopback, under
// --allow-net (SPEC.md, "Clients that ignore the proxy variables": in
// namespace modes the connect reaches a relay of corral's). The runner's
// network namespace has loopback only, so the checker makes such a
// connect to the relay's listener inside instead, from a loopback source
// address it bound the runner's socket to, after the host side decided
// the destination, dialled it and noted source → destination
// (Relay.Route): the relay knows where a connection goes before its first
// byte, dials only the destination decided on the address the checker
// copied, and a destination that refuses or cannot be reached fails the
// runner's connect as it would have (so a client tries its next address,
// IPv4 after an IPv6 one on a host without IPv6). A
// runner thread that rewrites the sockaddr after the copy changes
// nothing; one that connects its own socket to the relay gets a
// connection only where a route was noted for its source, to a
// destination the policy allowed.

// Relay is where the checker sends a TCP connect that leaves the
// sandbox's loopback (Policy.Relay); stage.Relay has the same methods.
type Relay interface {
	// Addrs are the relay's listening addresses inside (IPv4, IPv6); an
	// invalid one: none of that family.
	Addrs() (v4, v6 netip.AddrPort)
	// Local reports whether a is reached inside the namespace itself.
	Local(a netip.Addr) bool
	// Route decides a connect to dst that the checker will make to the
	// relay from src and, when it is allowed, has dst dialled and the
	// route noted for the relay: it reports whether the policy allows it
	// and the dial's errno (0: connected), the runner's connect's result.
	Route(src, dst netip.AddrPort) (bool, unix.Errno)
}

// relay makes cl, a connect to dest (unmapped) on a socket of domain, to
// the relay, when it is one the relay takes; ok false: it is not, and the
// caller makes it as it is.
func (c *Checker) relay(cl *call, domain int, dest netip.AddrPort) (val int64, e unix.Errno, ok bool) {
	r := c.pol.Relay
	if r == nil || cl.kind != seccomp.CallConnect || r.Local(dest.Addr()) {
		return 0, 0, false
	}
	if typ, err := unix.GetsockoptInt(cl.fd, unix.SOL_SOCKET, unix.SO_TYPE); err != nil || typ != unix.SOCK_STREAM {
		return 0, 0, false
	}
	v4, v6 := r.Addrs()
	to := v4
	src := loopbackSource()
	if domain == unix.AF_INET6 {
		only, _ := unix.GetsockoptInt(cl.fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY)
		switch {
		case v6.IsValid():
			to, src = v6, netip.IPv6Loopback()
		case only == 0 && v4.IsValid():
			to = netip.AddrPortFrom(netip.AddrFrom16(v4.Addr().As16()), v4.Port())
			src = netip.AddrFrom16(src.As16())
		default:
			to = netip.AddrPort{}
		}
	}
	if !to.IsValid() {
		return 0, unix.ENETUNREACH, true
	}
	if _, err := unix.Getpeername(cl.fd); err == nil {
		// Connected already (to the relay): a connect made again, as
		// after a signal. No second route and dial: the kernel's answer
		// on the relay's address (EISCONN; a blocking connect's restart
		// gets the result its first try had, blocking's).
		val, e = c.perform(cl, inetSockaddr(domain, to, 0, 0))
		return val, e, true
	}
	// The source the relay will see: the socket's own when it is bound
	// (a client that chose its port), else a port the kernel picks now on
	// a loopback address (loopbackSource).
	from, err := inet.Sockname(cl.fd)
	if err == nil && from.Port() == 0 {
		if e := bindSource(cl.fd, domain, src); e != 0 {
			return 0, e, true
		}
		from, err = inet.Sockname(cl.fd)
	}
	if err != nil {
		return 0, unix.EACCES, true
	}
	if from.Addr().Unmap().IsUnspecified() {
		// Bound to the any-address by the runner: the kernel picks the
		// relay's own address family's loopback as the source.
		lo := netip.AddrFrom4([4]byte{127, 0, 0, 1})
		if to.Addr().Is6() && !to.Addr().Is4In6() {
			lo = netip.IPv6Loopback()
		}
		from = netip.AddrPortFrom(lo, from.Port())
	}
	allowed, dialed := r.Route(unmapped(from), dest)
	if !allowed {
		c.report(Refusal{Tid: cl.tid, Call: "connect", Kind: "tcp", Addr: dest, Direct: true,
			Reason: "a direct connection no --allow-net entry admits"})
		return 0, unix.EACCES, true
	}
	if dialed != 0 {
		// Refused, unreachable, timed out: as the runner's own connect
		// would have been, so that a client goes on to its next address.
		return 0, dialed, true
	}
	val, e = c.perform(cl, inetSockaddr(domain, to, 0, 0))
	return val, e, true
}

// loopbackSource is a source address for a connect to the relay: one of
// 127/8 at random, not 127.0.0.1 alone. Every relayed connection goes to
// the one relay address, and a source port stays taken for TIME_WAIT's
// minute after its connection closes (bind picks none that is), so 127.0.0.1
// alone would bound the relay to some 28,000 connections a minute (the
// ephemeral range); each further address brings a range of its own.
func loopbackSource() netip.Addr {
	return netip.AddrFrom4([4]byte{127, byte(1 + rand.IntN(254)), byte(1 + rand.IntN(254)), byte(1 + rand.IntN(254))})
}

// datagramConnect reports whether cl is a connect of a datagram socket:
// it sends nothing, and a namespace mode's failure of one is not named.
// Go's resolver connects a UDP socket to each address it sorts (RFC 6724,
// to learn the source the kernel would pick): named, every Go program
// that dials a name would have its addresses called refused.
func datagramConnect(cl *call) bool {
	if cl.kind != seccomp.CallConnect {
		return false
	}
	typ, err := unix.GetsockoptInt(cl.fd, unix.SOL_SOCKET, unix.SO_TYPE)
	return err == nil && typ == unix.SOCK_DGRAM
}

// bindSource binds fd to port 0 of a, as the caller (the worker carries
// its credentials).
func bindSource(fd, domain int, a netip.Addr) unix.Errno {
	var sa unix.Sockaddr = &unix.SockaddrInet6{Addr: a.As16()}
	if domain == unix.AF_INET {
		sa = &unix.SockaddrInet4{Addr: a.Unmap().As4()}
	}
	if err := unix.Bind(fd, sa); err != nil {
		if e, ok := err.(unix.Errno); ok && e != unix.EINVAL { // EINVAL: another thread bound it meanwhile
			return e
		}
	}
	return 0
}
