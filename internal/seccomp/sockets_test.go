package seccomp

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/test/int80"
)

func init() {
	scenarios["sockets-none"] = func(c *child) { scenarioSockets(c, false) }
	scenarios["sockets-tcp"] = func(c *child) { scenarioSockets(c, true) }
	scenarios["sockets-inherited"] = scenarioSocketsInherited
	scenarios["sockets-i386"] = scenarioSocketsI386
}

// socketReference says what SocketRules mean, without BPF.
func socketReference(a abi, s *SocketRules, notify bool, d seccompData) uint32 {
	if s == nil || d.arch != a.audit {
		return allow
	}
	nr := uint32(d.nr)
	if a.nrMask != 0 {
		nr &= a.nrMask
	}
	dom, typ, proto := uint32(d.args[0]), uint32(d.args[1])&^(unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC), uint32(d.args[2])
	eacces := retErrno(unix.EACCES)
	switch {
	case nr == a.socket:
		switch {
		case dom == unix.AF_UNIX || dom == unix.AF_NETLINK:
			return allow
		case s.AllowTCP && (dom == unix.AF_INET || dom == unix.AF_INET6) && typ == unix.SOCK_STREAM && (proto == 0 || proto == unix.IPPROTO_TCP):
			return allow
		case s.NotifyInet && notify && (dom == unix.AF_INET || dom == unix.AF_INET6):
			return uint32(unix.SECCOMP_RET_USER_NOTIF)
		}
		return eacces
	case nr == a.socketpair:
		if dom == unix.AF_UNIX {
			return allow
		}
		return eacces
	case a.socketcall != noCall && nr == a.socketcall:
		return eacces
	case nr == a.ioUringSetup:
		return retErrno(unix.ENOSYS)
	}
	return allow
}

// Every entry point of both architectures, against the reference: the
// domains 0-50 with garbage above bit 31, every type with and without the
// flags, and the protocols that matter.
func TestSocketFilterEveryEntryPoint(t *testing.T) {
	const garbage = 0xffffffff00000000
	for _, goarch := range []string{"amd64", "arm64"} {
		for _, rules := range []*SocketRules{nil, {}, {AllowTCP: true}} {
			t.Run(fmt.Sprintf("%s %+v", goarch, rules), func(t *testing.T) {
				prog, err := runnerFilter(goarch, RunnerRules{Sockets: rules})
				if err != nil {
					t.Fatal(err)
				}
				p := platforms[goarch]
				abis := append([]abi{p.native}, p.compat...)
				checked := map[string]int{}
				check := func(a abi, d seccompData) {
					t.Helper()
					want := socketReference(a, rules, false, d)
					if got := mustRun(t, prog, d); got != want {
						t.Fatalf("%s nr %#x args %#x: %s, want %s", a.name, d.nr, d.args[:3], actionString(got), actionString(want))
					}
					checked[actionString(want)]++
				}
				for _, a := range abis {
					nrs := []uint32{a.socket, a.socketpair, a.socketcall, a.ioUringSetup, 0, 1, 42}
					for _, b := range abis { // another entry point's numbers
						nrs = append(nrs, b.socket, b.socketpair, b.socketcall)
					}
					for _, nr := range nrs {
						if nr == noCall {
							continue
						}
						variants := []int32{int32(nr)}
						if a.nrMask != 0 {
							variants = append(variants, int32(nr|x32Bit))
						}
						for _, n := range variants {
							for dom := uint64(0); dom <= 50; dom++ {
								for _, typ := range []uint64{unix.SOCK_STREAM, unix.SOCK_DGRAM, unix.SOCK_RAW, unix.SOCK_SEQPACKET,
									unix.SOCK_STREAM | unix.SOCK_CLOEXEC | unix.SOCK_NONBLOCK, unix.SOCK_STREAM | 0x100, unix.SOCK_STREAM | garbage} {
									for _, proto := range []uint64{0, unix.IPPROTO_TCP, unix.IPPROTO_UDP, unix.IPPROTO_SCTP, unix.IPPROTO_MPTCP, unix.IPPROTO_TCP | garbage} {
										check(a, seccompData{nr: n, arch: a.audit, args: [6]uint64{dom, typ, proto}})
										check(a, seccompData{nr: n, arch: a.audit, args: [6]uint64{dom | garbage, typ, proto}})
									}
								}
							}
						}
					}
				}
				// The terminal rules hold in the combined filter.
				for _, a := range abis {
					for _, nr := range a.ioctl {
						if got := mustRun(t, prog, seccompData{nr: int32(nr), arch: a.audit, args: [6]uint64{3, unix.TIOCSTI}}); got != eperm {
							t.Errorf("%s ioctl TIOCSTI: %s, want EPERM", a.name, actionString(got))
						}
					}
				}
				if rules != nil {
					for _, want := range []string{"allow", "errno EACCES", "errno ENOSYS"} {
						if checked[want] == 0 {
							t.Errorf("no case expected %s: the table tests too little", want)
						}
					}
				}
			})
		}
	}
}

