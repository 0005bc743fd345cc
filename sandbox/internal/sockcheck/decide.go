package sockcheck

import (
	"encoding/binary"
	"net/netip"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/internal/inet"
	"github.com/corral-sh/corral/internal/seccomp"
)

// call is one notified call, with what the checker copied of it.
type call struct {
	n    *seccomp.Notif
	kind seccomp.SocketCall
	tid  int
	fd   int    // the checker's duplicate of the caller's socket
	addr []byte // the copied sockaddr
	// sendto's and sendmsg's data and flags; sendmsg's control data
	// (udp.go)
	data    []byte
	flags   int
	control []byte
	w       *workerState
	// lost: the call was answered with a lost result (Checker.lost):
	// lostVal is what it returned.
	lost    bool
	lostVal int64
}

// maxSend caps what a sendto copies: a stream socket takes a short send
// as the kernel may give one; a datagram larger than this fails with
// EMSGSIZE (a Unix datagram's own limit is the socket's send buffer,
// 208 KiB by default).
const maxSend = 4 << 20

// decide checks one notification and answers with a value or an errno;
// gone means there is no one to answer.
func (c *Checker) decide(w *workerState, n *seccomp.Notif) (int64, unix.Errno) {
	cl := call{n: n, kind: n.Data.Call(), tid: int(n.Pid), w: w}
	if m := n.Data.Metadata(); m != seccomp.MetaOther {
		return c.reported(c.metadata(w, n, m))
	}
	if m := n.Data.MountCall(); m != seccomp.MountNone && c.pol.Mounts {
		c.mountTried(n, m) // report.go
		return 0, proceed
	}
	switch cl.kind {
	case seccomp.CallOther:
		if op := n.Data.FSCall(); op != seccomp.FSNone && c.pol.Writes != nil {
			return c.reported(c.fsWrite(w, n, op)) // fswrite.go
		}
		// A filter this checker does not know: refuse, never run.
		return 0, unix.ENOSYS
	case seccomp.CallPidfdSignal:
		return c.pidfdSignal(&cl) // signal.go
	case seccomp.CallSocket:
		if c.pol.DNSUDP.IsValid() && udpSocketCall(n) {
			return c.udpSocket(w, &cl) // udp.go
		}
		// An inet socket the socket rules refuse (UDP for a DNS query,
		// most often): named, then refused as the filter would have.
		c.report(Refusal{Tid: cl.tid, Call: "socket", Kind: socketKind(n.Data.Args[1]), Direct: true,
			Reason: "only TCP to the proxy leaves the sandbox: DNS and UDP are not provided inside"})
		return 0, unix.EACCES
	}
	// Everything read of the caller up to the one look after copyArgs
	// below (its credentials, its descriptor, its memory) was the caller's
	// if its call is still pending then: its tid was not reused (as
	// fswrite.go and metadata.go do; listen and sendMessages, which act
	// before that look, look themselves). An answer sent before it reaches
	// the caller only if its call is still pending, so an error found on
	// the way is the caller's too.
	pidfd, kept, err := w.pidfdOf(cl.tid)
	if err != nil {
		if !c.valid(n) {
			return 0, gone
		}
		return 0, unix.EACCES
	}
	if !kept {
		defer unix.Close(pidfd)
	}
	// The caller's credentials, which the calls made for it carry
	// (creds.go): read while its call is pending, so they are the ones it
	// made the call with.
	cr, err := c.callerCreds(w, cl.n)
	if err != nil {
		if !c.valid(n) {
			return 0, gone
		}
		return 0, unix.EACCES
	}
	fd, pidfd, err := w.getFD(cl.tid, pidfd, kept, int(int32(n.Data.Args[0])))
	if err != nil {
		if e, ok := errnoOf(err); ok && e == unix.EBADF {
			return 0, unix.EBADF
		}
		if !c.valid(n) {
			return 0, gone
		}
		return 0, unix.EACCES
	}
	defer unix.Close(fd)
	cl.fd = fd
	domain, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return 0, unix.ENOTSOCK
	}

	if cl.kind == seccomp.CallSendmsg || cl.kind == seccomp.CallSendmmsg {
		return c.sendMessages(w, &cl, cr, pidfd, domain) // udp.go
	}
	if cl.kind == seccomp.CallListen {
		if !c.valid(n) {
			return 0, gone
		}
		if err := w.asCaller(cr); err != nil {
			return 0, unix.EACCES
		}
		return c.listen(w, &cl, domain)
	}

	if e := c.copyArgs(&cl); e != 0 {
		return 0, e
	}
	// What was read is what the checks see and the kernel gets: the
	// caller's memory is not looked at again.
	if !c.valid(n) {
		return 0, gone
	}
	// From here on every call the checker makes acts on the caller's
	// objects (its socket, a path in its view): as the caller. Reading
	// its memory (process_vm_readv, above) and taking its descriptor
	// (pidfd_getfd) needed corral's own: a caller that made itself
	// non-dumpable is still checked.
	if err := w.asCaller(cr); err != nil {
		return 0, unix.EACCES
	}
	switch domain {
	case unix.AF_INET, unix.AF_INET6:
		return c.inet(&cl, domain)
	case unix.AF_UNIX:
		return c.unixCall(w, &cl)
	}
	// Another family (netlink): nothing to check, but the call is made
	// here on the copy, never let run on the caller's pointer, whose
	// family a thread could rewrite to AF_INET after a look.
	return c.perform(&cl, cl.addr)
}

