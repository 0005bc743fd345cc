package sockcheck

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func init() {
	scenarios["udp"] = scenarioUDP
	scenarios["bench-udp-dns"] = scenarioBenchUDPDNS
	scenarios["bench-sendmsg"] = scenarioBenchSendmsg
}

// udpEcho is the test's stand-in for corral's DNS responder: it sends
// every datagram back, and counts them.
type udpEcho struct {
	pc  net.PacketConn
	got atomic.Int64
}

func listenUDPEcho(t testing.TB, addr string) *udpEcho {
	t.Helper()
	pc, err := net.ListenPacket("udp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	e := &udpEcho{pc: pc}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			e.got.Add(1)
			pc.WriteTo(buf[:n], from)
		}
	}()
	return e
}

func (e *udpEcho) addrPort() netip.AddrPort {
	return e.pc.LocalAddr().(*net.UDPAddr).AddrPort()
}

func udpSocket(c *child) int {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		c.fatalf("UDP socket: %v", err)
	}
	return fd
}

func rawSendto(fd int, data, to []byte) unix.Errno {
	_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)), 0,
		uintptr(unsafe.Pointer(&to[0])), uintptr(len(to)))
	return e
}

// recvTimeout reads one datagram within a second.
func recvTimeout(c *child, fd int, what string) string {
	tv := unix.Timeval{Sec: 1}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	buf := make([]byte, 256)
	n, err := unix.Read(fd, buf)
	if err != nil {
		c.errorf("%s: read: %v", what, err)
		return ""
	}
	return string(buf[:n])
}

