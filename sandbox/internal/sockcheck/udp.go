package sockcheck

import (
	"encoding/binary"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/internal/inet"
	"github.com/corral-sh/corral/internal/seccomp"
)

// UDP in subreaper mode (seccomp SocketRules.AllowUDP): the tree may make
// UDP sockets so that every resolver can ask corral's DNS responder, and
// every datagram's destination is held here, since no Landlock right
// covers UDP. A UDP socket's connect to port 53, at any address, is made to
// the responder (Policy.DNSUDP): a connected socket takes datagrams from
// its peer only, and the responder is that peer, so a resolver on a
// connected socket (Go's, busybox's) reads corral's answers. A datagram
// sent with an address to port 53 is made to the responder too when the
// socket is connected to it; on an unconnected socket (musl's resolver)
// the answer would come from an address the resolver did not ask, which
// it drops: refused, and named for what it is. Every other UDP
// destination is refused (QUIC and HTTP/3 clients fall back to TCP).
//
// sendmsg(2) and sendmmsg(2) carry their destination in a msghdr in the
// caller's memory: each header, its address, its data and its control
// messages are copied once, the copy decided on and sent on the
// checker's duplicate of the socket, whatever its family (the descriptor
// number is no proof of the socket behind it: another thread can dup2 a
// UDP socket onto it after any look). Descriptors passed with SCM_RIGHTS
// are the caller's numbers: each is taken with pidfd_getfd and the copy
// sent instead.

// The native msghdr and mmsghdr (LP64: amd64, arm64; the filter refuses
// the 32-bit layouts): msg_name at 0, msg_namelen at 8, msg_iov at 16,
// msg_iovlen at 24, msg_control at 32, msg_controllen at 40, msg_flags at
// 48; an mmsghdr adds msg_len at 56.
const (
	sizeofMsghdr  = 56
	sizeofMmsghdr = 64
	// uioMaxIOV is UIO_MAXIOV: the most iovecs a message may have, and
	// the most messages a sendmmsg sends (the kernel clamps vlen to it).
	uioMaxIOV = 1024
	// maxControl caps a message's control data: past it the kernel
	// would refuse it too (optmem_max, 20 KiB to 128 KiB), ENOBUFS. The
	// messages of one sendmmsg hold at most that much together, and at
	// most maxIovecs iovecs together: a sendmmsg that asks more is sent
	// in part, the messages that fit, as the kernel too may send fewer
	// than asked. (The bytes are held to maxSend, checker.go.)
	maxControl = 64 << 10
	maxIovecs  = 4 * uioMaxIOV
	// sizeofCmsghdr is struct cmsghdr on LP64: cmsg_len (8), level, type.
	sizeofCmsghdr = 16
)

// message is one msghdr as copied from the caller.
type message struct {
	name    []byte
	iov     []unix.RemoteIovec // the caller's iovecs, cut to what is sent
	size    int                // their total length
	control []byte
	data    []byte // the copied bytes (a part of the worker's buffer)
}

