package seccomp

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/test/int80"
)

func init() {
	scenarios["terminal"] = scenarioTerminal
	scenarios["terminal-inherited"] = scenarioTerminalInherited
	scenarios["terminal-i386"] = scenarioTerminalI386
	scenarios["int80-probe"] = scenarioInt80Probe
	scenarios["rules"] = scenarioRules
	scenarios["needs-nnp"] = scenarioNeedsNoNewPrivs
}

// inSession makes the child a session leader, so the pty it opens can become
// its controlling terminal: TIOCSTI then works without CAP_SYS_ADMIN, and
// the control half of each scenario proves the kernel honours it.
func inSession(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} }

func TestDenyTerminalInjection(t *testing.T) { runChild(t, "terminal", inSession) }

func TestDenyTerminalInjectionI386(t *testing.T) {
	requireInt80(t)
	runChild(t, "terminal-i386", inSession)
}

// requireInt80 skips a test of the i386 entry point where the kernel has
// none, found by making one i386 call in a throwaway child: without the
// entry point int $0x80 is a fault that ends the process. This skip holds
// under CI=true too: such a kernel has no i386 entry point to attack, so
// there is nothing for a filter to cover and nothing corral needs from it.
func requireInt80(t *testing.T) {
	t.Helper()
	if !int80.Supported {
		t.Skipf("%s has no int $0x80 entry point", runtime.GOARCH)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=int80-probe", "GORACE=atexit_sleep_ms=0")
	out, err := cmd.CombinedOutput()
	if err == nil {
		return
	}
	if ee, ok := err.(*exec.ExitError); ok {
		if ee.ExitCode() == exitMissing {
			t.Skipf("%s: no attack surface there to filter", strings.TrimSpace(string(out)))
		}
	}
	t.Fatalf("int $0x80 probe: %v\n%s", err, out)
}

func TestBuildInstalled(t *testing.T) { runChild(t, "rules", nil) }

func TestInstallNeedsNoNewPrivs(t *testing.T) { runChild(t, "needs-nnp", nil) }

func TestProbe(t *testing.T) {
	st, err := Probe()
	if err != nil {
		t.Fatalf("Probe: %v (this kernel has seccomp filters)", err)
	}
	if st.Filters < 0 {
		t.Errorf("Filters = %d: Linux 6.18 reports Seccomp_filters", st.Filters)
	}
}

// pty is a pseudo-terminal in non-canonical mode with echo on, so a byte
// that reaches its input queue is readable on the slave at once and echoed
// to the master.
type pty struct{ master, slave int }

func openPty(c *child) pty {
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		c.missingFeature("open /dev/ptmx: %v", err)
	}
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		c.fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(m, unix.TIOCGPTN)
	if err != nil {
		c.fatalf("TIOCGPTN: %v", err)
	}
	s, err := unix.Open(fmt.Sprintf("/dev/pts/%d", n), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		c.fatalf("open pts %d: %v", n, err)
	}
	if err := unix.IoctlSetInt(s, unix.TIOCSCTTY, 0); err != nil {
		c.fatalf("TIOCSCTTY: %v", err)
	}
	tio, err := unix.IoctlGetTermios(s, unix.TCGETS)
	if err != nil {
		c.fatalf("TCGETS: %v", err)
	}
	tio.Lflag &^= unix.ICANON | unix.ISIG | unix.IEXTEN
	tio.Lflag |= unix.ECHO
	tio.Iflag &^= unix.ICRNL | unix.IXON | unix.ISTRIP
	tio.Oflag &^= unix.OPOST
	tio.Cc[unix.VMIN], tio.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(s, unix.TCSETS, tio); err != nil {
		c.fatalf("TCSETS: %v", err)
	}
	return pty{m, s}
}

// inject calls ioctl(fd, req, &b) with req passed as a full 64-bit word.
func inject(fd int, nr, req uintptr, b byte) unix.Errno {
	_, _, e := unix.Syscall(nr, uintptr(fd), req, uintptr(unsafe.Pointer(&b)))
	runtime.KeepAlive(&b)
	return e
}