// copyArgs copies the call's address (and a sendto's data) out of the
// caller's memory into cl, once: the checks and the call itself see the
// copy, never the caller's memory again.
func (c *Checker) copyArgs(cl *call) unix.Errno {
	n := cl.n
	ptr, alen := n.Data.Args[1], n.Data.Args[2]
	if cl.kind == seccomp.CallSendto {
		ptr, alen = n.Data.Args[4], n.Data.Args[5]
	}
	// The kernel takes addrlen as an int and refuses more than a
	// sockaddr_storage (move_addr_to_kernel).
	if l := int32(alen); l < 0 || l > unix.SizeofSockaddrAny {
		return unix.EINVAL
	}
	cl.addr = make([]byte, int32(alen))
	if len(cl.addr) > 0 {
		if k, err := seccomp.ReadMemory(cl.tid, ptr, cl.addr); err != nil || k != len(cl.addr) {
			if !c.valid(n) {
				return gone
			}
			return unix.EFAULT
		}
	}
	if cl.kind == seccomp.CallSendto {
		size := n.Data.Args[2]
		if size > maxSend {
			typ, _ := unix.GetsockoptInt(cl.fd, unix.SOL_SOCKET, unix.SO_TYPE)
			if typ != unix.SOCK_STREAM {
				return unix.EMSGSIZE
			}
			size = maxSend
		}
		if uint64(cap(cl.w.buf)) < size {
			cl.w.buf = make([]byte, size)
		}
		cl.data = cl.w.buf[:size]
		cl.flags = int(int32(n.Data.Args[3]))
		if size > 0 {
			if k, err := seccomp.ReadMemory(cl.tid, n.Data.Args[1], cl.data); err != nil || k != len(cl.data) {
				if !c.valid(n) {
					return gone
				}
				return unix.EFAULT
			}
		}
	}
	return 0
}

func errnoOf(err error) (unix.Errno, bool) {
	for err != nil {
		if e, ok := err.(unix.Errno); ok {
			return e, true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return 0, false
		}
		err = u.Unwrap()
	}
	return 0, false
}

// listen makes the listen itself: an fd number is an argument a thread
// can point at another socket (dup2) between a check and the kernel's
// look, so even listen is never let run.
func (c *Checker) listen(w *workerState, cl *call, domain int) (int64, unix.Errno) {
	backlog := int(int32(cl.n.Data.Args[1]))
	if c.pol.TCP && (domain == unix.AF_INET || domain == unix.AF_INET6) {
		sa, err := unix.Getsockname(cl.fd)
		port := -1
		switch a := sa.(type) {
		case *unix.SockaddrInet4:
			port = a.Port
		case *unix.SockaddrInet6:
			port = a.Port
		}
		if err == nil && port == 0 {
			c.report(Refusal{Tid: cl.tid, Call: "listen", Kind: "tcp",
				Reason: "a listen on an unbound socket would bind it to every address; bind it on loopback first"})
			return 0, unix.EACCES
		}
	}
	if err := unix.Listen(cl.fd, backlog); err != nil {
		return 0, err.(unix.Errno)
	}
	if domain == unix.AF_UNIX {
		c.recordUnixName(w, cl.fd) // an autobind
	}
	return 0, 0
}

