package sockcheck

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// listenTCP is a listener of the test (the host side), accepting and
// closing, counting what it accepted.
type hostListener struct {
	ln       net.Listener
	accepted atomic.Int64
}

func listenTCP(t *testing.T, addr string) *hostListener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	h := &hostListener{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.accepted.Add(1)
			c.Close()
		}
	}()
	return h
}

func (h *hostListener) port() int { return h.ln.Addr().(*net.TCPAddr).Port }

// listenUnix is a host Unix socket at path, accepting and closing.
func listenUnix(t *testing.T, path string) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
}

func env(k string) string { return os.Getenv("CORRAL_SOCKCHECK_" + k) }

func envInt(k string) int { n, _ := strconv.Atoi(env(k)); return n }

// --- the runner's side -------------------------------------------------

func sockaddr4(a [4]byte, port int) []byte {
	return inetSockaddr(unix.AF_INET, netip.AddrPortFrom(netip.AddrFrom4(a), uint16(port)), 0, 0)
}

// rawConnect connects fd to the raw sockaddr b, on this thread.
func rawConnect(fd int, b []byte) unix.Errno {
	_, _, e := unix.Syscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	return e
}

func tcpSocket(c *child, domain int) int {
	fd, err := unix.Socket(domain, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		c.fatalf("socket: %v", err)
	}
	return fd
}

// connect4 makes a fresh socket, connects it to a:port, closes it.
func connect4(c *child, a [4]byte, port int) unix.Errno {
	fd := tcpSocket(c, unix.AF_INET)
	defer unix.Close(fd)
	return rawConnect(fd, sockaddr4(a, port))
}

func want(c *child, what string, got, want unix.Errno) {
	if got != want {
		c.errorf("%s: %v, want %v", what, errName(got), errName(want))
	}
}

func errName(e unix.Errno) string {
	if e == 0 {
		return "success"
	}
	return unix.ErrnoName(e)
}

func init() {
	scenarios["tcp"] = scenarioTCP
	scenarios["unix"] = scenarioUnix
	scenarios["hide"] = scenarioHide
	scenarios["toctou"] = scenarioTOCTOU
	scenarios["interrupted"] = scenarioInterrupted
	scenarios["blocked"] = scenarioBlocked
	scenarios["waits"] = scenarioWaits
	scenarios["bench"] = scenarioBench
}

var lo = [4]byte{127, 0, 0, 1}