// scenarioUDP: UDP under SocketRules.AllowUDP, with the checker's
// DNSUDP the test's echo server (CORRAL_SOCKCHECK_DNS).
func scenarioUDP(c *child) {
	dns := envInt("DNS")
	ns := sockaddr4([4]byte{192, 0, 2, 53}, 53) // any nameserver: the checker connects the responder
	other := sockaddr4(lo, dns)                 // the responder's own address, but not port 53

	// A connect to port 53 reaches the responder; its answers come back.
	fd := udpSocket(c)
	if dev, err := unix.GetsockoptString(fd, unix.SOL_SOCKET, unix.SO_BINDTODEVICE); err != nil || dev != "lo" {
		c.errorf("the UDP socket is bound to device %q (%v), want lo", dev, err)
	}
	want(c, "connect to a nameserver", rawConnect(fd, ns), 0)
	if p, err := unix.Getpeername(fd); err != nil || p.(*unix.SockaddrInet4).Port != dns {
		c.errorf("the connected socket's peer: %v %v, want 127.0.0.1:%d", p, err, dns)
	}
	unix.Write(fd, []byte("q1"))
	if got := recvTimeout(c, fd, "write on the connected socket"); got != "q1" {
		c.errorf("the responder's answer: %q", got)
	}
	// sendto with port 53 on that socket: to the responder as well.
	want(c, "sendto port 53 on a socket connected to the responder", rawSendto(fd, []byte("q2"), ns), 0)
	if got := recvTimeout(c, fd, "sendto on the connected socket"); got != "q2" {
		c.errorf("the responder's answer: %q", got)
	}
	// sendmsg without an address, and with port 53.
	if n, err := unix.SendmsgN(fd, []byte("q3"), nil, nil, 0); err != nil || n != 2 {
		c.errorf("sendmsg without an address on the connected socket: %d %v", n, err)
	} else if got := recvTimeout(c, fd, "sendmsg"); got != "q3" {
		c.errorf("the responder's answer: %q", got)
	}
	if _, err := unix.SendmsgN(fd, []byte("q4"), nil, &unix.SockaddrInet4{Addr: [4]byte{192, 0, 2, 53}, Port: 53}, 0); err != nil {
		c.errorf("sendmsg to port 53 on the connected socket: %v", err)
	} else if got := recvTimeout(c, fd, "sendmsg to port 53"); got != "q4" {
		c.errorf("the responder's answer: %q", got)
	}
	// sendmmsg, as glibc's resolver asks for A and AAAA at once: both
	// sent, each msg_len written back.
	m1, m2 := []byte("mm-one"), []byte("mm-second")
	var iov [2]unix.Iovec
	iov[0].Base, iov[1].Base = &m1[0], &m2[0]
	iov[0].SetLen(len(m1))
	iov[1].SetLen(len(m2))
	type mmsghdr struct {
		hdr unix.Msghdr
		len uint32
		_   [4]byte
	}
	var msgs [2]mmsghdr
	for i := range msgs {
		msgs[i].hdr.Iov = &iov[i]
		msgs[i].hdr.SetIovlen(1)
	}
	r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[0])), 2, 0, 0, 0)
	if e != 0 || r != 2 || msgs[0].len != uint32(len(m1)) || msgs[1].len != uint32(len(m2)) {
		c.errorf("sendmmsg of 2: %d %v, msg_len %d and %d", r, errName(e), msgs[0].len, msgs[1].len)
	}
	for range 2 {
		recvTimeout(c, fd, "sendmmsg's answers")
	}
	// A sendmmsg of 8 messages of 1024 one-byte iovecs each: what the
	// checker holds of one call is capped (4096 iovecs), so 4 are sent.
	one := []byte("x")
	many := make([]unix.Iovec, uioMaxIOV)
	for i := range many {
		many[i].Base = &one[0]
		many[i].SetLen(1)
	}
	var big [8]mmsghdr
	for i := range big {
		big[i].hdr.Iov = &many[0]
		big[i].hdr.SetIovlen(len(many))
	}
	r, _, e = unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&big[0])), uintptr(len(big)), 0, 0, 0)
	if e != 0 || r != 4 || big[3].len != uioMaxIOV || big[4].len != 0 {
		c.errorf("sendmmsg of 8 messages of %d iovecs: %d %v (msg_len %d, %d), want 4 sent", uioMaxIOV, r, errName(e), big[3].len, big[4].len)
	}
	for range r {
		recvTimeout(c, fd, "the big sendmmsg's answers")
	}
	unix.Close(fd)

	// An unconnected query to port 53 (musl's): refused.
	fd = udpSocket(c)
	want(c, "sendto port 53 on an unconnected socket", rawSendto(fd, []byte("q"), ns), unix.EACCES)
	_, err := unix.SendmsgN(fd, []byte("q"), nil, &unix.SockaddrInet4{Addr: [4]byte{192, 0, 2, 53}, Port: 53}, 0)
	want(c, "sendmsg to port 53 on an unconnected socket", errnoOrZero(err), unix.EACCES)
	// Any other UDP destination: refused, by every call.
	want(c, "sendto another UDP port", rawSendto(fd, []byte("x"), other), unix.EACCES)
	_, err = unix.SendmsgN(fd, []byte("x"), nil, &unix.SockaddrInet4{Addr: lo, Port: dns}, 0)
	want(c, "sendmsg to another UDP port", errnoOrZero(err), unix.EACCES)
	want(c, "connect to another UDP port", rawConnect(fd, other), unix.EACCES)
	// MSG_PROBE runs unchecked, and sends nothing (the test counts); the
	// kernel binds the socket to the any-address as it goes, on the
	// loopback device only.
	_, err = unix.SendmsgN(fd, []byte("probe"), nil, &unix.SockaddrInet4{Addr: lo, Port: dns}, 0x10)
	want(c, "sendmsg with MSG_PROBE", errnoOrZero(err), 0)
	unix.Close(fd)
	// A bind to the any-address is made on loopback.
	fd = udpSocket(c)
	want(c, "bind UDP to 0.0.0.0:0", errnoOrZero(unix.Bind(fd, &unix.SockaddrInet4{})), 0)
	if sa, err := unix.Getsockname(fd); err != nil || sa.(*unix.SockaddrInet4).Addr != lo {
		c.errorf("bound at %v %v, want loopback", sa, err)
	}
	unix.Close(fd)

	// sendmsg on a Unix socket pair with a descriptor: the descriptor the
	// other end gets is the caller's file, not the checker's of the same
	// number.
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		c.fatalf("socketpair: %v", err)
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		c.fatalf("pipe: %v", err)
	}
	if err := unix.Sendmsg(pair[0], []byte("fd"), unix.UnixRights(p[1]), nil, 0); err != nil {
		c.errorf("sendmsg SCM_RIGHTS: %v", err)
	}
	buf, oob := make([]byte, 8), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(pair[1], buf, oob, 0)
	if err != nil || string(buf[:n]) != "fd" {
		c.errorf("recvmsg: %q %v", buf[:n], err)
	} else if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err != nil || len(msgs) != 1 {
		c.errorf("no descriptor came: %v", err)
	} else if fds, err := unix.ParseUnixRights(&msgs[0]); err != nil || len(fds) != 1 {
		c.errorf("no descriptor came: %v", err)
	} else {
		unix.Write(fds[0], []byte("through"))
		got := make([]byte, 16)
		k, _ := unix.Read(p[0], got)
		if string(got[:k]) != "through" {
			c.errorf("the descriptor received is not the pipe sent: read %q from the pipe", got[:k])
		}
	}
	// A descriptor the caller does not have: EBADF, as the kernel says.
	err = unix.Sendmsg(pair[0], []byte("fd"), unix.UnixRights(999), nil, 0)
	want(c, "sendmsg SCM_RIGHTS of a closed descriptor", errnoOrZero(err), unix.EBADF)
}