// perform makes cl's call on the checker's duplicate with addr (a copy),
// and returns its result as the caller's.
func (c *Checker) perform(cl *call, addr []byte) (int64, unix.Errno) {
	var p unsafe.Pointer
	var buf [unix.SizeofSockaddrAny + 1]byte // never empty: a valid pointer for a zero length
	copy(buf[:], addr)
	p = unsafe.Pointer(&buf[0])
	switch cl.kind {
	case seccomp.CallSendmsg:
		return c.performMsg(cl, addr) // udp.go
	case seccomp.CallBind:
		_, _, e := unix.Syscall(unix.SYS_BIND, uintptr(cl.fd), uintptr(p), uintptr(len(addr)))
		return 0, e
	case seccomp.CallConnect:
		return 0, c.blocking(cl, func() unix.Errno {
			_, _, e := unix.Syscall(unix.SYS_CONNECT, uintptr(cl.fd), uintptr(p), uintptr(len(addr)))
			return e
		})
	case seccomp.CallSendto:
		var d unsafe.Pointer
		if len(cl.data) > 0 {
			d = unsafe.Pointer(&cl.data[0])
		}
		var sent uintptr
		e := c.blocking(cl, func() unix.Errno {
			// MSG_NOSIGNAL: the kernel would raise SIGPIPE in the
			// caller, not here; it is raised there below.
			r, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(cl.fd), uintptr(d), uintptr(len(cl.data)),
				uintptr(cl.flags|unix.MSG_NOSIGNAL), uintptr(p), uintptr(len(addr)))
			sent = r
			return e
		})
		return sendResult(cl, sent, e)
	}
	return 0, unix.ENOSYS
}

// sendResult is the answer to a send the checker made for the caller
// (sendto, sendmsg): SIGPIPE raised in the caller where the kernel would
// have raised it (the checker's own send carries MSG_NOSIGNAL), and the
// result a blocking call that completed while its caller was interrupted
// left for the restarted one (lostCall).
func sendResult(cl *call, sent uintptr, e unix.Errno) (int64, unix.Errno) {
	if e == unix.EPIPE && cl.flags&unix.MSG_NOSIGNAL == 0 {
		if tgid, err := threadGroupOf(cl.tid); err == nil {
			unix.Tgkill(tgid, cl.tid, unix.SIGPIPE)
		}
	}
	if e != 0 {
		return 0, e
	}
	if cl.lost {
		return cl.lostVal, 0
	}
	return int64(sent), 0
}

// slice bounds how long a worker waits in one blocking connect or send
// before it looks whether its caller still waits.
const slice = 100 * time.Millisecond

// inflight is one blocking call under way on a socket.
type inflight struct {
	id         uint64 // the notification its result answers
	kind       seccomp.SocketCall
	addr, data []byte
}

// blocking runs op, a connect or send on the caller's socket, which may
// block (a full backlog, a full datagram queue, a TCP handshake). The
// socket's file status flags are the caller's: a non-blocking socket
// answers at once, EINPROGRESS included, as it would to the caller. A
// blocking one waits, but never longer than slice at a time
// (SO_SNDTIMEO, which bounds connect and send; the caller's own value is
// put back afterwards and still ends the wait when it would have): after
// each slice the worker looks whether its caller still waits. A caller
// interrupted by a signal whose call restarts (SA_RESTART) comes back as
// a new notification for the same call on the same socket: that one
// takes this one over (the worker goes on and answers it), as the kernel
// would go on with the same handshake. A caller that is gone for good
// (killed, or EINTR without a restart) frees its worker within a slice.
func (c *Checker) blocking(cl *call, op func() unix.Errno) unix.Errno {
	// A non-blocking socket (most clients' connect): one call, no
	// timeout to set. Should another thread of the caller clear
	// O_NONBLOCK meanwhile, this one call may wait as long as the
	// caller's own would: a worker of its own checks, not corral, is
	// what that holds up.
	if fl, err := unix.FcntlInt(uintptr(cl.fd), unix.F_GETFL, 0); err == nil && fl&unix.O_NONBLOCK != 0 {
		return op()
	}
	var st unix.Stat_t
	if err := unix.Fstat(cl.fd, &st); err != nil {
		return unix.EBADF
	}
	c.imu.Lock()
	if l, ok := c.lost[st.Ino]; ok {
		delete(c.lost, st.Ino)
		if time.Since(l.at) < lostFor && l.sum == c.callDigest(cl.kind, cl.addr, cl.data) {
			c.imu.Unlock()
			c.stats.adopted.Add(1)
			cl.lost, cl.lostVal = true, l.val
			return 0
		}
	}
	if f := c.inflight[st.Ino]; f != nil {
		if f.kind == cl.kind && string(f.addr) == string(cl.addr) && string(f.data) == string(cl.data) && !c.validID(f.id) {
			f.id = cl.n.ID
			c.imu.Unlock()
			c.stats.adopted.Add(1)
			return answered
		}
		c.imu.Unlock()
		if cl.kind == seccomp.CallConnect {
			return unix.EALREADY // another thread's connect on it is under way
		}
		return c.sliced(cl, op, nil)
	}
	f := &inflight{id: cl.n.ID, kind: cl.kind, addr: cl.addr, data: cl.data}
	c.inflight[st.Ino] = f
	c.imu.Unlock()
	e := c.sliced(cl, op, func() (uint64, bool) {
		c.imu.Lock()
		defer c.imu.Unlock()
		if c.inflight[st.Ino] == f {
			delete(c.inflight, st.Ino)
		}
		return f.id, true
	})
	if e == 0 && cl.w != nil {
		// Should its answer find no one (handle), the restart gets it.
		cl.w.done = &lostCall{ino: st.Ino, sum: c.callDigest(cl.kind, cl.addr, cl.data)}
	}
	return e
}