func scenarioTCP(c *child) {
	proxy, host, other := envInt("PROXY"), envInt("HOST"), envInt("OTHER")
	want(c, "connect to the proxy", connect4(c, lo, proxy), 0)
	want(c, "connect to 127.0.0.2 on the proxy's port", connect4(c, [4]byte{127, 0, 0, 2}, proxy), unix.EACCES)
	want(c, "connect to a remote address on the proxy's port", connect4(c, [4]byte{192, 0, 2, 1}, proxy), unix.EACCES)
	want(c, "connect to a --host-port", connect4(c, lo, host), 0)
	want(c, "connect to 127.0.0.2 on a --host-port", connect4(c, [4]byte{127, 0, 0, 2}, host), unix.EACCES)
	want(c, "connect to a host port not allowed", connect4(c, lo, other), unix.EACCES)
	want(c, "connect to 0.0.0.0 on a host port not allowed", connect4(c, [4]byte{}, other), unix.EACCES)
	// IPv6 socket, v4-mapped proxy address.
	fd := tcpSocket(c, unix.AF_INET6)
	mapped := inetSockaddr(unix.AF_INET6, netip.AddrPortFrom(netip.AddrFrom16(netip.AddrFrom4(lo).As16()), uint16(proxy)), 0, 0)
	want(c, "connect to the proxy v4-mapped", rawConnect(fd, mapped), 0)
	unix.Close(fd)
	fd = tcpSocket(c, unix.AF_INET6)
	mapped2 := inetSockaddr(unix.AF_INET6, netip.AddrPortFrom(netip.AddrFrom16(netip.AddrFrom4([4]byte{127, 0, 0, 2}).As16()), uint16(proxy)), 0, 0)
	want(c, "connect to 127.0.0.2 v4-mapped", rawConnect(fd, mapped2), unix.EACCES)
	unix.Close(fd)

	// A server the tree starts: bound on the any-address, made loopback;
	// reachable; another host's view of it is not.
	srv := tcpSocket(c, unix.AF_INET)
	if err := unix.Bind(srv, &unix.SockaddrInet4{}); err != nil {
		c.fatalf("bind 0.0.0.0:0: %v", err)
	}
	sa, _ := unix.Getsockname(srv)
	s4 := sa.(*unix.SockaddrInet4)
	if s4.Addr != lo {
		c.errorf("bind 0.0.0.0 bound %v, want 127.0.0.1", s4.Addr)
	}
	if err := unix.Listen(srv, 8); err != nil {
		c.errorf("listen on a bound socket: %v", err)
	}
	want(c, "connect to a port the tree bound", connect4(c, lo, s4.Port), 0)
	unix.Close(srv)

	// IPv6 any-address: dual-stack → ::ffff:127.0.0.1; v6-only → ::1.
	v6 := tcpSocket(c, unix.AF_INET6)
	unix.SetsockoptInt(v6, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0)
	if err := unix.Bind(v6, &unix.SockaddrInet6{}); err != nil {
		c.errorf("bind [::]:0 dual-stack: %v", err)
	} else if sa, _ := unix.Getsockname(v6); netip.AddrFrom16(sa.(*unix.SockaddrInet6).Addr) != netip.AddrFrom16(netip.AddrFrom4(lo).As16()) {
		c.errorf("bind [::] dual-stack bound %v, want ::ffff:127.0.0.1", sa.(*unix.SockaddrInet6).Addr)
	}
	unix.Close(v6)
	v6 = tcpSocket(c, unix.AF_INET6)
	unix.SetsockoptInt(v6, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1)
	if err := unix.Bind(v6, &unix.SockaddrInet6{}); err != nil {
		c.errorf("bind [::]:0 v6-only: %v", err)
	} else if sa, _ := unix.Getsockname(v6); netip.AddrFrom16(sa.(*unix.SockaddrInet6).Addr) != netip.IPv6Loopback() {
		c.errorf("bind [::] v6-only bound %v, want ::1", sa.(*unix.SockaddrInet6).Addr)
	}
	unix.Close(v6)

	// bind off loopback: refused (the kernel alone says EADDRNOTAVAIL).
	fd = tcpSocket(c, unix.AF_INET)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{192, 0, 2, 1}}); err != unix.EACCES {
		c.errorf("bind 192.0.2.1: %v, want EACCES", err)
	}
	// listen unbound: refused (it would bind the any-address).
	if err := unix.Listen(fd, 1); err != unix.EACCES {
		c.errorf("listen on an unbound socket: %v, want EACCES", err)
	}
	unix.Close(fd)

	// A non-blocking connect: EINPROGRESS (or 0), then connected.
	fd, _ = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	e := rawConnect(fd, sockaddr4(lo, proxy))
	if e != 0 && e != unix.EINPROGRESS {
		c.errorf("non-blocking connect to the proxy: %v", errName(e))
	}
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
	unix.Poll(pfd, 5000)
	if soerr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR); err != nil || soerr != 0 {
		c.errorf("non-blocking connect completed with %v %v", soerr, err)
	}
	if sa, err := unix.Getpeername(fd); err != nil || sa.(*unix.SockaddrInet4).Port != proxy {
		c.errorf("non-blocking connect: peer %v %v", sa, err)
	}
	unix.Close(fd)
	fd, _ = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	want(c, "non-blocking connect to 127.0.0.2", rawConnect(fd, sockaddr4([4]byte{127, 0, 0, 2}, proxy)), unix.EACCES)
	unix.Close(fd)

	// Garbage: a huge addrlen, a bad pointer, a bad fd, a short address.
	fd = tcpSocket(c, unix.AF_INET)
	b := sockaddr4(lo, proxy)
	_, _, e = unix.Syscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), 1<<20)
	want(c, "connect with addrlen 1 MiB", e, unix.EINVAL)
	_, _, e = unix.Syscall(unix.SYS_CONNECT, uintptr(fd), 8, 16)
	want(c, "connect with a bad pointer", e, unix.EFAULT)
	_, _, e = unix.Syscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), 8)
	want(c, "connect with addrlen 8", e, unix.EINVAL)
	_, _, e = unix.Syscall(unix.SYS_CONNECT, 999, uintptr(unsafe.Pointer(&b[0])), 16)
	want(c, "connect on a closed fd", e, unix.EBADF)
	unix.Close(fd)

	// vsock: refused by the filter; a socketpair works.
	if _, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0); err != unix.EACCES {
		c.errorf("socket(AF_VSOCK): %v, want EACCES", err)
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		c.errorf("socketpair: %v", err)
	} else {
		unix.Write(pair[0], []byte("x"))
		buf := make([]byte, 1)
		if n, _ := unix.Read(pair[1], buf); n != 1 {
			c.errorf("socketpair carries nothing")
		}
		unix.Close(pair[0])
		unix.Close(pair[1])
	}
}