func TestSocketFilterNone(t *testing.T) { runChild(t, "sockets-none", inSession) }

func TestSocketFilterTCP(t *testing.T) { runChild(t, "sockets-tcp", inSession) }

func TestSocketFilterI386(t *testing.T) {
	requireInt80(t)
	runChild(t, "sockets-i386", nil)
}

func installRunner(c *child, r RunnerRules) {
	prog, err := RunnerFilter(r)
	if err != nil {
		c.fatalf("RunnerFilter: %v", err)
	}
	setNoNewPrivs(c)
	if err := InstallOnThread(prog); err != nil {
		c.fatalf("InstallOnThread: %v", err)
	}
}

// socketErr makes socket(2) with full 64-bit arguments and closes what it
// gets.
func socketErr(nr, domain, typ, proto uintptr) unix.Errno {
	fd, _, e := unix.Syscall(nr, domain, typ, proto)
	if e == 0 {
		unix.Close(int(fd))
	}
	return e
}

type sockCase struct {
	name              string
	domain, typ, prot uintptr
}

var (
	inetDenied = []sockCase{
		{"AF_INET SOCK_DGRAM", unix.AF_INET, unix.SOCK_DGRAM, 0},
		{"AF_INET6 SOCK_DGRAM", unix.AF_INET6, unix.SOCK_DGRAM, 0},
		{"AF_INET SOCK_DGRAM IPPROTO_UDP", unix.AF_INET, unix.SOCK_DGRAM | unix.SOCK_CLOEXEC, unix.IPPROTO_UDP},
		{"AF_INET SOCK_RAW ICMP", unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP},
		{"AF_INET SOCK_DGRAM ICMP (ping socket)", unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_ICMP},
		{"AF_INET SOCK_STREAM IPPROTO_SCTP", unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_SCTP},
		{"AF_INET SOCK_STREAM IPPROTO_MPTCP", unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP},
		{"AF_INET6 SOCK_STREAM IPPROTO_MPTCP", unix.AF_INET6, unix.SOCK_STREAM, unix.IPPROTO_MPTCP},
		{"AF_INET SOCK_SEQPACKET", unix.AF_INET, unix.SOCK_SEQPACKET, 0},
		{"AF_PACKET SOCK_RAW", unix.AF_PACKET, unix.SOCK_RAW, 0x0300},
		{"AF_PACKET SOCK_DGRAM", unix.AF_PACKET, unix.SOCK_DGRAM, 0x0300},
		{"AF_VSOCK SOCK_STREAM", unix.AF_VSOCK, unix.SOCK_STREAM, 0},
		{"AF_XDP", unix.AF_XDP, unix.SOCK_RAW, 0},
		{"AF_INET|garbage<<32", unix.AF_INET | garbage, unix.SOCK_DGRAM, 0},
	}
	tcp = []sockCase{
		{"AF_INET SOCK_STREAM", unix.AF_INET, unix.SOCK_STREAM, 0},
		{"AF_INET6 SOCK_STREAM", unix.AF_INET6, unix.SOCK_STREAM, 0},
		{"AF_INET SOCK_STREAM IPPROTO_TCP", unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_TCP},
		{"AF_INET6 SOCK_STREAM|NONBLOCK|CLOEXEC IPPROTO_TCP", unix.AF_INET6, unix.SOCK_STREAM | unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC, unix.IPPROTO_TCP},
		{"AF_INET SOCK_STREAM, garbage<<32 everywhere", unix.AF_INET | garbage, unix.SOCK_STREAM | garbage, unix.IPPROTO_TCP | garbage},
	}
	local = []sockCase{
		{"AF_UNIX SOCK_STREAM", unix.AF_UNIX, unix.SOCK_STREAM, 0},
		{"AF_UNIX SOCK_DGRAM", unix.AF_UNIX, unix.SOCK_DGRAM | unix.SOCK_CLOEXEC, 0},
		{"AF_UNIX SOCK_SEQPACKET", unix.AF_UNIX, unix.SOCK_SEQPACKET, 0},
		{"AF_NETLINK NETLINK_ROUTE", unix.AF_NETLINK, unix.SOCK_RAW | unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE},
		{"AF_NETLINK NETLINK_ROUTE dgram", unix.AF_NETLINK, unix.SOCK_DGRAM, unix.NETLINK_ROUTE},
	}
)