// sliced is blocking's loop. finish, when set, ends the in-flight record
// and says which notification to answer.
func (c *Checker) sliced(cl *call, op func() unix.Errno, finish func() (uint64, bool)) unix.Errno {
	done := func(e unix.Errno) unix.Errno {
		if finish != nil {
			cl.n.ID, _ = finish()
		}
		return e
	}
	orig, err := unix.GetsockoptTimeval(cl.fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO)
	if err != nil {
		return done(op())
	}
	limit := time.Duration(orig.Nano())
	if limit == 0 || limit > slice {
		tv := unix.NsecToTimeval(slice.Nanoseconds())
		if unix.SetsockoptTimeval(cl.fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv) == nil {
			defer unix.SetsockoptTimeval(cl.fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, orig)
		}
	}
	start := time.Now()
	for {
		e := op()
		// EINTR here is a signal to this worker's thread (the Go runtime's,
		// or one of the process's, such as a SIGCHLD), never the
		// caller's, whose interruption shows as its notification
		// vanishing: the call goes on, as it would for the caller. With a
		// send timeout the kernel cannot restart it, so it is made again:
		// a connect under way waits on, a send that sent nothing sends.
		if e != unix.EINPROGRESS && e != unix.EALREADY && e != unix.EAGAIN && e != unix.EINTR {
			return done(e)
		}
		fl, err := unix.FcntlInt(uintptr(cl.fd), unix.F_GETFL, 0)
		if err != nil || fl&unix.O_NONBLOCK != 0 {
			return done(e)
		}
		if limit != 0 && time.Since(start) >= limit {
			return done(e)
		}
		if finish == nil {
			if !c.valid(cl.n) {
				return gone
			}
			continue
		}
		c.imu.Lock()
		id := c.inflightID(cl)
		c.imu.Unlock()
		if !c.validID(id) {
			// Gone, and no restart took it over: end the record
			// first, so that a restart from now on starts afresh.
			finish()
			return gone
		}
	}
}

func (c *Checker) inflightID(cl *call) uint64 {
	var st unix.Stat_t
	if unix.Fstat(cl.fd, &st) == nil {
		if f := c.inflight[st.Ino]; f != nil {
			return f.id
		}
	}
	return cl.n.ID
}