func TestUDP(t *testing.T) {
	echo := listenUDPEcho(t, "127.0.0.1:0")
	var refusals sync.Map
	pol := Policy{Net: true, TCP: true, DNSUDP: echo.addrPort()}
	pol.Report = func(r Refusal) { refusals.Store(r.Kind+" "+r.Call+" "+r.Addr.String(), true) }
	run(t, "udp", pol, fmt.Sprintf("CORRAL_SOCKCHECK_DNS=%d", echo.addrPort().Port()), childUDP+"=1")
	// q1-q4, the two of sendmmsg and the four of the big one; the probe
	// and the refused sends never came.
	if n := echo.got.Load(); n != 10 {
		t.Errorf("the responder got %d datagrams, want 10", n)
	}
	for _, k := range []string{"dns sendto 192.0.2.53:53", "dns sendmsg 192.0.2.53:53",
		"udp sendto " + echo.addrPort().String(), "udp connect " + echo.addrPort().String()} {
		if _, ok := refusals.Load(k); !ok {
			var got []string
			refusals.Range(func(k, _ any) bool { got = append(got, k.(string)); return true })
			t.Errorf("no refusal %q reported; got %q", k, got)
		}
	}
}

// scenarioBenchUDPDNS times lookups as Go's resolver makes them (a UDP
// socket, a connect to the nameserver, a query written, the answer read,
// the socket closed): first straight to the responder with no filter, then
// to a nameserver's port 53 under the filter, which the checker connects
// to the responder (CORRAL_SOCKCHECK_DNS). It prints "BENCH PLAIN CHECKED
// PLAIN-CONNECT CHECKED-CONNECT PLAIN-SOCKET CHECKED-SOCKET", nanoseconds
// per lookup, per connect and per socket(2).
func scenarioBenchUDPDNS(c *child) {
	n := envInt("N")
	query := make([]byte, 40)
	binary.BigEndian.PutUint16(query, 0x1234)
	buf := make([]byte, 512)
	var connectTime, socketTime time.Duration
	timeLoop := func(ns []byte) time.Duration {
		connectTime, socketTime = 0, 0
		start := time.Now()
		for range n {
			t0 := time.Now()
			fd := udpSocket(c)
			socketTime += time.Since(t0)
			t0 = time.Now()
			if e := rawConnect(fd, ns); e != 0 {
				c.fatalf("connect: %v", errName(e))
			}
			connectTime += time.Since(t0)
			if _, err := unix.Write(fd, query); err != nil {
				c.fatalf("write: %v", err)
			}
			if _, err := unix.Read(fd, buf); err != nil {
				c.fatalf("read: %v", err)
			}
			unix.Close(fd)
		}
		return time.Since(start) / time.Duration(n)
	}
	direct := sockaddr4(lo, envInt("DNS"))
	timeLoop(direct)
	plain := timeLoop(direct)
	plainConnect, plainSocket := connectTime/time.Duration(n), socketTime/time.Duration(n)
	c.install(true)
	ns := sockaddr4([4]byte{192, 0, 2, 53}, 53)
	timeLoop(ns)
	checked := timeLoop(ns)
	fmt.Printf("BENCH %d %d %d %d %d %d\n", plain.Nanoseconds(), checked.Nanoseconds(), plainConnect.Nanoseconds(), (connectTime / time.Duration(n)).Nanoseconds(),
		plainSocket.Nanoseconds(), (socketTime / time.Duration(n)).Nanoseconds())
}