// readUntil reads fd until sentinel arrives and returns what came before it.
func readUntil(c *child, fd int, sentinel byte) []byte {
	var got []byte
	deadline := time.Now().Add(10 * time.Second)
	buf := make([]byte, 64)
	for time.Now().Before(deadline) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 1000)
		if err == unix.EINTR || n == 0 {
			continue
		}
		if err != nil {
			c.fatalf("poll: %v", err)
		}
		n, err = unix.Read(fd, buf)
		if err != nil {
			c.fatalf("read pty: %v", err)
		}
		for _, b := range buf[:n] {
			if b == sentinel {
				return got
			}
			got = append(got, b)
		}
	}
	c.fatalf("sentinel %q not seen within 10s (read %q)", sentinel, got)
	return nil
}

// expectQueued proves what reached the terminal: a sentinel typed on the
// master follows anything injected into the input queue, and a sentinel
// written by the slave follows every echo on the master. Both pass through
// the same FIFO as an injected byte would, so "nothing before the sentinel"
// means nothing arrived, without a timed wait for absence.
func expectQueued(c *child, p pty, want string, when string) {
	if _, err := unix.Write(p.master, []byte{'Y'}); err != nil {
		c.fatalf("write master: %v", err)
	}
	if got := readUntil(c, p.slave, 'Y'); string(got) != want {
		c.errorf("%s: the terminal's input queue held %q, want %q", when, got, want)
	}
	if _, err := unix.Write(p.slave, []byte{'Z'}); err != nil {
		c.fatalf("write slave: %v", err)
	}
	echoed := bytes.ReplaceAll(readUntil(c, p.master, 'Z'), []byte{'Y'}, nil)
	if string(echoed) != want {
		c.errorf("%s: the master received %q, want %q", when, echoed, want)
	}
}

const garbage = 0xffffffff00000000

func setNoNewPrivs(c *child) {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		c.fatalf("PR_SET_NO_NEW_PRIVS: %v", err)
	}
}

func installTerminal(c *child) {
	prog, err := DenyTerminalInjection()
	if err != nil {
		c.fatalf("DenyTerminalInjection: %v", err)
	}
	setNoNewPrivs(c)
	if err := InstallOnThread(prog); err != nil {
		c.fatalf("InstallOnThread: %v", err)
	}
}

func controlInjection(c *child, p pty) {
	if e := inject(p.slave, unix.SYS_IOCTL, unix.TIOCSTI, 'a'); e != 0 {
		if e == unix.EIO {
			c.missingFeature("TIOCSTI is disabled on this kernel (dev.tty.legacy_tiocsti=0): nothing to protect against, nothing to test")
		}
		c.fatalf("TIOCSTI without a filter: %v", e)
	}
	// The kernel takes the request as an unsigned int: garbage above
	// bit 31 still means TIOCSTI. This is why the filter compares 32 bits.
	if e := inject(p.slave, unix.SYS_IOCTL, unix.TIOCSTI|garbage, 'b'); e != 0 {
		c.fatalf("TIOCSTI with upper garbage, without a filter: %v", e)
	}
}

func scenarioTerminal(c *child) {
	p := openPty(c)
	controlInjection(c, p)
	if e := inject(p.slave, unix.SYS_IOCTL, unix.TIOCLINUX, 0); e == 0 || e == unix.EPERM {
		c.errorf("TIOCLINUX on a pty without a filter: %v, want a refusal other than EPERM (a pty is no VT)", e)
	}
	expectQueued(c, p, "ab", "without the filter")

	before, _ := Probe()
	installTerminal(c)

	if e := inject(p.slave, unix.SYS_IOCTL, unix.TIOCSTI, 'c'); e != unix.EPERM {
		c.errorf("TIOCSTI under the filter: %v, want EPERM", e)
	}
	if e := inject(p.slave, unix.SYS_IOCTL, unix.TIOCSTI|garbage, 'd'); e != unix.EPERM {
		c.errorf("TIOCSTI|0xffffffff<<32 under the filter: %v, want EPERM", e)
	}
	if e := inject(p.slave, unix.SYS_IOCTL, unix.TIOCLINUX, 0); e != unix.EPERM {
		c.errorf("TIOCLINUX under the filter: %v, want EPERM", e)
	}
	if runtime.GOARCH == "amd64" {
		// x32's ioctl, and x86_64's number with the x32 bit: EPERM from
		// the filter, where the kernel alone says ENOSYS (x32 disabled)
		// or runs them.
		for _, nr := range []uintptr{x32Bit | 514, x32Bit | unix.SYS_IOCTL} {
			if e := inject(p.slave, nr, unix.TIOCSTI, 'e'); e != unix.EPERM {
				c.errorf("x32 syscall %#x TIOCSTI under the filter: %v, want EPERM", nr, e)
			}
		}
	}
	if _, err := unix.IoctlGetWinsize(p.slave, unix.TIOCGWINSZ); err != nil {
		c.errorf("TIOCGWINSZ under the filter: %v, want it to work", err)
	}
	if err := unix.IoctlSetWinsize(p.slave, unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 100}); err != nil {
		c.errorf("TIOCSWINSZ under the filter: %v, want it to work", err)
	}

	// A process started after the install, through execve, is bound too.
	// Started from this locked thread, which holds the filter.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=terminal-inherited")
	cmd.ExtraFiles = []*os.File{os.NewFile(uintptr(p.slave), "pts")}
	if out, err := cmd.CombinedOutput(); err != nil {
		c.errorf("inherited filter: %v: %s", err, strings.TrimSpace(string(out)))
	}
	expectQueued(c, p, "", "under the filter")

	after, err := Probe()
	if err != nil {
		c.errorf("Probe after install: %v", err)
	}
	if !after.NoNewPrivs || after.Filters != before.Filters+1 {
		c.errorf("Probe after install: %+v, before %+v: want no_new_privs and one more filter", after, before)
	}
}