func TestTCP(t *testing.T) {
	proxy := listenTCP(t, "127.0.0.1:0")
	fake := listenTCP(t, fmt.Sprintf("127.0.0.2:%d", proxy.port()))
	host := listenTCP(t, "127.0.0.1:0")
	other := listenTCP(t, "127.0.0.1:0")
	var mu sync.Mutex
	var refusals []Refusal
	pol := Policy{Net: true, TCP: true, ProxyAddr: netip.MustParseAddrPort(proxy.ln.Addr().String()),
		HostPorts: []uint16{uint16(host.port())},
		Report:    func(r Refusal) { mu.Lock(); refusals = append(refusals, r); mu.Unlock() }}
	run(t, "tcp", pol, fmt.Sprintf("CORRAL_SOCKCHECK_PROXY=%d", proxy.port()),
		fmt.Sprintf("CORRAL_SOCKCHECK_HOST=%d", host.port()), fmt.Sprintf("CORRAL_SOCKCHECK_OTHER=%d", other.port()))
	if n := fake.accepted.Load(); n != 0 {
		t.Errorf("127.0.0.2 on the proxy's port accepted %d connections", n)
	}
	if n := other.accepted.Load(); n != 0 {
		t.Errorf("a host port not allowed accepted %d connections", n)
	}
	mu.Lock()
	defer mu.Unlock()
	direct := 0
	for _, r := range refusals {
		if r.Direct {
			direct++
			if r.Call != "connect" || r.Kind != "tcp" || !r.Addr.IsValid() {
				t.Errorf("a direct refusal without its destination: %+v", r)
			}
		}
	}
	if direct == 0 {
		t.Errorf("no direct refusal reported: %+v", refusals)
	}
}

func unixConnect(c *child, path string) unix.Errno {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		c.fatalf("socket: %v", err)
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		return err.(unix.Errno)
	}
	return 0
}

