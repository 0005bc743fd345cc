package seccomp

import (
	"fmt"
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func init() {
	scenarios["notify"] = scenarioNotify
}

const notifyRet = uint32(unix.SECCOMP_RET_USER_NOTIF)

// notifyReference says what DenyVsock and NotifyAddresses mean, without
// BPF, on top of socketReference.
func notifyReference(a abi, r RunnerRules, d seccompData) uint32 {
	if d.arch != a.audit {
		return allow
	}
	nr := uint32(d.nr)
	if a.nrMask != 0 {
		nr &= a.nrMask
	}
	eacces := retErrno(unix.EACCES)
	if r.NotifyAddresses {
		switch {
		case nr == a.connect || nr == a.bind || nr == a.listen:
			return notifyRet
		case nr == a.sendto:
			if d.args[4] != 0 {
				return notifyRet
			}
			return allow
		case a.socketcall != noCall && nr == a.socketcall:
			return eacces
		case nr == a.ioUringSetup:
			return retErrno(unix.ENOSYS)
		}
		for _, n := range a.sendmsg {
			if nr == n {
				if uint32(d.args[2])&unix.MSG_FASTOPEN != 0 {
					return eacces
				}
				return allow
			}
		}
		for _, n := range a.sendmmsg {
			if nr == n {
				if uint32(d.args[3])&unix.MSG_FASTOPEN != 0 {
					return eacces
				}
				return allow
			}
		}
	}
	if r.DenyVsock && nr == a.socket && uint32(d.args[0]) == unix.AF_VSOCK {
		return eacces
	}
	return socketReference(a, r.Sockets, r.NotifyAddresses, d)
}

func TestNotifyFilterEveryEntryPoint(t *testing.T) {
	const garbage = 0xffffffff00000000
	for _, goarch := range []string{"amd64", "arm64"} {
		for _, r := range []RunnerRules{
			{NotifyAddresses: true},
			{DenyVsock: true},
			{DenyVsock: true, NotifyAddresses: true},
			{Sockets: &SocketRules{AllowTCP: true}, DenyVsock: true, NotifyAddresses: true},
			{Sockets: &SocketRules{}, NotifyAddresses: true},
			{Sockets: &SocketRules{NotifyInet: true}, DenyVsock: true, NotifyAddresses: true},
			{Sockets: &SocketRules{AllowTCP: true, NotifyInet: true}, DenyVsock: true, NotifyAddresses: true},
			{Sockets: &SocketRules{NotifyInet: true}},
		} {
			t.Run(fmt.Sprintf("%s %+v", goarch, r), func(t *testing.T) {
				prog, err := runnerFilter(goarch, r)
				if err != nil {
					t.Fatal(err)
				}
				p := platforms[goarch]
				abis := append([]abi{p.native}, p.compat...)
				seen := map[string]int{}
				for _, a := range abis {
					var nrs []uint32
					for _, b := range abis {
						nrs = append(nrs, b.socket, b.socketpair, b.socketcall, b.connect, b.bind, b.listen, b.sendto, b.ioUringSetup, 0, 1, 45)
						nrs = append(nrs, b.sendmsg...)
						nrs = append(nrs, b.sendmmsg...)
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
							for _, args := range [][6]uint64{
								{}, {unix.AF_VSOCK, unix.SOCK_STREAM}, {unix.AF_VSOCK | garbage, unix.SOCK_STREAM},
								{unix.AF_INET, unix.SOCK_STREAM}, {unix.AF_UNIX, unix.SOCK_STREAM},
								{3, 0x1000, 16, 0, 0, 0}, {3, 0x1000, 16, 0, 0x2000, 16}, {3, 0x1000, 16, 0, garbage, 16},
								{3, 0x1000, unix.MSG_FASTOPEN, 0}, {3, 0x1000, 2, unix.MSG_FASTOPEN}, {3, 0x1000, unix.MSG_NOSIGNAL, unix.MSG_DONTWAIT},
							} {
								d := seccompData{nr: n, arch: a.audit, args: args}
								want := notifyReference(a, r, d)
								if got := mustRun(t, prog, d); got != want {
									t.Fatalf("%s nr %#x args %#x: %s, want %s", a.name, d.nr, d.args, actionString(got), actionString(want))
								}
								seen[actionString(want)]++
							}
						}
					}
					for _, nr := range a.ioctl {
						if got := mustRun(t, prog, seccompData{nr: int32(nr), arch: a.audit, args: [6]uint64{3, unix.TIOCSTI}}); got != eperm {
							t.Errorf("%s ioctl TIOCSTI: %s, want EPERM", a.name, actionString(got))
						}
					}
				}
				if r.NotifyAddresses && seen[actionString(notifyRet)] == 0 {
					t.Error("no case expected a notification")
				}
				if seen["errno EACCES"] == 0 {
					t.Error("no case expected EACCES")
				}
			})
		}
	}
}