// sendMessages checks a sendmsg or a sendmmsg: every message copied once
// before anything is decided, each decided on its copy and sent on the
// duplicate fd. cr are the caller's credentials, pidfd the caller's
// thread (for SCM_RIGHTS).
func (c *Checker) sendMessages(w *workerState, cl *call, cr *creds, pidfd, domain int) (int64, unix.Errno) {
	n := cl.n
	multi := cl.kind == seccomp.CallSendmmsg
	count, stride := 1, sizeofMsghdr
	flags := int(int32(n.Data.Args[2]))
	if multi {
		vlen := uint32(n.Data.Args[2])
		flags = int(int32(n.Data.Args[3]))
		if vlen > uioMaxIOV {
			vlen = uioMaxIOV
		}
		if vlen == 0 {
			return 0, 0
		}
		count, stride = int(vlen), sizeofMmsghdr
	}
	if flags&unix.MSG_FASTOPEN != 0 {
		// A TCP Fast Open send connects to the message's address without
		// a connect: refused, as the filter refuses it where it cannot
		// look.
		return 0, unix.EACCES
	}
	typ, err := unix.GetsockoptInt(cl.fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return 0, unix.ENOTSOCK
	}
	hdrs := make([]byte, count*stride)
	if k, err := seccomp.ReadMemory(cl.tid, n.Data.Args[1], hdrs); err != nil || k != len(hdrs) {
		if !c.valid(n) {
			return 0, gone
		}
		return 0, unix.EFAULT
	}
	// First the headers, their addresses, iovecs and control data; then
	// the bytes, into the worker's buffer grown once.
	msgs := make([]message, 0, count)
	budget := limits{data: maxSend, iovecs: maxIovecs, control: maxControl}
	var first unix.Errno
	for i := range count {
		m, e := c.copyHeader(cl, hdrs[i*stride:i*stride+sizeofMsghdr], typ, &budget)
		if e != 0 {
			first = e
			break
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		if first == gone || !c.valid(n) {
			return 0, gone
		}
		return 0, first
	}
	total := 0
	for _, m := range msgs {
		total += m.size
	}
	if cap(w.buf) < total {
		w.buf = make([]byte, total)
	}
	off := 0
	for i := range msgs {
		m := &msgs[i]
		m.data = w.buf[off : off+m.size : off+m.size]
		off += m.size
		if m.size == 0 {
			continue
		}
		local := []unix.Iovec{{Base: &m.data[0]}}
		local[0].SetLen(m.size)
		if k, err := unix.ProcessVMReadv(cl.tid, local, m.iov, 0); err != nil || k != m.size {
			if !c.valid(n) {
				return 0, gone
			}
			if i == 0 {
				return 0, unix.EFAULT
			}
			msgs = msgs[:i]
			break
		}
	}
	// What was read is what is decided on and sent.
	if !c.valid(n) {
		return 0, gone
	}
	if err := w.asCaller(cr); err != nil {
		return 0, unix.EACCES
	}
	sent := make([]uint32, 0, len(msgs))
	var val int64
	var e unix.Errno
	for _, m := range msgs {
		val, e = c.sendMessage(w, cl, pidfd, domain, m, flags)
		if e != 0 {
			break
		}
		sent = append(sent, uint32(val))
	}
	if !multi {
		return val, e
	}
	// sendmmsg: no lost result to keep (the restart of an interrupted
	// one sends again, as a caller's own retry would).
	w.done = nil
	if len(sent) == 0 {
		return 0, e
	}
	// The kernel writes each sent message's length into its mmsghdr;
	// so does corral, with its own rights (the caller may be
	// non-dumpable, as for the reads).
	w.withOwn(func() {
		for i, l := range sent {
			var b [4]byte
			binary.NativeEndian.PutUint32(b[:], l)
			seccomp.WriteMemory(cl.tid, n.Data.Args[1]+uint64(i*stride+sizeofMsghdr), b[:])
		}
	})
	return int64(len(sent)), 0
}

// limits is what the messages of one call may still hold.
type limits struct{ data, iovecs, control int }

// copyHeader copies what one msghdr points at: its address (cut to a
// sockaddr_storage, as the kernel does), its iovecs (at most uioMaxIOV,
// their bytes within the budget: a stream socket sends what fits, a short
// send; a datagram that does not fit fails with EMSGSIZE) and its control
// data (at most maxControl, else ENOBUFS), each within what is left of
// the budget (a later message of a sendmmsg that does not fit ends it).
func (c *Checker) copyHeader(cl *call, h []byte, typ int, budget *limits) (message, unix.Errno) {
	var m message
	namePtr := binary.NativeEndian.Uint64(h[0:])
	namelen := int32(binary.NativeEndian.Uint32(h[8:]))
	iovPtr := binary.NativeEndian.Uint64(h[16:])
	iovlen := binary.NativeEndian.Uint64(h[24:])
	ctlPtr := binary.NativeEndian.Uint64(h[32:])
	ctlLen := binary.NativeEndian.Uint64(h[40:])
	read := func(ptr uint64, b []byte) unix.Errno {
		if len(b) == 0 {
			return 0
		}
		if k, err := seccomp.ReadMemory(cl.tid, ptr, b); err != nil || k != len(b) {
			if !c.valid(cl.n) {
				return gone
			}
			return unix.EFAULT
		}
		return 0
	}
	if namePtr != 0 {
		if namelen < 0 {
			return m, unix.EINVAL
		}
		m.name = make([]byte, min(int(namelen), unix.SizeofSockaddrAny))
		if e := read(namePtr, m.name); e != 0 {
			return m, e
		}
	}
	if iovlen > uioMaxIOV {
		return m, unix.EMSGSIZE
	}
	if int(iovlen) > budget.iovecs || ctlLen > uint64(budget.control) && ctlLen <= maxControl {
		return m, unix.ENOBUFS
	}
	raw := make([]byte, iovlen*16)
	if e := read(iovPtr, raw); e != 0 {
		return m, e
	}
	for i := range int(iovlen) {
		base := binary.NativeEndian.Uint64(raw[i*16:])
		l := int64(binary.NativeEndian.Uint64(raw[i*16+8:]))
		if l < 0 {
			return m, unix.EINVAL
		}
		if l == 0 {
			continue
		}
		if int64(m.size)+l > int64(budget.data) {
			if typ != unix.SOCK_STREAM {
				return m, unix.EMSGSIZE
			}
			l = int64(budget.data - m.size)
			if l == 0 {
				break
			}
		}
		m.iov = append(m.iov, unix.RemoteIovec{Base: uintptr(base), Len: int(l)})
		m.size += int(l)
	}
	budget.data -= m.size
	budget.iovecs -= len(m.iov)
	if ctlLen > 0 {
		if ctlLen > maxControl {
			return m, unix.ENOBUFS
		}
		m.control = make([]byte, ctlLen)
		if e := read(ctlPtr, m.control); e != 0 {
			return m, e
		}
		budget.control -= len(m.control)
	}
	return m, 0
}

// sendMessage decides one copied message and sends it on the duplicate:
// by the same checks as a sendto with its address (inet, unixCall), with
// its control messages first made the checker's own (controlOf).
func (c *Checker) sendMessage(w *workerState, cl *call, pidfd, domain int, m message, flags int) (int64, unix.Errno) {
	one := *cl
	one.kind = seccomp.CallSendmsg
	one.addr, one.data, one.flags = m.name, m.data, flags
	ctl, fds, e := controlOf(m.control, domain, pidfd)
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	if e != 0 {
		return 0, e
	}
	one.control = ctl
	if len(one.addr) == 0 {
		// No address: the socket's peer, which a checked connect set
		// (or none: the kernel says EDESTADDRREQ or ENOTCONN).
		return c.perform(&one, nil)
	}
	switch domain {
	case unix.AF_INET, unix.AF_INET6:
		return c.inet(&one, domain)
	case unix.AF_UNIX:
		return c.unixCall(w, &one)
	}
	return c.perform(&one, one.addr)
}

// controlOf is a message's control data as the checker sends it: walked
// as the kernel walks it (__scm_send, ip_cmsg_send: each header at least
// a cmsghdr and within the buffer, the next one aligned), with every
// descriptor of an SCM_RIGHTS taken from the caller (fds, for the caller
// to close) in place of its number, which in the checker's process names
// another file. SCM_RIGHTS on a socket that is not AF_UNIX fails with
// EINVAL, as the kernel fails it; an IP option or an IPv6 routing header
// or next hop, which would route the datagram past the checked address,
// with EACCES (SPEC: socket options that route elsewhere are refused).
func controlOf(ctl []byte, domain, pidfd int) ([]byte, []int, unix.Errno) {
	if len(ctl) == 0 {
		return nil, nil, 0
	}
	out := append([]byte(nil), ctl...)
	var fds []int
	for off := 0; off+sizeofCmsghdr <= len(out); {
		clen := binary.NativeEndian.Uint64(out[off:])
		if clen < sizeofCmsghdr || clen > uint64(len(out)-off) {
			return nil, fds, unix.EINVAL
		}
		level := int32(binary.NativeEndian.Uint32(out[off+8:]))
		typ := int32(binary.NativeEndian.Uint32(out[off+12:]))
		switch {
		case level == unix.SOL_SOCKET && typ == unix.SCM_RIGHTS:
			if domain != unix.AF_UNIX {
				return nil, fds, unix.EINVAL
			}
			data := out[off+sizeofCmsghdr : off+int(clen)]
			for i := 0; i+4 <= len(data); i += 4 {
				theirs := int(int32(binary.NativeEndian.Uint32(data[i:])))
				fd, err := seccomp.GetFD(pidfd, theirs)
				if err != nil {
					return nil, fds, unix.EBADF
				}
				fds = append(fds, fd)
				binary.NativeEndian.PutUint32(data[i:], uint32(fd))
			}
		case level == unix.SOL_IP && typ == unix.IP_RETOPTS,
			level == unix.SOL_IPV6 && (typ == unix.IPV6_RTHDR || typ == unix.IPV6_2292RTHDR || typ == unix.IPV6_NEXTHOP):
			return nil, fds, unix.EACCES
		}
		off += int((clen + 7) &^ 7)
	}
	return out, fds, 0
}

// performMsg is perform for a sendmsg: one iovec over the copied bytes
// (the same datagram, the same stream bytes), addr (built by the checks,
// or nil for the socket's peer), the control data made the checker's.
func (c *Checker) performMsg(cl *call, addr []byte) (int64, unix.Errno) {
	hdr := new(unix.Msghdr)
	if len(addr) > 0 {
		name := append([]byte(nil), addr...)
		hdr.Name, hdr.Namelen = &name[0], uint32(len(name))
	}
	if len(cl.data) > 0 {
		iov := new(unix.Iovec)
		iov.Base = &cl.data[0]
		iov.SetLen(len(cl.data))
		hdr.Iov = iov
		hdr.SetIovlen(1)
	}
	if len(cl.control) > 0 {
		hdr.Control = &cl.control[0]
		hdr.SetControllen(len(cl.control))
	}
	var sent uintptr
	e := c.blocking(cl, func() unix.Errno {
		// MSG_NOSIGNAL: SIGPIPE is the caller's, raised below.
		r, _, e := unix.Syscall(unix.SYS_SENDMSG, uintptr(cl.fd), uintptr(unsafe.Pointer(hdr)), uintptr(cl.flags|unix.MSG_NOSIGNAL))
		sent = r
		return e
	})
	return sendResult(cl, sent, e)
}

// udp decides a UDP socket's bind, connect or addressed send (inet has
// parsed ap from the copy).
func (c *Checker) udp(cl *call, domain int, ap netip.AddrPort, flow, scope uint32) (int64, unix.Errno) {
	if cl.kind == seccomp.CallBind {
		return c.bindInet(cl, domain, ap, flow, scope) // on loopback only, as TCP
	}
	dest := unmapped(ap)
	if dest.Port() == 53 && c.pol.DNSUDP.IsValid() {
		to := inetSockaddr(domain, c.pol.DNSUDP, 0, 0)
		if cl.kind == seccomp.CallConnect || connectedTo(cl.fd, c.pol.DNSUDP) {
			return c.perform(cl, to)
		}
		// An unconnected socket: the answer's source would be the
		// responder, not the address asked, and the resolver (musl's)
		// drops it. Refused at once rather than left to time out.
		c.report(Refusal{Tid: cl.tid, Call: cl.kind.String(), Kind: "dns", Addr: dest, Path: commOf(cl.tid), Direct: true,
			Reason: "a DNS query on an unconnected UDP socket, whose answer the resolver would take only from the address it asked"})
		return 0, unix.EACCES
	}
	c.report(Refusal{Tid: cl.tid, Call: cl.kind.String(), Kind: "udp", Addr: dest, Direct: !dest.Addr().IsLoopback(),
		Reason: "UDP leaves the sandbox only as DNS (port 53), answered by corral"})
	return 0, unix.EACCES
}

// connectedTo reports whether the socket fd is connected to peer.
func connectedTo(fd int, peer netip.AddrPort) bool {
	got, err := inet.Peername(fd)
	return err == nil && unmapped(got) == unmapped(peer)
}

// commOf is the name of the program thread tid runs (its thread group
// leader's: a thread may have named itself), for a refusal's line.
func commOf(tid int) string {
	if tgid, err := threadGroupOf(tid); err == nil {
		tid = tgid
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/comm")
	if err != nil {
		return "a program"
	}
	return strings.TrimSpace(string(b))
}

// udpSocketCall reports whether n is socket(2) of a UDP socket (AF_INET
// or AF_INET6, SOCK_DGRAM, protocol 0 or IPPROTO_UDP), which the filter
// hands over under SocketRules.AllowUDP.
func udpSocketCall(n *seccomp.Notif) bool {
	dom, typ, proto := uint32(n.Data.Args[0]), uint32(n.Data.Args[1])&^uint32(unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC), uint32(n.Data.Args[2])
	return (dom == unix.AF_INET || dom == unix.AF_INET6) && typ == unix.SOCK_DGRAM && (proto == 0 || proto == unix.IPPROTO_UDP)
}

// udpSocket makes the caller's UDP socket and hands it over as the
// caller's own (ADDFD), held to the loopback device: the kernel binds an
// unbound UDP socket to every address at its first send, even a send
// that then fails (inet_send_prepare's autobind, before udp_sendmsg looks
// for an address), and a write(2) or send(2) is no call a filter can
// check; bound to loopback it takes no datagram from another host
// whatever it is bound to, and sends nothing past loopback even should a
// check be missed. The caller cannot undo it: changing a socket's device
// takes CAP_NET_RAW (sock_bindtoindex).
func (c *Checker) udpSocket(w *workerState, cl *call) (int64, unix.Errno) {
	a := cl.n.Data.Args
	typ := int(int32(a[1]))
	fd, err := unix.Socket(int(int32(a[0])), typ|unix.SOCK_CLOEXEC, int(int32(a[2])))
	if err != nil {
		return 0, errnoOr(err, unix.ENOBUFS)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptString(fd, unix.SOL_SOCKET, unix.SO_BINDTODEVICE, "lo"); err != nil {
		return 0, unix.EACCES
	}
	if !c.valid(cl.n) {
		return 0, gone
	}
	_, err = seccomp.AnswerWithFD(c.listener, cl.n.ID, fd, typ&unix.SOCK_CLOEXEC != 0)
	if err == seccomp.ErrGone {
		return 0, gone
	}
	if err != nil {
		return 0, errnoOr(err, unix.EMFILE)
	}
	return 0, answered
}