// ioUringSetup calls io_uring_setup(1, &params) and closes the ring.
func ioUringSetup() unix.Errno {
	var params [120]byte // struct io_uring_params
	fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params[0])), 0)
	runtime.KeepAlive(&params)
	if e == 0 {
		unix.Close(int(fd))
	}
	return e
}

func scenarioSockets(c *child, allowTCP bool) {
	// The controls: without the filter these sockets exist here (the
	// ones a kernel may lack or refuse for want of a capability are
	// checked only under the filter, where EACCES can come from nothing
	// else).
	for _, s := range append(append([]sockCase{}, local...), tcp...) {
		if e := socketErr(unix.SYS_SOCKET, s.domain, s.typ, s.prot); e != 0 {
			c.fatalf("%s without a filter: %v", s.name, e)
		}
	}
	if e := socketErr(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_DGRAM, 0); e != 0 {
		c.fatalf("UDP without a filter: %v", e)
	}
	uringBefore := ioUringSetup()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		c.fatalf("listen on loopback: %v", err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Write([]byte("hi"))
			conn.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	p := openPty(c)

	installRunner(c, RunnerRules{Sockets: &SocketRules{AllowTCP: allowTCP}})

	for _, s := range inetDenied {
		if e := socketErr(unix.SYS_SOCKET, s.domain, s.typ, s.prot); e != unix.EACCES {
			c.errorf("%s under the filter: %v, want EACCES", s.name, e)
		}
	}
	for _, s := range tcp {
		e := socketErr(unix.SYS_SOCKET, s.domain, s.typ, s.prot)
		if allowTCP && e != 0 {
			c.errorf("%s with AllowTCP: %v, want a socket", s.name, e)
		}
		if !allowTCP && e != unix.EACCES {
			c.errorf("%s without AllowTCP: %v, want EACCES", s.name, e)
		}
	}
	for _, s := range local {
		if e := socketErr(unix.SYS_SOCKET, s.domain, s.typ, s.prot); e != 0 {
			c.errorf("%s under the filter: %v, want a socket", s.name, e)
		}
	}
	if runtime.GOARCH == "amd64" {
		// x32's socket is x86_64's number with the x32 bit: EACCES from
		// the filter, where the kernel alone says ENOSYS (x32 disabled)
		// or makes the socket.
		if e := socketErr(x32Bit|unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_DGRAM, 0); e != unix.EACCES {
			c.errorf("x32 socket(AF_INET, SOCK_DGRAM): %v, want EACCES", e)
		}
	}

	// A socketpair carries data, as a pipeline of tools needs.
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		c.errorf("socketpair(AF_UNIX) under the filter: %v", err)
	} else {
		buf := make([]byte, 4)
		if _, err := unix.Write(fds[0], []byte("ping")); err != nil {
			c.errorf("write socketpair: %v", err)
		} else if n, err := unix.Read(fds[1], buf); err != nil || string(buf[:n]) != "ping" {
			c.errorf("read socketpair: %q, %v", buf[:n], err)
		}
		unix.Close(fds[0])
		unix.Close(fds[1])
	}
	if _, err := unix.Socketpair(unix.AF_INET, unix.SOCK_STREAM, 0); err != unix.EACCES {
		c.errorf("socketpair(AF_INET) under the filter: %v, want EACCES", err)
	}
	// A netlink socket answers: the runner may still read its interfaces.
	if ifs, err := net.Interfaces(); err != nil || len(ifs) == 0 {
		c.errorf("net.Interfaces (netlink) under the filter: %v, %v", ifs, err)
	}

	conn, err := net.Dial("tcp4", fmt.Sprintf("127.0.0.1:%d", port))
	if allowTCP {
		if err != nil {
			c.errorf("dial a loopback listener with AllowTCP: %v", err)
		} else {
			buf := make([]byte, 2)
			if n, err := conn.Read(buf); err != nil || string(buf[:n]) != "hi" {
				c.errorf("read from the loopback listener: %q, %v", buf[:n], err)
			}
			conn.Close()
		}
		if ln2, err := net.Listen("tcp", "127.0.0.1:0"); err != nil {
			c.errorf("listen with AllowTCP: %v", err)
		} else {
			ln2.Close()
		}
	} else if err == nil || !strings.Contains(err.Error(), "permission denied") {
		c.errorf("dial a loopback listener without AllowTCP: %v, want permission denied", err)
		if conn != nil {
			conn.Close()
		}
	}
	if _, err := net.ListenPacket("udp4", "127.0.0.1:0"); err == nil || !strings.Contains(err.Error(), "permission denied") {
		c.errorf("listen UDP under the filter: %v, want permission denied", err)
	}

	if uringBefore == 0 {
		if e := ioUringSetup(); e != unix.ENOSYS {
			c.errorf("io_uring_setup under the filter: %v, want ENOSYS", e)
		}
	} else if e := ioUringSetup(); e != uringBefore && e != unix.ENOSYS {
		c.errorf("io_uring_setup under the filter: %v (without it: %v), want ENOSYS", e, uringBefore)
	}

	// The terminal rules hold in the one combined filter.
	if e := inject(p.slave, unix.SYS_IOCTL, unix.TIOCSTI, 'x'); e != unix.EPERM {
		c.errorf("TIOCSTI under the combined filter: %v, want EPERM", e)
	}
	expectQueued(c, p, "", "under the combined filter")

	// A process started after the install, through execve, is bound too.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=sockets-inherited")
	if out, err := cmd.CombinedOutput(); err != nil {
		c.errorf("inherited filter: %v: %s", err, strings.TrimSpace(string(out)))
	}
}