func TestNotifyKernel(t *testing.T) { runChild(t, "notify", nil) }

func TestProbeNotify(t *testing.T) {
	st, err := Probe()
	if err != nil {
		t.Fatal(err)
	}
	if m := st.NotifyMissing(); m != "" {
		missingFeature(t, "missing: "+m)
	}
}

// What is missing is named for what it is: a profile that refuses
// pidfd_open is not told to be missing pidfd_getfd.
func TestNotifyMissingNamesTheCall(t *testing.T) {
	for _, c := range []struct {
		st   Status
		want string
	}{
		{Status{UserNotif: true, ProcessVMReadv: true}, "pidfd_open (Linux 5.3)"},
		{Status{UserNotif: true, ProcessVMReadv: true, PidfdOpen: true}, "pidfd_getfd (Linux 5.6)"},
		{Status{UserNotif: true, ProcessVMReadv: true, PidfdOpen: true, PidfdGetfd: true}, ""},
	} {
		if got := c.st.NotifyMissing(); got != c.want {
			t.Errorf("%+v: NotifyMissing() = %q; want %q", c.st, got, c.want)
		}
	}
}

// scenarioNotify installs a notifying filter on this thread and answers its
// calls from another: the listener, an errno, a value, a vanished
// notification, the caller's memory and fd.
func scenarioNotify(c *child) {
	st, err := Probe()
	if err != nil {
		c.missingFeature("seccomp: %v", err)
	}
	if m := st.NotifyMissing(); m != "" {
		c.missingFeature("missing: %s", m)
	}
	prog, err := RunnerFilter(RunnerRules{NotifyAddresses: true, DenyVsock: true})
	if err != nil {
		c.fatalf("RunnerFilter: %v", err)
	}
	setNoNewPrivs(c)
	listener, err := InstallWithListener(prog)
	if err != nil {
		c.fatalf("InstallWithListener: %v", err)
	}
	defer unix.Close(listener)
	if fl, err := unix.FcntlInt(uintptr(listener), unix.F_GETFD, 0); err != nil || fl&unix.FD_CLOEXEC == 0 {
		c.errorf("listener fd flags %#x, %v: want close-on-exec", fl, err)
	}
	if fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0); err != unix.EACCES {
		c.errorf("socket(AF_VSOCK): %d, %v, want EACCES", fd, err)
		if err == nil {
			unix.Close(fd)
		}
	}
	sock, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		c.fatalf("socket: %v", err)
	}
	defer unix.Close(sock)

	type answer struct {
		n   Notif
		err error
	}
	got := make(chan answer, 1)
	// The supervisor, on another thread (this one is locked and
	// filtered): read the sockaddr, dup the fd, answer.
	serve := func(reply func(n Notif) (int64, unix.Errno)) {
		go func() {
			var n Notif
			err := Receive(listener, &n)
			if err == nil {
				val, e := reply(n)
				err = Respond(listener, n.ID, val, e)
			}
			got <- answer{n, err}
		}()
	}

	sa := [16]byte{unix.AF_INET, 0, 0x1f, 0x90, 127, 0, 0, 2} // 127.0.0.2:8080
	var readBack [16]byte
	var dupKind int
	serve(func(n Notif) (int64, unix.Errno) {
		if k, err := ReadMemory(int(n.Pid), n.Data.Args[1], readBack[:]); err != nil || k != 16 {
			return 0, unix.EIO
		}
		if !IDValid(listener, n.ID) {
			return 0, unix.EIO
		}
		pfd, err := OpenPidfd(int(n.Pid))
		if err != nil {
			return 0, unix.EIO
		}
		defer unix.Close(pfd)
		dup, err := GetFD(pfd, int(n.Data.Args[0]))
		if err != nil {
			return 0, unix.EIO
		}
		dupKind, _ = unix.GetsockoptInt(dup, unix.SOL_SOCKET, unix.SO_DOMAIN)
		unix.Close(dup)
		return 0, unix.EHOSTUNREACH
	})
	_, _, e := unix.Syscall(unix.SYS_CONNECT, uintptr(sock), uintptr(unsafe.Pointer(&sa[0])), 16)
	runtime.KeepAlive(&sa)
	a := <-got
	if a.err != nil {
		c.errorf("supervisor: %v", a.err)
	}
	if e != unix.EHOSTUNREACH {
		c.errorf("connect answered EHOSTUNREACH: got %v", e)
	}
	if readBack != sa {
		c.errorf("ReadMemory: %x, want %x", readBack, sa)
	}
	if dupKind != unix.AF_INET {
		c.errorf("the dup'd socket's domain: %d, want AF_INET", dupKind)
	}
	if a.n.Pid != uint32(unix.Gettid()) {
		c.errorf("notification pid %d, want this thread %d", a.n.Pid, unix.Gettid())
	}
	if a.n.Data.Args[2] != 16 {
		c.errorf("addrlen %d", a.n.Data.Args[2])
	}

	// A value: listen "returns" 7.
	serve(func(n Notif) (int64, unix.Errno) { return 7, 0 })
	r, _, e := unix.Syscall(unix.SYS_LISTEN, uintptr(sock), 1, 0)
	if a := <-got; a.err != nil || r != 7 || e != 0 {
		c.errorf("listen answered 7: %d, %v (supervisor %v)", r, e, a.err)
	}

	// sendto without an address is not notified; with one it is.
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		c.fatalf("socketpair: %v", err)
	}
	if err := unix.Sendto(fds[0], []byte("x"), 0, nil); err != nil {
		c.errorf("sendto without an address: %v", err)
	}
	serve(func(n Notif) (int64, unix.Errno) { return 0, unix.EPERM })
	if err := unix.Sendto(fds[0], []byte("x"), 0, &unix.SockaddrUnix{Name: "/nonexistent"}); err != unix.EPERM {
		c.errorf("sendto with an address: %v, want EPERM from the supervisor", err)
	}
	<-got
	unix.Close(fds[0])
	unix.Close(fds[1])
	// sendmsg with MSG_FASTOPEN fails; without, it is left alone.
	if err := unix.Sendmsg(sock, []byte("x"), nil, nil, unix.MSG_FASTOPEN); err != unix.EACCES {
		c.errorf("sendmsg MSG_FASTOPEN: %v, want EACCES", err)
	}

	// An answer to a notification nobody waits for is ErrGone (the
	// interrupted caller is in sandbox/internal/sockcheck's tests).
	if err := Respond(listener, a.n.ID+1000, 0, 0); err != ErrGone {
		c.errorf("Respond to an id never issued: %v, want ErrGone", err)
	}
	if IDValid(listener, a.n.ID) {
		c.errorf("an answered notification is still valid")
	}
	if ready, hup, err := Readable(listener); err != nil || ready || hup {
		c.errorf("Readable with nothing pending: %v %v %v", ready, hup, err)
	}
}