// BenchmarkUDPDNSLookup is what the checker adds to one lookup over UDP
// (Go's resolver, busybox): the socket's connect to port 53 made to the
// responder; the query and the answer then go on the connected socket
// with no check. The goal for a DNS answer is at most 0.2 ms over the
// fixed resolver's own lookup (egress's BenchmarkDNSAnswer is the
// responder's part).
func BenchmarkUDPDNSLookup(b *testing.B) {
	echo := listenUDPEcho(b, "127.0.0.1:0")
	n := max(b.N, 200)
	_, cmd, out := start(b, "bench-udp-dns", Policy{Net: true, TCP: true, DNSUDP: echo.addrPort(), StaticCreds: true},
		fmt.Sprintf("CORRAL_SOCKCHECK_DNS=%d", echo.addrPort().Port()), fmt.Sprintf("CORRAL_SOCKCHECK_N=%d", n), childUDP+"=1")
	if err := cmd.Wait(); err != nil {
		b.Fatalf("bench runner: %v: %s", err, out)
	}
	var plain, checked, plainConnect, checkedConnect, plainSocket, checkedSocket int64
	o := out.String()
	if i := strings.Index(o, "BENCH"); i < 0 {
		b.Fatalf("no figures: %s", o)
	} else if _, err := fmt.Sscanf(o[i:], "BENCH %d %d %d %d %d %d", &plain, &checked, &plainConnect, &checkedConnect, &plainSocket, &checkedSocket); err != nil {
		b.Fatalf("no figures: %s", o)
	}
	b.ReportMetric(float64(plain), "ns/unchecked-lookup")
	b.ReportMetric(float64(checked), "ns/checked-lookup")
	b.ReportMetric(float64(checked-plain), "ns/added")
	b.ReportMetric(float64(checkedConnect-plainConnect), "ns/added-by-connect")
	b.ReportMetric(float64(checkedSocket-plainSocket), "ns/added-by-socket")
}

// scenarioBenchSendmsg times a 100-byte sendmsg on a Unix socket pair
// (IPC, as a browser's processes or GDBus make it), the other end read by
// another thread: before the filter, then under AllowUDP, where every
// sendmsg goes to the checker. It prints "BENCH PLAIN CHECKED".
func scenarioBenchSendmsg(c *child) {
	n := envInt("N")
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		c.fatalf("socketpair: %v", err)
	}
	go func() {
		buf := make([]byte, 64<<10)
		for {
			if _, err := unix.Read(pair[1], buf); err != nil && err != unix.EINTR {
				return
			}
		}
	}()
	msg := make([]byte, 100)
	timeLoop := func() time.Duration {
		start := time.Now()
		for range n {
			if _, err := unix.SendmsgN(pair[0], msg, nil, nil, 0); err != nil {
				c.fatalf("sendmsg: %v", err)
			}
		}
		return time.Since(start) / time.Duration(n)
	}
	timeLoop()
	plain := timeLoop()
	c.install(true)
	timeLoop()
	checked := timeLoop()
	fmt.Printf("BENCH %d %d\n", plain.Nanoseconds(), checked.Nanoseconds())
}

// BenchmarkSendmsgUnderUDP is what a sendmsg with no address costs under
// SocketRules.AllowUDP (subreaper mode under --allow-net), where every
// sendmsg is checked: a Unix socket pair's, here.
func BenchmarkSendmsgUnderUDP(b *testing.B) {
	n := max(b.N, 200)
	_, cmd, out := start(b, "bench-sendmsg", Policy{Net: true, TCP: true, DNSUDP: netip.MustParseAddrPort("127.0.0.1:53"), StaticCreds: true},
		fmt.Sprintf("CORRAL_SOCKCHECK_N=%d", n), childUDP+"=1")
	if err := cmd.Wait(); err != nil {
		b.Fatalf("bench runner: %v: %s", err, out)
	}
	var plain, checked int64
	o := out.String()
	if i := strings.Index(o, "BENCH"); i < 0 {
		b.Fatalf("no figures: %s", o)
	} else if _, err := fmt.Sscanf(o[i:], "BENCH %d %d", &plain, &checked); err != nil {
		b.Fatalf("no figures: %s", o)
	}
	b.ReportMetric(float64(plain), "ns/unchecked-sendmsg")
	b.ReportMetric(float64(checked), "ns/checked-sendmsg")
	b.ReportMetric(float64(checked-plain), "ns/added")
}