func scenarioUnix(c *child) {
	dir := env("DIR")
	want(c, "connect to a host socket", unixConnect(c, filepath.Join(dir, "host.sock")), unix.EACCES)
	want(c, "connect to an --allow-unix socket", unixConnect(c, filepath.Join(dir, "allow.sock")), 0)
	want(c, "connect to a missing socket", unixConnect(c, filepath.Join(dir, "missing.sock")), unix.ENOENT)
	// A symlink to the host socket is the host socket.
	os.Symlink(filepath.Join(dir, "host.sock"), filepath.Join(dir, "link.sock"))
	want(c, "connect through a symlink to a host socket", unixConnect(c, filepath.Join(dir, "link.sock")), unix.EACCES)

	// A server the tree binds, by a relative path from its cwd.
	if err := os.Chdir(dir); err != nil {
		c.fatalf("chdir: %v", err)
	}
	srv, _ := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err := unix.Bind(srv, &unix.SockaddrUnix{Name: "tree.sock"}); err != nil {
		c.fatalf("bind tree.sock: %v", err)
	}
	if err := unix.Listen(srv, 4); err != nil {
		c.errorf("listen tree.sock: %v", err)
	}
	if sa, _ := unix.Getsockname(srv); sa.(*unix.SockaddrUnix).Name != "tree.sock" {
		c.errorf("getsockname of the tree's socket: %q, want the name the runner gave", sa.(*unix.SockaddrUnix).Name)
	}
	want(c, "connect to the tree's socket, relative", unixConnect(c, "tree.sock"), 0)
	want(c, "connect to the tree's socket, absolute", unixConnect(c, filepath.Join(dir, "tree.sock")), 0)
	// Moved away and replaced by the host socket: the inode counts.
	os.Rename("tree.sock", "tree2.sock")
	os.Symlink("host.sock", "tree.sock")
	want(c, "connect to tree.sock now a symlink to the host socket", unixConnect(c, "tree.sock"), unix.EACCES)
	want(c, "connect to the tree's socket, renamed", unixConnect(c, "tree2.sock"), 0)
	unix.Close(srv)

	// Abstract: a name the host bound is refused (IsolateIPC); the tree's
	// own, and the autobind's, work.
	fd, _ := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	err := unix.Connect(fd, &unix.SockaddrUnix{Name: "@" + env("ABSTRACT")})
	want(c, "connect to a host abstract socket", errnoOrZero(err), unix.EACCES)
	unix.Close(fd)
	own, _ := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	name := fmt.Sprintf("corral-sockcheck-tree-%d", os.Getpid())
	if err := unix.Bind(own, &unix.SockaddrUnix{Name: "@" + name}); err != nil {
		c.errorf("bind abstract: %v", err)
	}
	unix.Listen(own, 4)
	fd, _ = unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	want(c, "connect to the tree's abstract socket", errnoOrZero(unix.Connect(fd, &unix.SockaddrUnix{Name: "@" + name})), 0)
	unix.Close(fd)
	unix.Close(own)
	auto, _ := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	family := []byte{unix.AF_UNIX & 0xff, unix.AF_UNIX >> 8}
	if _, _, e := unix.Syscall(unix.SYS_BIND, uintptr(auto), uintptr(unsafe.Pointer(&family[0])), 2); e != 0 { // the autobind
		c.errorf("bind with only the family (autobind): %v", e)
	}
	if err := unix.Listen(auto, 4); err != nil {
		c.errorf("listen on the autobound socket: %v", err)
	}
	sa, _ := unix.Getsockname(auto)
	fd, _ = unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	want(c, "connect to the tree's autobound socket", errnoOrZero(unix.Connect(fd, sa)), 0)
	unix.Close(fd)
	unix.Close(auto)

	// sendto a host datagram socket: refused; to the tree's own: sent.
	d, _ := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	err = unix.Sendto(d, []byte("x"), 0, &unix.SockaddrUnix{Name: filepath.Join(dir, "host.dgram")})
	want(c, "sendto a host datagram socket", errnoOrZero(err), unix.EACCES)
	rcv, _ := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err := unix.Bind(rcv, &unix.SockaddrUnix{Name: "own.dgram"}); err != nil {
		c.errorf("bind own.dgram: %v", err)
	}
	err = unix.Sendto(d, []byte("hello"), 0, &unix.SockaddrUnix{Name: "own.dgram"})
	want(c, "sendto the tree's datagram socket", errnoOrZero(err), 0)
	buf := make([]byte, 16)
	if n, _, err := unix.Recvfrom(rcv, buf, unix.MSG_DONTWAIT); err != nil || string(buf[:max(n, 0)]) != "hello" {
		c.errorf("the datagram sent: %q %v", buf[:max(n, 0)], err)
	}
	unix.Close(d)
	unix.Close(rcv)

	// socketpair and vsock.
	if p, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0); err != nil {
		c.errorf("socketpair: %v", err)
	} else {
		unix.Close(p[0])
		unix.Close(p[1])
	}
	if _, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0); err != unix.EACCES {
		c.errorf("socket(AF_VSOCK): %v, want EACCES", err)
	}
}