func scenarioSocketsInherited(c *child) {
	if e := socketErr(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_DGRAM, 0); e != unix.EACCES {
		c.errorf("UDP in a process started after the install: %v, want EACCES", e)
	}
	if e := socketErr(unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_STREAM, 0); e != 0 {
		c.errorf("AF_UNIX in a process started after the install: %v", e)
	}
}

// scenarioSocketsI386 needs a kernel with the i386 entry point.
func scenarioSocketsI386(c *child) {
	const i386Socket, i386Socketcall = 359, 102
	sock := func(domain, typ uintptr) unix.Errno {
		fd, e := int80.Syscall(i386Socket, domain, typ, 0)
		if e == 0 {
			unix.Close(int(fd))
		}
		return e
	}
	if e := sock(unix.AF_INET, unix.SOCK_DGRAM); e != 0 {
		c.fatalf("i386 socket(AF_INET, SOCK_DGRAM) without a filter: %v", e)
	}
	installRunner(c, RunnerRules{Sockets: &SocketRules{AllowTCP: true}})
	if e := sock(unix.AF_INET, unix.SOCK_DGRAM); e != unix.EACCES {
		c.errorf("i386 socket(AF_INET, SOCK_DGRAM) under the filter: %v, want EACCES", e)
	}
	if e := sock(unix.AF_INET, unix.SOCK_STREAM); e != 0 {
		c.errorf("i386 socket(AF_INET, SOCK_STREAM) with AllowTCP: %v", e)
	}
	if e := sock(unix.AF_UNIX, unix.SOCK_STREAM); e != 0 {
		c.errorf("i386 socket(AF_UNIX) under the filter: %v", e)
	}
	// socketcall(SYS_SOCKET, args): whatever the args, EACCES.
	if _, e := int80.Syscall(i386Socketcall, 1, 0, 0); e != unix.EACCES {
		c.errorf("i386 socketcall under the filter: %v, want EACCES", e)
	}
}
