package sockcheck

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/internal/seccomp"
)

// The runner is the test binary re-executed with childEnv naming a
// scenario: it installs the runner's filter with a listener on its locked
// main thread, sends the listener to the test over fd 3 (SCM_RIGHTS), and
// runs the scenario's calls on that thread, reporting through its exit
// status: 0 passed, exitMissing a kernel feature is absent, anything else
// failed (the reasons on stderr). The test runs the checker on the
// listener, as the engine would.
const (
	childEnv    = "CORRAL_SOCKCHECK_TEST_CHILD"
	childTCP    = "CORRAL_SOCKCHECK_TEST_TCP"
	childWrites = "CORRAL_SOCKCHECK_TEST_WRITES" // fswrite_test.go
	childMeta   = "CORRAL_SOCKCHECK_TEST_META"   // the filter hands the metadata calls over too
	childUDP    = "CORRAL_SOCKCHECK_TEST_UDP"    // UDP sockets, every sendmsg checked (udp_test.go)
	exitMissing = 3
)

var scenarios = map[string]func(c *child){}

func TestMain(m *testing.M) {
	if name := os.Getenv(childEnv); name != "" {
		runtime.LockOSThread()
		f, ok := scenarios[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "no scenario %q\n", name)
			os.Exit(2)
		}
		c := &child{}
		if !strings.HasPrefix(name, "bench") { // a benchmark installs it itself, later
			c.install(os.Getenv(childTCP) != "")
		}
		f(c)
		os.Exit(c.exit())
	}
	os.Exit(m.Run())
}

type child struct {
	failures []string
	missing  string
}

func (c *child) errorf(format string, args ...any) {
	c.failures = append(c.failures, fmt.Sprintf(format, args...))
}

func (c *child) fatalf(format string, args ...any) {
	c.errorf(format, args...)
	os.Exit(c.exit())
}

func (c *child) exit() int {
	if len(c.failures) > 0 {
		fmt.Fprintln(os.Stderr, strings.Join(c.failures, "\n"))
		return 1
	}
	if c.missing != "" {
		fmt.Fprintln(os.Stderr, c.missing)
		return exitMissing
	}
	return 0
}

// install puts the runner's filter on this thread and hands its listener
// to the test.
func (c *child) install(tcp bool) {
	st, err := seccomp.Probe()
	if err != nil {
		c.missing = err.Error()
		os.Exit(c.exit())
	}
	if m := st.NotifyMissing(); m != "" {
		c.missing = "missing: " + m
		os.Exit(c.exit())
	}
	r := seccomp.RunnerRules{DenyVsock: true, NotifyAddresses: true, NotifyMetadata: os.Getenv(childMeta) != "", NotifyWrites: os.Getenv(childWrites) != ""}
	if tcp {
		r.Sockets = &seccomp.SocketRules{AllowTCP: true, AllowUDP: os.Getenv(childUDP) != ""}
	}
	prog, err := seccomp.RunnerFilter(r)
	if err != nil {
		c.fatalf("RunnerFilter: %v", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		c.fatalf("no_new_privs: %v", err)
	}
	l, err := seccomp.InstallWithListener(prog)
	if err != nil {
		c.fatalf("InstallWithListener: %v", err)
	}
	// MSG_PROBE: as the exec stage sends it, past a filter that hands
	// every other sendmsg to this listener (SocketRules.AllowUDP).
	if err := unix.Sendmsg(3, []byte{1}, unix.UnixRights(l), nil, seccomp.MsgProbe); err != nil {
		c.fatalf("send the listener: %v", err)
	}
	unix.Close(l)
	unix.Close(3)
}

// run runs scenario name as the runner, with the checker for pol on its
// listener, and returns the checker (closed) for the test to look at.
func run(t testing.TB, name string, pol Policy, env ...string) *Checker {
	t.Helper()
	ck, cmd, out := start(t, name, pol, env...)
	waitDone := make(chan error, 1)
	go func() { waitDone <- cmd.Wait() }()
	var err error
	select {
	case err = <-waitDone:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-waitDone
		t.Fatalf("scenario %s: still running after 60 s\n%s", name, out)
	}
	closeChecker(t, ck)
	report := strings.TrimSpace(out.String())
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == exitMissing {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s (CI=true: a missing feature is a failure)", report)
		}
		t.Skip(report)
	}
	if err != nil {
		t.Fatalf("scenario %s: %v\n%s", name, err, report)
	}
	return ck
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start starts the runner and serves its listener; the caller waits for
// it. The runner is killed at the test's end if still there.
func start(t testing.TB, name string, pol Policy, env ...string) (*Checker, *exec.Cmd, *syncBuffer) {
	t.Helper()
	ck, err := New(pol)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		ck.Close()
		t.Fatal(err)
	}
	theirs := os.NewFile(uintptr(fds[1]), "runner-end")
	defer theirs.Close()
	defer unix.Close(fds[0])
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"="+name, "GORACE=atexit_sleep_ms=0"), env...)
	if pol.TCP {
		cmd.Env = append(cmd.Env, childTCP+"=1")
	}
	if pol.Metadata {
		cmd.Env = append(cmd.Env, childMeta+"=1")
	}
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.ExtraFiles = []*os.File{theirs}
	if err := cmd.Start(); err != nil {
		ck.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		ck.Close()
	})
	theirs.Close()
	// The listener, or EOF when the runner ended first.
	pfd := []unix.PollFd{{Fd: int32(fds[0]), Events: unix.POLLIN}}
	if n, err := unix.Poll(pfd, 10000); err != nil || n == 0 {
		t.Fatalf("no listener from the runner within 10 s: %v\n%s", err, out)
	}
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(fds[0], buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err == nil && oobn > 0 {
		msgs, perr := unix.ParseSocketControlMessage(oob[:oobn])
		if perr == nil && len(msgs) == 1 {
			if rights, perr := unix.ParseUnixRights(&msgs[0]); perr == nil && len(rights) == 1 {
				if err := ck.Serve(rights[0]); err != nil {
					t.Fatal(err)
				}
				return ck, cmd, out
			}
		}
	}
	cmd.Wait()
	report := strings.TrimSpace(out.String())
	if cmd.ProcessState != nil && cmd.ProcessState.ExitCode() == exitMissing {
		t.Skip(report)
	}
	t.Fatalf("no listener from the runner (%v): %s", err, report)
	return nil, nil, nil
}

// closeChecker closes ck and fails if that takes long: no worker may be
// stuck.
func closeChecker(t testing.TB, ck *Checker) {
	t.Helper()
	done := make(chan struct{})
	go func() { ck.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return within 5 s: a worker is stuck")
	}
}