func scenarioTerminalInherited(c *child) {
	if e := inject(3, unix.SYS_IOCTL, unix.TIOCSTI, 'g'); e != unix.EPERM {
		c.errorf("TIOCSTI in a process started after the install: %v, want EPERM", e)
	}
}

// scenarioInt80Probe makes one i386 system call; where the kernel has no
// i386 entry point it dies of SIGSEGV instead of reporting.
func scenarioInt80Probe(c *child) {
	// The Go runtime turns the fault into a crash with exit status 2;
	// as a panic it can be told apart from any other failure.
	debug.SetPanicOnFault(true)
	defer func() {
		if r := recover(); r != nil {
			c.missingFeature("int $0x80 faults (%v): this kernel has no i386 entry point (CONFIG_IA32_EMULATION off or ia32_emulation=0)", r)
		}
	}()
	if r, e := int80.Syscall(20, 0, 0, 0); e != 0 || int(r) != os.Getpid() { // i386 getpid
		c.missingFeature("int $0x80 getpid: %d, %v", r, e)
	}
}

func scenarioTerminalI386(c *child) {
	if _, e := int80.Syscall(20, 0, 0, 0); e != 0 { // i386 getpid
		c.missingFeature("int $0x80 getpid: %v: the kernel runs no i386 code (CONFIG_IA32_EMULATION off, or ia32_emulation=0)", e)
	}
	// The compat ioctl reads the byte through a 32-bit pointer.
	mem, err := int80.LowPage()
	if err != nil {
		c.fatalf("mmap MAP_32BIT: %v", err)
	}
	addr := uintptr(unsafe.Pointer(&mem[0]))
	if addr>>32 != 0 {
		c.fatalf("MAP_32BIT gave %#x", addr)
	}
	const i386Ioctl = 54
	p := openPty(c)
	mem[0] = 'h'
	if _, e := int80.Syscall(i386Ioctl, uintptr(p.slave), unix.TIOCSTI, addr); e != 0 {
		if e == unix.EIO {
			c.missingFeature("TIOCSTI is disabled on this kernel (dev.tty.legacy_tiocsti=0)")
		}
		c.fatalf("i386 TIOCSTI without a filter: %v", e)
	}
	expectQueued(c, p, "h", "i386 without the filter")

	installTerminal(c)
	mem[0] = 'i'
	if _, e := int80.Syscall(i386Ioctl, uintptr(p.slave), unix.TIOCSTI, addr); e != unix.EPERM {
		c.errorf("i386 TIOCSTI under the filter: %v, want EPERM", e)
	}
	if _, e := int80.Syscall(i386Ioctl, uintptr(p.slave), unix.TIOCLINUX, addr); e != unix.EPERM {
		c.errorf("i386 TIOCLINUX under the filter: %v, want EPERM", e)
	}
	if _, e := int80.Syscall(i386Ioctl, uintptr(p.slave), unix.TIOCGWINSZ, addr); e != 0 {
		c.errorf("i386 TIOCGWINSZ under the filter: %v, want it to work", e)
	}
	expectQueued(c, p, "", "i386 under the filter")
}