func errnoOrZero(err error) unix.Errno {
	if err == nil {
		return 0
	}
	if e, ok := err.(unix.Errno); ok {
		return e
	}
	return unix.EIO
}

func TestUnix(t *testing.T) {
	dir := t.TempDir()
	listenUnix(t, filepath.Join(dir, "host.sock"))
	listenUnix(t, filepath.Join(dir, "allow.sock"))
	hd, err := net.ListenPacket("unixgram", filepath.Join(dir, "host.dgram"))
	if err != nil {
		t.Fatal(err)
	}
	defer hd.Close()
	abstract := fmt.Sprintf("corral-sockcheck-host-%d", os.Getpid())
	la, err := net.Listen("unix", "@"+abstract)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Close()
	var refused atomic.Int64
	pol := Policy{Net: true, AllowUnix: []string{filepath.Join(dir, "allow.sock")}, IsolateIPC: true,
		Report: func(Refusal) { refused.Add(1) }}
	run(t, "unix", pol, "CORRAL_SOCKCHECK_DIR="+dir, "CORRAL_SOCKCHECK_ABSTRACT="+abstract)
	hd.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	if n, _, err := hd.ReadFrom(make([]byte, 16)); err == nil {
		t.Errorf("the host datagram socket got %d bytes", n)
	}
	if refused.Load() == 0 {
		t.Error("no refusal reported")
	}
}

func scenarioHide(c *child) {
	dir := env("DIR")
	want(c, "connect to a host socket without a network policy", unixConnect(c, filepath.Join(dir, "host.sock")), 0)
	want(c, "connect to a socket beneath --hide", unixConnect(c, filepath.Join(dir, "hidden", "h.sock")), unix.EACCES)
	want(c, "connect to a socket beneath --hide, relative", unixConnect(c, filepath.Join(dir, "hidden", "..", "hidden", "h.sock")), unix.EACCES)
	os.Symlink(filepath.Join(dir, "hidden", "h.sock"), filepath.Join(dir, "h-link.sock"))
	want(c, "connect through a symlink into --hide", unixConnect(c, filepath.Join(dir, "h-link.sock")), unix.EACCES)
	fd, _ := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	want(c, "bind beneath --hide", errnoOrZero(unix.Bind(fd, &unix.SockaddrUnix{Name: filepath.Join(dir, "hidden", "new.sock")})), unix.EACCES)
	unix.Close(fd)
	// No network policy: TCP anywhere and vsock stay the kernel's.
	want(c, "connect to a host TCP port without a network policy", connect4(c, lo, envInt("PORT")), 0)
}

func TestHide(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "hidden"), 0o755)
	listenUnix(t, filepath.Join(dir, "host.sock"))
	listenUnix(t, filepath.Join(dir, "hidden", "h.sock"))
	port := listenTCP(t, "127.0.0.1:0")
	run(t, "hide", Policy{Hide: []string{filepath.Join(dir, "hidden")}}, "CORRAL_SOCKCHECK_DIR="+dir,
		fmt.Sprintf("CORRAL_SOCKCHECK_PORT=%d", port.port()))
	if _, err := os.Lstat(filepath.Join(dir, "hidden", "new.sock")); err == nil {
		t.Error("a socket was bound beneath --hide")
	}
}