// inet checks an IPv4 or IPv6 call. The address the kernel gets is one
// the checker builds from what it parsed, never the bytes as given.
func (c *Checker) inet(cl *call, domain int) (int64, unix.Errno) {
	a := cl.addr
	if len(a) >= 2 && family(a) == unix.AF_UNSPEC && cl.kind != seccomp.CallBind {
		// connect(AF_UNSPEC) dissolves an association; nothing to reach.
		return c.perform(cl, []byte{a[0], a[1]})
	}
	var ap netip.AddrPort
	var flow, scope uint32
	switch {
	case domain == unix.AF_INET && cl.kind == seccomp.CallBind && len(a) >= unix.SizeofSockaddrInet4 &&
		family(a) == unix.AF_UNSPEC && binary.BigEndian.Uint32(a[4:8]) == 0:
		// inet_bind takes AF_UNSPEC with INADDR_ANY as AF_INET.
		ap = netip.AddrPortFrom(netip.IPv4Unspecified(), binary.BigEndian.Uint16(a[2:4]))
	case domain == unix.AF_INET:
		if len(a) < unix.SizeofSockaddrInet4 {
			return 0, unix.EINVAL
		}
		if family(a) != unix.AF_INET {
			return 0, unix.EAFNOSUPPORT
		}
		ap = netip.AddrPortFrom(netip.AddrFrom4([4]byte(a[4:8])), binary.BigEndian.Uint16(a[2:4]))
	default:
		if len(a) < unix.SizeofSockaddrInet6-4 { // SIN6_LEN_RFC2133
			return 0, unix.EINVAL
		}
		switch family(a) {
		case unix.AF_INET6:
			ap = netip.AddrPortFrom(netip.AddrFrom16([16]byte(a[8:24])), binary.BigEndian.Uint16(a[2:4]))
			flow = binary.NativeEndian.Uint32(a[4:8])
			if len(a) >= unix.SizeofSockaddrInet6 {
				scope = binary.NativeEndian.Uint32(a[24:28])
			}
		case unix.AF_INET:
			if cl.kind == seccomp.CallBind {
				return 0, unix.EAFNOSUPPORT
			}
			// tcp_v6_connect takes a sockaddr_in as a v4-mapped address.
			ap = netip.AddrPortFrom(netip.AddrFrom16(netip.AddrFrom4([4]byte(a[4:8])).As16()), binary.BigEndian.Uint16(a[2:4]))
		default:
			return 0, unix.EAFNOSUPPORT
		}
	}

	if !c.pol.TCP {
		if val, e, ok := c.relay(cl, domain, unmapped(ap)); ok { // relay.go
			return val, e
		}
		val, e := c.perform(cl, inetSockaddr(domain, ap, flow, scope))
		if c.pol.Net && cl.kind != seccomp.CallBind && e != 0 && e != unix.EINPROGRESS && e != gone && !ap.Addr().Unmap().IsLoopback() && !datagramConnect(cl) {
			c.report(Refusal{Tid: cl.tid, Call: cl.kind.String(), Kind: "tcp", Addr: unmapped(ap), Direct: true,
				Reason: "the sandbox's network has loopback only"})
		}
		return val, e
	}

	if typ, _ := unix.GetsockoptInt(cl.fd, unix.SOL_SOCKET, unix.SO_TYPE); typ == unix.SOCK_DGRAM {
		return c.udp(cl, domain, ap, flow, scope) // udp.go
	}
	if cl.kind == seccomp.CallBind {
		return c.bindInet(cl, domain, ap, flow, scope)
	}
	dest := unmapped(ap)
	// connect to the unspecified address reaches the local host.
	if dest.Addr().IsUnspecified() {
		lo := netip.AddrFrom4([4]byte{127, 0, 0, 1})
		if dest.Addr().Is6() {
			lo = netip.IPv6Loopback()
		}
		dest = netip.AddrPortFrom(lo, dest.Port())
		ap = dest
		if domain == unix.AF_INET6 && lo.Is4() {
			ap = netip.AddrPortFrom(netip.AddrFrom16(lo.As16()), dest.Port())
		}
	}
	if dest.Port() == 53 && cl.kind == seccomp.CallConnect {
		if to, ok := c.dnsRedirect(cl); ok {
			return c.perform(cl, inetSockaddr(domain, to, 0, 0))
		}
	}
	if ok, reason := c.mayConnect(dest); !ok {
		c.report(Refusal{Tid: cl.tid, Call: cl.kind.String(), Kind: "tcp", Addr: dest, Direct: !dest.Addr().IsLoopback(), Reason: reason})
		return 0, unix.EACCES
	}
	return c.perform(cl, inetSockaddr(domain, ap, flow, scope))
}

// dnsRedirect says where a connect to port 53 goes instead: corral's DNS
// responder, for the socket's type (Policy.DNSTCP, DNSUDP).
func (c *Checker) dnsRedirect(cl *call) (netip.AddrPort, bool) {
	typ, err := unix.GetsockoptInt(cl.fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return netip.AddrPort{}, false
	}
	switch {
	case typ == unix.SOCK_STREAM && c.pol.DNSTCP.IsValid():
		return c.pol.DNSTCP, true
	case typ == unix.SOCK_DGRAM && c.pol.DNSUDP.IsValid():
		return c.pol.DNSUDP, true
	}
	return netip.AddrPort{}, false
}