func scenarioRules(c *child) {
	const bit40 = 1 << 40
	// The controls: what the kernel alone answers.
	if _, _, e := unix.Syscall(unix.SYS_CLONE3, 0, 0, 0); e != unix.EINVAL {
		c.fatalf("clone3(NULL, 0) without a filter: %v, want EINVAL", e)
	}
	rules := []Rule{
		{Syscall: unix.SYS_UNSHARE, Match: AnyBits, Arg: 0, Value: unix.CLONE_NEWUTS | unix.CLONE_NEWUSER, Errno: unix.EDOM},
		{Syscall: unix.SYS_CLONE3, Errno: unix.ENOSYS},
		{Syscall: unix.SYS_GETPPID, Match: AnyBits, Arg: 2, Value: bit40, Errno: unix.ERANGE},
		{Syscall: unix.SYS_GETPID, Match: Low32, Arg: 0, Value: 0x1234, Errno: unix.EXDEV},
	}
	prog, err := Build(rules)
	if err != nil {
		c.fatalf("Build: %v", err)
	}
	setNoNewPrivs(c)
	if err := InstallOnThread(prog); err != nil {
		c.fatalf("InstallOnThread: %v", err)
	}
	if err := unix.Unshare(unix.CLONE_NEWUTS); err != unix.EDOM {
		c.errorf("unshare(CLONE_NEWUTS): %v, want EDOM from the filter", err)
	}
	if err := unix.Unshare(0); err != nil {
		c.errorf("unshare(0): %v, want success", err)
	}
	if _, _, e := unix.Syscall(unix.SYS_CLONE3, 0, 0, 0); e != unix.ENOSYS {
		c.errorf("clone3: %v, want ENOSYS from the filter", e)
	}
	ppid := uintptr(os.Getppid())
	if r, _, e := unix.Syscall(unix.SYS_GETPPID, 0, 0, bit40); e != unix.ERANGE {
		c.errorf("getppid with bit 40 in args[2]: %d, %v; want ERANGE (the upper half of a mask)", r, e)
	}
	if r, _, e := unix.Syscall(unix.SYS_GETPPID, 0, 0, bit40-1); e != 0 || r != ppid {
		c.errorf("getppid with bits 0-39 in args[2]: %d, %v; want %d", r, e, ppid)
	}
	if r, _, e := unix.Syscall(unix.SYS_GETPID, 0xffffffff00001234, 0, 0); e != unix.EXDEV {
		c.errorf("getpid with args[0] low half 0x1234: %d, %v; want EXDEV", r, e)
	}
	if r, _, e := unix.Syscall(unix.SYS_GETPID, 0x1234<<32, 0, 0); e != 0 || int(r) != os.Getpid() {
		c.errorf("getpid with 0x1234 in the upper half: %d, %v; want the pid", r, e)
	}
	if runtime.GOARCH == "amd64" {
		if _, _, e := unix.Syscall(x32Bit|unix.SYS_UNSHARE, unix.CLONE_NEWUTS, 0, 0); e != unix.EDOM {
			c.errorf("x32 unshare(CLONE_NEWUTS): %v, want EDOM: the native rule covers x32", e)
		}
	}
}

func scenarioNeedsNoNewPrivs(c *child) {
	// Drop CAP_SYS_ADMIN from this thread's effective set, so that only
	// no_new_privs could let the install through.
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		c.fatalf("capget: %v", err)
	}
	data[unix.CAP_SYS_ADMIN/32].Effective &^= 1 << (unix.CAP_SYS_ADMIN % 32)
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		c.fatalf("capset: %v", err)
	}
	if v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); err != nil || v != 0 {
		c.fatalf("no_new_privs is already %d (%v): run the test from a shell without it", v, err)
	}
	prog, err := DenyTerminalInjection()
	if err != nil {
		c.fatalf("DenyTerminalInjection: %v", err)
	}
	err = InstallOnThread(prog)
	if !errors.Is(err, unix.EACCES) || !strings.Contains(err.Error(), "no_new_privs") {
		c.errorf("install without no_new_privs or CAP_SYS_ADMIN: %v, want EACCES naming no_new_privs", err)
	}
	if st, err := Probe(); err != nil || st.NoNewPrivs {
		c.errorf("Probe before no_new_privs: %+v, %v", st, err)
	}
	setNoNewPrivs(c)
	if err := InstallOnThread(prog); err != nil {
		c.errorf("install with no_new_privs: %v", err)
	}
	if err := InstallOnThread(nil); err == nil {
		c.errorf("an empty program was accepted")
	}
}