// scenarioTOCTOU: another thread flips the sockaddr between the proxy's
// address and 127.0.0.2 on the same port while this thread connects.
func scenarioTOCTOU(c *child) {
	proxy := envInt("PROXY")
	good, bad := sockaddr4(lo, proxy), sockaddr4([4]byte{127, 0, 0, 2}, proxy)
	sa := make([]byte, len(good))
	copy(sa, good)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // an unlocked goroutine: another thread
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			src := good
			if i&1 == 1 {
				src = bad
			}
			for j := range sa {
				*(*byte)(unsafe.Pointer(&sa[j])) = src[j]
			}
		}
	}()
	ok, refused := 0, 0
	for range 1500 {
		fd := tcpSocket(c, unix.AF_INET)
		e := rawConnect(fd, sa)
		switch e {
		case 0:
			ok++
			if p, err := unix.Getpeername(fd); err == nil && p.(*unix.SockaddrInet4).Addr != lo {
				c.errorf("connected to %v", p.(*unix.SockaddrInet4).Addr)
			}
		case unix.EACCES:
			refused++
		default:
			c.errorf("connect: %v", errName(e))
		}
		unix.Close(fd)
	}
	stop.Store(true)
	wg.Wait()
	fmt.Printf("allowed %d refused %d\n", ok, refused)
}

func TestTOCTOU(t *testing.T) {
	proxy := listenTCP(t, "127.0.0.1:0")
	fake := listenTCP(t, fmt.Sprintf("127.0.0.2:%d", proxy.port()))
	pol := Policy{Net: true, TCP: true, ProxyAddr: netip.MustParseAddrPort(proxy.ln.Addr().String())}
	run(t, "toctou", pol, fmt.Sprintf("CORRAL_SOCKCHECK_PROXY=%d", proxy.port()))
	// Let the accept loops catch up.
	time.Sleep(50 * time.Millisecond)
	if n := fake.accepted.Load(); n != 0 {
		t.Errorf("127.0.0.2 accepted %d connections: a rewritten sockaddr reached the kernel", n)
	}
	if proxy.accepted.Load() == 0 {
		t.Error("the proxy accepted nothing: the test proves nothing")
	}
}

// fullBacklog makes a tree-bound Unix listener whose backlog is full: the
// next blocking connect to it waits. It returns the listener and the
// connection that fills it.
func fullBacklog(c *child, path string) (int, int) {
	srv, _ := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err := unix.Bind(srv, &unix.SockaddrUnix{Name: path}); err != nil {
		c.fatalf("bind %s: %v", path, err)
	}
	if err := unix.Listen(srv, 0); err != nil {
		c.fatalf("listen: %v", err)
	}
	fill, _ := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err := unix.Connect(fill, &unix.SockaddrUnix{Name: path}); err != nil {
		c.fatalf("fill the backlog: %v", err)
	}
	return srv, fill
}

// scenarioInterrupted: a blocking connect waits on a full backlog while
// signals (SA_RESTART, as Go installs its handlers) hit the thread: each
// kills the notification, the call comes again; once the backlog has
// room, the connect succeeds.
func scenarioInterrupted(c *child) {
	path := filepath.Join(env("DIR"), "full.sock")
	srv, fill := fullBacklog(c, path)
	defer unix.Close(fill)
	sigs := make(chan os.Signal, 64)
	signalNotify(sigs)
	tid := unix.Gettid()
	go func() {
		for range 10 {
			time.Sleep(30 * time.Millisecond)
			unix.Tgkill(unix.Getpid(), tid, unix.SIGUSR1)
		}
		time.Sleep(50 * time.Millisecond)
		if nfd, _, err := unix.Accept(srv); err == nil { // room in the backlog
			unix.Close(nfd)
		}
	}()
	start := time.Now()
	want(c, "a blocking connect interrupted by signals", unixConnect(c, path), 0)
	if d := time.Since(start); d < 300*time.Millisecond {
		c.errorf("the connect returned after %v, before the backlog had room", d)
	}
	if len(sigs) == 0 {
		c.errorf("no signal arrived")
	}
}