func (c *Checker) mayConnect(dest netip.AddrPort) (bool, string) {
	if c.pol.proxy.IsValid() && dest == c.pol.proxy {
		return true, ""
	}
	if dest.Addr() == netip.AddrFrom4([4]byte{127, 0, 0, 1}) && c.pol.hostPorts[dest.Port()] {
		return true, ""
	}
	c.mu.Lock()
	_, bound := c.boundTCP[dest]
	c.mu.Unlock()
	if bound {
		return true, ""
	}
	// An address an --allow-net entry admits by itself (egress decides):
	// connected here, on the runner's socket, with no relay.
	if c.pol.Direct != nil && c.pol.Direct(dest) {
		return true, ""
	}
	if dest.Addr().IsLoopback() {
		return false, "a loopback port neither a --host-port nor bound by the command's tree"
	}
	return false, "a direct connection no --allow-net entry admits"
}

// bindInet binds on loopback only, the any-address on loopback instead.
func (c *Checker) bindInet(cl *call, domain int, ap netip.AddrPort, flow, scope uint32) (int64, unix.Errno) {
	addr := ap.Addr()
	switch {
	case addr.Unmap().IsUnspecified():
		if domain == unix.AF_INET {
			addr = netip.AddrFrom4([4]byte{127, 0, 0, 1})
		} else if only, err := unix.GetsockoptInt(cl.fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY); err == nil && only == 0 && !addr.Is4In6() {
			addr = netip.AddrFrom16(netip.AddrFrom4([4]byte{127, 0, 0, 1}).As16()) // dual-stack: ::ffff:127.0.0.1
		} else if addr.Is4In6() {
			addr = netip.AddrFrom16(netip.AddrFrom4([4]byte{127, 0, 0, 1}).As16())
		} else {
			addr = netip.IPv6Loopback()
		}
	case addr.Unmap().IsLoopback():
	default:
		c.report(Refusal{Tid: cl.tid, Call: "bind", Kind: "tcp", Addr: unmapped(ap), Reason: "a bind off loopback"})
		return 0, unix.EACCES
	}
	c.mu.Lock()
	full := len(c.boundTCP) >= maxBound
	c.mu.Unlock()
	if full {
		c.report(Refusal{Tid: cl.tid, Call: "bind", Kind: "tcp", Addr: unmapped(ap), Reason: "too many ports bound"})
		return 0, unix.EACCES
	}
	val, e := c.perform(cl, inetSockaddr(domain, netip.AddrPortFrom(addr, ap.Port()), flow, scope))
	// What the tree bound may be connected to over TCP: a UDP port
	// bound is none of that (a TCP service of the host on the same
	// number stays out of reach).
	if typ, _ := unix.GetsockoptInt(cl.fd, unix.SOL_SOCKET, unix.SO_TYPE); e == 0 && typ == unix.SOCK_STREAM {
		if got, err := inet.Sockname(cl.fd); err == nil {
			c.mu.Lock()
			c.boundTCP[unmapped(got)] = struct{}{}
			c.mu.Unlock()
		}
	}
	return val, e
}

func unmapped(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

func family(a []byte) uint16 { return binary.NativeEndian.Uint16(a[0:2]) }

// inetSockaddr builds the sockaddr for a socket of domain: a sockaddr_in,
// or a sockaddr_in6 (an IPv4 address as v4-mapped).
func inetSockaddr(domain int, ap netip.AddrPort, flow, scope uint32) []byte {
	if domain == unix.AF_INET {
		b := make([]byte, unix.SizeofSockaddrInet4)
		binary.NativeEndian.PutUint16(b[0:], unix.AF_INET)
		binary.BigEndian.PutUint16(b[2:], ap.Port())
		a4 := ap.Addr().Unmap().As4()
		copy(b[4:8], a4[:])
		return b
	}
	b := make([]byte, unix.SizeofSockaddrInet6)
	binary.NativeEndian.PutUint16(b[0:], unix.AF_INET6)
	binary.BigEndian.PutUint16(b[2:], ap.Port())
	binary.NativeEndian.PutUint32(b[4:], flow)
	a16 := ap.Addr().As16()
	copy(b[8:24], a16[:])
	binary.NativeEndian.PutUint32(b[24:], scope)
	return b
}

// socketKind names the socket type asked of socket(2): "udp" for a
// datagram socket (a DNS query), else "inet".
func socketKind(typ uint64) string {
	if uint32(typ)&^uint32(unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC) == unix.SOCK_DGRAM {
		return "udp"
	}
	return "inet"
}