func TestInterrupted(t *testing.T) {
	ck := run(t, "interrupted", Policy{Net: true}, "CORRAL_SOCKCHECK_DIR="+t.TempDir())
	// Each signal ends a notification; the restarted call takes the
	// connect under way over.
	if a := ck.stats.adopted.Load(); a == 0 {
		t.Errorf("no restarted call took the connect over: the signals did not interrupt the wait (received %d, gone %d)",
			ck.stats.received.Load(), ck.stats.gone.Load())
	}
}

// scenarioBlocked: a blocking connect that never completes; the test
// kills the runner meanwhile.
func scenarioBlocked(c *child) {
	path := filepath.Join(env("DIR"), "full.sock")
	srv, fill := fullBacklog(c, path)
	defer unix.Close(srv)
	defer unix.Close(fill)
	os.WriteFile(filepath.Join(env("DIR"), "ready"), nil, 0o600)
	unixConnect(c, path)
	c.errorf("the connect returned")
}

func TestRunnerKilledMidCall(t *testing.T) {
	dir := t.TempDir()
	ck, cmd, out := start(t, "blocked", Policy{Net: true, Workers: 1}, "CORRAL_SOCKCHECK_DIR="+dir)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the runner never got ready: %s", out)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // in the connect, in the worker
	if ck.stats.received.Load() < 3 {
		t.Errorf("only %d notifications: the connect is not waiting in the checker", ck.stats.received.Load())
	}
	cmd.Process.Kill()
	cmd.Wait()
	select {
	case <-ck.Done():
	case <-time.After(5 * time.Second):
		t.Error("the checker still serves a filter whose threads are all gone")
	}
	closeChecker(t, ck) // the one worker is free again
}

func signalNotify(ch chan os.Signal) { signal.Notify(ch, unix.SIGUSR1) }

// scenarioBench times connects to the proxy without and with the filter,
// N of each, in turns (one of each per round, starting with the other
// each round), so that the machine's load weighs on both alike: the
// unchecked ones on a thread of their own, locked before the filter goes
// on the main thread (a filter without TSYNC is its thread's alone), the
// checked ones on the main thread. It prints "BENCH PLAIN CHECKED", the
// median nanoseconds of one connect each way. (One way's loop after the
// other's compared moments of the machine: it once printed a checked
// connect 84 µs faster than an unchecked one.)
func scenarioBench(c *child) {
	proxy, n := envInt("PROXY"), envInt("N")
	nonblocking := env("NONBLOCK") != ""
	connect := func() time.Duration {
		start := time.Now()
		if !nonblocking {
			if e := connect4(c, lo, proxy); e != 0 {
				c.fatalf("connect: %v", errName(e))
			}
			return time.Since(start)
		}
		fd, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if e := rawConnect(fd, sockaddr4(lo, proxy)); e != 0 && e != unix.EINPROGRESS {
			c.fatalf("connect: %v", errName(e))
		}
		d := time.Since(start)
		unix.Close(fd)
		return d
	}
	asks, times := make(chan struct{}), make(chan time.Duration)
	go func() {
		runtime.LockOSThread() // never unlocked: this thread never gets the filter
		for range asks {
			times <- connect()
		}
	}()
	plain := func() time.Duration { asks <- struct{}{}; return <-times }
	plain() // a warm-up; its thread is locked before the filter goes on
	c.install(true)
	connect()
	var plains, checkeds []time.Duration
	for i := range n {
		if i%2 == 0 {
			plains, checkeds = append(plains, plain()), append(checkeds, connect())
		} else {
			checkeds, plains = append(checkeds, connect()), append(plains, plain())
		}
	}
	close(asks)
	median := func(v []time.Duration) time.Duration { slices.Sort(v); return v[len(v)/2] }
	fmt.Printf("BENCH %d %d\n", median(plains).Nanoseconds(), median(checkeds).Nanoseconds())
}

func BenchmarkCheckedConnect(b *testing.B) { benchConnect(b, "") }

// A non-blocking connect, as Go, curl, Node and asyncio make them.
func BenchmarkCheckedConnectNonblocking(b *testing.B) { benchConnect(b, "CORRAL_SOCKCHECK_NONBLOCK=1") }

func benchConnect(b *testing.B, extra string) {
	proxyLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer proxyLn.Close()
	go func() {
		for {
			c, err := proxyLn.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := proxyLn.Addr().(*net.TCPAddr).Port
	n := max(b.N, 200)
	cpu := checkerCPU()
	out := benchRun(b, Policy{Net: true, TCP: true, ProxyAddr: netip.MustParseAddrPort(proxyLn.Addr().String()), StaticCreds: true},
		fmt.Sprintf("CORRAL_SOCKCHECK_PROXY=%d", port), fmt.Sprintf("CORRAL_SOCKCHECK_N=%d", n), extra)
	b.ReportMetric(float64(checkerCPU()-cpu)/float64(n+1), "checker-cpu-ns/call")
	var plain, checked int64
	if _, err := fmt.Sscanf(out[strings.Index(out, "BENCH"):], "BENCH %d %d", &plain, &checked); err != nil {
		b.Fatalf("no figures: %s", out)
	}
	b.ReportMetric(float64(plain), "ns/unchecked-connect")
	b.ReportMetric(float64(checked), "ns/checked-connect")
	b.ReportMetric(float64(checked-plain), "ns/added")
}

func benchRun(b *testing.B, pol Policy, env ...string) string {
	_, cmd, out := start(b, "bench", pol, env...)
	if err := cmd.Wait(); err != nil {
		b.Fatalf("bench runner: %v: %s", err, out)
	}
	return out.String()
}

// scenarioWaits: a blocking connect waits on a full backlog, which gets
// room after 800 ms; meanwhile the test signals every thread of the
// checker's process.
func scenarioWaits(c *child) {
	path := filepath.Join(env("DIR"), "full.sock")
	srv, fill := fullBacklog(c, path)
	defer unix.Close(fill)
	go func() {
		time.Sleep(800 * time.Millisecond)
		if nfd, _, err := unix.Accept(srv); err == nil { // room in the backlog
			unix.Close(nfd)
		}
	}()
	os.WriteFile(filepath.Join(env("DIR"), "ready"), nil, 0o600)
	want(c, "a blocking connect while the checker's threads take signals", unixConnect(c, path), 0)
}

// A signal to the checker's own process (a SIGCHLD of the engine, the Go
// runtime's own) interrupts the worker's connect with EINTR: that is not
// the caller's interruption, and the caller's connect goes on to succeed.
func TestWorkerSignalsAreNotTheCallers(t *testing.T) {
	dir := t.TempDir()
	sigs := make(chan os.Signal, 1024)
	signal.Notify(sigs, unix.SIGUSR2)
	defer signal.Stop(sigs)
	ck, cmd, out := start(t, "waits", Policy{Net: true, Workers: 1}, "CORRAL_SOCKCHECK_DIR="+dir)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	sent := 0
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("the runner: %v\n%s", err, out)
			}
			if sent == 0 {
				t.Fatal("no signal was sent")
			}
			closeChecker(t, ck)
			return
		case <-tick.C:
			tasks, _ := os.ReadDir("/proc/self/task")
			for _, task := range tasks {
				if tid, err := strconv.Atoi(task.Name()); err == nil {
					unix.Tgkill(os.Getpid(), tid, unix.SIGUSR2)
					sent++
				}
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the runner did not finish: %s", out)
		}
	}
}
