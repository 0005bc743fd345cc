package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"github.com/corral-sh/corral/internal/container"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Bounds of every wait. They catch hangs; none is a timing assertion.
const (
	readyTimeout = 15 * time.Second // a helper must report ready within this
	goneTimeout  = 10 * time.Second // the kernel must finish a kill within this
)

const nobody = 65534

// helperEnv selects what the test binary does when a test re-executes it.
const helperEnv = "CORRAL_CGROUP_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode))
	}
	// Orphans of the tests' process trees come back to this process, so
	// that the tests reap every process they started, by pid, whatever
	// the host's PID 1 does.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "PR_SET_CHILD_SUBREAPER:", err)
		os.Exit(1)
	}
	status := m.Run()
	if left := leftBehind(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "cgroups left behind: %s\n", strings.Join(left, " "))
		status = 1
	}
	os.Exit(status)
}

// leftBehind lists the cgroups this test process made and did not remove:
// they are named after its pid.
func leftBehind() []string {
	p, err := Find()
	if err != nil {
		return nil
	}
	entries, _ := os.ReadDir(p.Dir)
	var left []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), fmt.Sprintf("corral-%d-", os.Getpid())) {
			left = append(left, filepath.Join(p.Dir, e.Name()))
			_ = os.Remove(filepath.Join(p.Dir, e.Name()))
		}
	}
	return left
}

// missingFeature skips the test, or fails it under CI=true, where a green
// run must mean that everything ran.
func missingFeature(t *testing.T, reason string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: a missing feature is a failure)", reason)
	}
	t.Skip(reason)
}

// requireParent returns the caller's cgroup, usable as the tests need it:
// as root, on a writable cgroup v2.
func requireParent(t *testing.T) *Parent {
	t.Helper()
	if os.Geteuid() != 0 {
		missingFeature(t, fmt.Sprintf("cgroup tests need root (euid is %d)", os.Geteuid()))
	}
	p, err := Find()
	if err != nil {
		missingFeature(t, fmt.Sprintf("no usable cgroup v2: %v", err))
	}
	return p
}

// newCgroup makes a cgroup for the test and removes it when the test ends,
// failing the test if the directory stays (and then removing it without
// the package's help, so that a bug in it leaves nothing either).
func newCgroup(t *testing.T, p *Parent) *Cgroup {
	t.Helper()
	c, err := p.New()
	if err != nil {
		t.Fatalf("New beneath %s: %v", p.Dir, err)
	}
	t.Cleanup(func() {
		if err := c.Remove(); err != nil && !errors.Is(err, os.ErrClosed) {
			t.Errorf("Remove: %v", err)
		}
		if _, err := os.Stat(c.Path()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists after Remove (stat: %v)", c.Path(), err)
			forceKill(c.Path())
			reapAll(t)
			forceRemove(c.Path())
		}
	})
	return c
}

// forceKill kills what is in the cgroup at dir and beneath it, through
// its files rather than the package: cleanup must not depend on the code
// under test. Every pid inside is one a test started.
func forceKill(dir string) {
	_ = os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		data, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		for f := range strings.FieldsSeq(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
		return nil
	})
}

// forceRemove removes the cgroup at dir and those beneath it, deepest
// first, retrying while the kernel finishes exits.
func forceRemove(dir string) {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		for deadline := time.Now().Add(goneTimeout); os.Remove(dirs[i]) != nil && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// helperCmd is the test binary re-executed as helper mode.
func helperCmd(mode string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$"}, args...)...)
	cmd.Env = helperEnviron(mode)
	cmd.Stderr = os.Stderr
	return cmd
}

// helperEnviron is the environment of a helper in mode. The race
// detector's one-second pause at exit is dropped: a helper that exits is
// waited for.
func helperEnviron(mode string) []string {
	return append(os.Environ(), helperEnv+"="+mode, "GORACE=atexit_sleep_ms=0")
}

// startInto starts cmd directly into c, and on cleanup kills what is left
// and reaps every child of the test process.
func startInto(t *testing.T, c *Cgroup, cmd *exec.Cmd) {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: c.FD(), Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s into %s: %v", cmd.Path, c.Path(), err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // unreaped until reapAll: the pid is still ours
		forceKill(c.Path())
		reapAll(t)
	})
}

// reapAll kills and reaps every child of the test process (orphans
// included: it is their subreaper, so a process that escaped a broken
// cgroup comes back here) until there is none, within goneTimeout. The
// package's tests do not run in parallel: every child is the ending
// test's.
func reapAll(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(goneTimeout); ; {
		for _, pid := range children() {
			_ = unix.Kill(pid, unix.SIGKILL) // unreaped: still ours
		}
		pid, err := unix.Wait4(-1, nil, unix.WNOHANG, nil)
		switch {
		case errors.Is(err, unix.ECHILD):
			return
		case pid > 0 || errors.Is(err, unix.EINTR):
			continue
		case time.Now().After(deadline):
			t.Errorf("children still alive %v after they were killed", goneTimeout)
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// children lists the test process's children, from every thread's list.
func children() []int {
	var pids []int
	lists, _ := filepath.Glob("/proc/self/task/*/children")
	for _, l := range lists {
		data, _ := os.ReadFile(l)
		for f := range strings.FieldsSeq(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// readLine reads one line from r within readyTimeout.
func readLine(t *testing.T, r io.Reader) string {
	t.Helper()
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(r).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case s := <-line:
		return s
	case <-time.After(readyTimeout):
		t.Fatalf("no line from the helper within %v", readyTimeout)
		return ""
	}
}

// cgroupOf returns the v2 cgroup of pid from the host's /proc.
func cgroupOf(t *testing.T, pid int) string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatalf("read the cgroup of %d: %v", pid, err)
	}
	p, found, err := parseProcCgroup(data)
	if err != nil || !found {
		t.Fatalf("/proc/%d/cgroup: %q: %v", pid, data, err)
	}
	return p
}

// statOf returns fields of /proc/PID/stat after comm: state, ppid, pgrp, session.
func statOf(t *testing.T, pid int) []string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("read the stat of %d: %v", pid, err)
	}
	s := string(data)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
}

// waitEmpty waits, within goneTimeout, for c to empty.
func waitEmpty(t *testing.T, c *Cgroup) {
	t.Helper()
	empty, err := c.WaitEmpty(goneTimeout)
	if err != nil {
		t.Fatalf("WaitEmpty: %v", err)
	}
	if !empty {
		t.Fatalf("%s still populated %v after Kill", c.Path(), goneTimeout)
	}
}

func TestFindHere(t *testing.T) {
	p := requireParent(t)
	var fs unix.Statfs_t
	if err := unix.Statfs(p.Mount, &fs); err != nil || fs.Type != unix.CGROUP2_SUPER_MAGIC {
		t.Fatalf("Find gave mount %s, not a cgroup2 filesystem (statfs: %v, type %#x)", p.Mount, err, fs.Type)
	}
	if p.Path != cgroupOf(t, os.Getpid()) {
		t.Fatalf("Find gave path %q, /proc/self/cgroup says %q", p.Path, cgroupOf(t, os.Getpid()))
	}
	if _, err := os.Stat(filepath.Join(p.Dir, "cgroup.procs")); err != nil {
		t.Fatalf("Find gave dir %s, not a cgroup directory: %v", p.Dir, err)
	}
}

// The short way (the usual mount, no mount table) names the same
// directory as the mount table does.
func TestUsualPlaceAgreesWithMountTable(t *testing.T) {
	self, err := readFile("/proc/self/cgroup", 1024)
	if err != nil {
		t.Fatal(err)
	}
	mountinfo, err := readFile("/proc/self/mountinfo", 8192)
	if err != nil {
		t.Fatal(err)
	}
	got := atUsualPlace(self)
	if got == nil {
		t.Skip("no writable cgroup2 root at " + strings.Join(usualMounts, " or ") + " in the initial cgroup namespace here: Find reads the mount table")
	}
	want, err := locate(mountinfo, self, container.Here())
	if err != nil {
		t.Fatalf("the usual place gave %+v; the mount table: %v", got, err)
	}
	if *got != *want {
		t.Fatalf("the usual place gave %+v; the mount table %+v", got, want)
	}
}

// TestContainment is the case: a runner started straight into its
// cgroup, a double-forked setsid grandchild that cannot leave it, one
// Kill for all, populated turning false, the directory gone.
func TestContainment(t *testing.T) {
	p := requireParent(t)
	c := newCgroup(t, p)
	want := path.Join(p.Path, filepath.Base(c.Path()))

	cmd := helperCmd("tree")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	startInto(t, c, cmd)
	line := readLine(t, out)
	gpid, err := strconv.Atoi(strings.TrimPrefix(line, "ready "))
	if err != nil {
		t.Fatalf("helper said %q, want \"ready PID\"", line)
	}

	if got := cgroupOf(t, cmd.Process.Pid); got != want {
		t.Fatalf("runner %d is in cgroup %q, want %q", cmd.Process.Pid, got, want)
	}
	if got := cgroupOf(t, gpid); got != want {
		t.Fatalf("double-forked grandchild %d is in cgroup %q, want %q", gpid, got, want)
	}
	// The grandchild really left: its own session, and its parent is gone
	// (it was reparented to this test process, the subreaper).
	if st := statOf(t, gpid); st[1] != strconv.Itoa(os.Getpid()) || st[3] != strconv.Itoa(gpid) {
		t.Fatalf("grandchild %d: ppid %s session %s; want ppid %d (the test, its subreaper) and a session of its own", gpid, st[1], st[3], os.Getpid())
	}
	if populated, err := c.Populated(); err != nil || !populated {
		t.Fatalf("Populated = %v, %v with two processes inside", populated, err)
	}

	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	// Empty before anyone reaps: a zombie no longer counts.
	waitEmpty(t, c)
	if st := statOf(t, gpid); st[0] != "Z" {
		t.Fatalf("grandchild %d is in state %s after the cgroup emptied, want a zombie", gpid, st[0])
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("runner ended with %v, want SIGKILL", err)
	}
	var ws unix.WaitStatus
	if _, err := unix.Wait4(gpid, &ws, 0, nil); err != nil || !ws.Signaled() || ws.Signal() != unix.SIGKILL {
		t.Fatalf("grandchild %d: wait4: %v, status %v; want SIGKILL", gpid, err, ws)
	}

	if err := c.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s after Remove: stat says %v", c.Path(), err)
	}
	if c.FD() != -1 {
		t.Fatalf("FD after Remove = %d, want -1", c.FD())
	}
}

// TestKillOutrunsForkLoop: a shell forking as fast as it can while Kill
// runs leaves nothing behind.
func TestKillOutrunsForkLoop(t *testing.T) {
	p := requireParent(t)
	c := newCgroup(t, p)
	// Bounded, so that a broken Kill cannot exhaust a shared machine.
	cmd := exec.Command("/bin/sh", "-c", `echo ready; i=0; while [ $i -lt 3000 ]; do sleep 1000 & i=$((i+1)); done; wait`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	startInto(t, c, cmd)
	if line := readLine(t, out); line != "ready" {
		t.Fatalf("shell said %q", line)
	}
	// Let it fork for a while: Kill must meet a loop in full swing.
	deadline := time.Now().Add(readyTimeout)
	for n := 0; n < 50; n = countProcs(t, c) {
		if time.Now().After(deadline) {
			t.Fatalf("the fork loop made %d processes in %v", n, readyTimeout)
		}
		time.Sleep(time.Millisecond)
	}
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	waitEmpty(t, c)
	_ = cmd.Wait()
	reapAll(t)
	if n := countProcs(t, c); n != 0 {
		t.Fatalf("%d processes in %s after Kill", n, c.Path())
	}
}

// threadReads is the calling thread's count of read system calls (pread
// included), from /proc/thread-self/io.
func threadReads(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile("/proc/thread-self/io")
	if err != nil {
		t.Fatalf("read system calls cannot be counted: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "syscr: "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("/proc/thread-self/io: syscr %q", v)
			}
			return n
		}
	}
	t.Fatalf("/proc/thread-self/io has no syscr line:\n%s", data)
	return 0
}

func countProcs(t *testing.T, c *Cgroup) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(c.Path(), "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), "\n")
}

// TestWaitEmptyDoesNotSpin: waiting on a cgroup that stays populated
// sleeps until the deadline, reading cgroup.events only a few times, and
// a wait in progress wakes when the cgroup empties.
func TestWaitEmptyDoesNotSpin(t *testing.T) {
	p := requireParent(t)
	c := newCgroup(t, p)
	cmd := helperCmd("sleep")
	startInto(t, c, cmd)

	// WaitEmpty reads cgroup.events in the calling goroutine, and a
	// goroutine locked to its thread parks and wakes on that thread: the
	// thread's count of read system calls is then WaitEmpty's reads, plus
	// the count's own reads, measured first.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	own := -threadReads(t) + threadReads(t)
	before := threadReads(t)
	empty, err := c.WaitEmpty(300 * time.Millisecond)
	if err != nil || empty {
		t.Fatalf("WaitEmpty on a populated cgroup = %v, %v; want false at the deadline", empty, err)
	}
	// One read before waiting, one for the poller's first (stale) wake-up,
	// and slack for a notification the process start may still cause.
	if reads := threadReads(t) - before - own; reads > 4 {
		t.Fatalf("WaitEmpty read cgroup.events %d times in 300ms: it spins", reads)
	}

	woke := make(chan error, 1)
	go func() {
		empty, err := c.WaitEmpty(time.Minute)
		if err == nil && !empty {
			err = errors.New("WaitEmpty returned false before its deadline")
		}
		woke <- err
	}()
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-woke:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(goneTimeout):
		t.Fatalf("WaitEmpty did not wake within %v of Kill", goneTimeout)
	}
}

// TestRemoveKillsAndClearsNested: Remove on a cgroup still running, with a
// cgroup a (root) runner made beneath it holding a process of its own,
// kills everything and leaves no directory.
func TestRemoveKillsAndClearsNested(t *testing.T) {
	p := requireParent(t)
	c := newCgroup(t, p)
	startInto(t, c, helperCmd("sleep"))

	nested := filepath.Join(c.Path(), "nested", "deeper")
	if err := os.MkdirAll(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(nested, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	inner := helperCmd("sleep")
	inner.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd, Pdeathsig: syscall.SIGKILL}
	if err := inner.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inner.Process.Kill(); reapAll(t) })
	if got, want := cgroupOf(t, inner.Process.Pid), path.Join(p.Path, filepath.Base(c.Path()), "nested", "deeper"); got != want {
		t.Fatalf("inner process in %q, want %q", got, want)
	}

	if err := c.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s after Remove: stat says %v", c.Path(), err)
	}
	reapAll(t)
}

// TestUnprivilegedIsUnavailable: as uid 65534 in a cgroup it does not own,
// Find (the cheap check a run makes) and Check (corral probe's trial) say
// so, with the reason and the fix, and make nothing.
func TestUnprivilegedIsUnavailable(t *testing.T) {
	p := requireParent(t)
	for _, mode := range []string{"find", "check"} {
		out := runHelperAs(t, nobody, nil, mode)
		if !strings.HasPrefix(out, "unavailable: ") {
			t.Fatalf("%s as uid %d said %q, want \"unavailable: …\"", mode, nobody, out)
		}
		for _, want := range []string{fmt.Sprintf("uid %d may not write %s", nobody, p.Dir), "Delegate=yes"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s as uid %d said %q, want it to contain %q", mode, nobody, out, want)
			}
		}
	}
}

// TestDelegatedSubtree: a cgroup handed to uid 65534 the way systemd
// delegates one (directory, cgroup.procs, cgroup.threads and
// cgroup.subtree_control chowned), with the helper living in it: the
// helper, unprivileged, makes a run's cgroup beneath its own, starts a
// process into it, kills it and removes it.
func TestDelegatedSubtree(t *testing.T) {
	p := requireParent(t)
	delegated := newCgroup(t, p)
	for _, name := range []string{"", "cgroup.procs", "cgroup.threads", "cgroup.subtree_control"} {
		if err := os.Chown(filepath.Join(delegated.Path(), name), nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	out := runHelperAs(t, nobody, delegated, "delegated", path.Join(p.Path, filepath.Base(delegated.Path())))
	if out != "ok" {
		t.Fatalf("the delegated helper said %q", out)
	}
	entries, err := os.ReadDir(delegated.Path())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			t.Errorf("the delegated helper left %s behind", filepath.Join(delegated.Path(), e.Name()))
		}
	}
}

// TestThreadedIsUnavailable: a caller in a threaded domain (a cgroup with
// a threaded child) is told so rather than handed a cgroup that
// CLONE_INTO_CGROUP may refuse.
func TestThreadedIsUnavailable(t *testing.T) {
	p := requireParent(t)
	root := newCgroup(t, p)
	if err := os.Mkdir(filepath.Join(root.Path(), "threads"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root.Path(), "threads", "cgroup.type"), []byte("threaded"), 0); err != nil {
		t.Fatalf("make a threaded cgroup: %v", err)
	}
	out := runHelperAs(t, 0, root, "find")
	if want := fmt.Sprintf("unavailable: the caller's cgroup %s is of type \"domain threaded\"", root.Path()); !strings.HasPrefix(out, want) {
		t.Fatalf("find in a threaded domain said %q, want %q…", out, want)
	}
}

// TestNewFailsCleanly: when New cannot open what it needs (here EMFILE,
// at each of its opens in turn), it returns the error and leaves no
// directory behind.
func TestNewFailsCleanly(t *testing.T) {
	requireParent(t)
	if out := runHelperAs(t, 0, nil, "emfile"); out != "ok" {
		t.Fatal(out)
	}
}

// TestTeardownNeedsNoDescriptor: with not one descriptor free (a runner
// that ran prlimit --nofile on corral), Procs still lists the cgroup, and
// Kill, WaitEmpty and Remove still end it.
func TestTeardownNeedsNoDescriptor(t *testing.T) {
	requireParent(t)
	if out := runHelperAs(t, 0, nil, "nofile"); out != "ok" {
		t.Fatal(out)
	}
}

// runHelperAs runs the test binary as uid (from a copy it may execute),
// started into cgroup into when given, and returns its output.
func runHelperAs(t *testing.T, uid int, into *Cgroup, mode string, args ...string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "corral-cgroup-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "cgroup.test")
	if err := copyFile(os.Args[0], bin); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"-test.run=^$"}, args...)...)
	cmd.Env = helperEnviron(mode)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}},
		Pdeathsig:  syscall.SIGKILL,
	}
	if into != nil {
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, into.FD()
	}
	var stdout strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); reapAll(t) })
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("helper %s as uid %d: %v (output %q)", mode, uid, err, stdout.String())
		}
	case <-time.After(readyTimeout):
		t.Fatalf("helper %s as uid %d did not finish within %v", mode, uid, readyTimeout)
	}
	return strings.TrimSpace(stdout.String())
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o755)
}

func TestCheck(t *testing.T) {
	p := requireParent(t)
	dir, err := Check()
	if err != nil || dir != p.Dir {
		t.Fatalf("Check = %q, %v; want %q", dir, err, p.Dir)
	}
}

// TestNotCgroup2: a directory that is not on cgroup2 (a shadowing mount,
// a wrong guess) is refused by name.
func TestNotCgroup2(t *testing.T) {
	dir := t.TempDir()
	err := (&Parent{Mount: dir, Path: "/", Dir: dir}).check()
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "not a cgroup2 filesystem") {
		t.Fatalf("check on %s = %v, want ErrUnavailable: not a cgroup2 filesystem", dir, err)
	}
}

func TestClosed(t *testing.T) {
	p := requireParent(t)
	c, err := p.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(c.Path()) })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := c.Kill(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Kill after Close = %v, want ErrClosed", err)
	}
	if _, err := c.Populated(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Populated after Close = %v, want ErrClosed", err)
	}
	if _, err := c.Procs(nil); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Procs after Close = %v, want ErrClosed", err)
	}
	if _, err := c.WaitEmpty(time.Second); !errors.Is(err, os.ErrClosed) {
		t.Errorf("WaitEmpty after Close = %v, want ErrClosed", err)
	}
	if err := c.Remove(); !errors.Is(err, os.ErrClosed) || !strings.Contains(err.Error(), c.Path()) {
		t.Errorf("Remove after Close = %v, want ErrClosed naming the directory", err)
	}
	if c.FD() != -1 {
		t.Errorf("FD after Close = %d", c.FD())
	}
	if err := os.Remove(c.Path()); err != nil {
		t.Errorf("the directory Close leaves: %v", err)
	}
}

// helper is the test binary as a process a test starts.
func helper(mode string) int {
	args := flagArgs()
	switch mode {
	case "sleep":
		time.Sleep(time.Hour)
	case "tree":
		// A middle process starts a grandchild in a session of its own
		// and exits without waiting: the classic escape from a parent.
		mid := exec.Command(os.Args[0], "-test.run=^$")
		mid.Env = helperEnviron("middle")
		out, err := mid.Output()
		if err != nil {
			fmt.Fprintln(os.Stderr, "middle:", err)
			return 1
		}
		fmt.Printf("ready %s\n", strings.TrimSpace(string(out)))
		time.Sleep(time.Hour)
	case "middle":
		g := exec.Command(os.Args[0], "-test.run=^$")
		g.Env = helperEnviron("sleep")
		g.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := g.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "grandchild:", err)
			return 1
		}
		fmt.Println(g.Process.Pid)
	case "find", "check":
		var err error
		if mode == "find" {
			_, err = Find()
		} else {
			_, err = Check()
		}
		if errors.Is(err, ErrUnavailable) {
			fmt.Println(strings.Replace(err.Error(), ErrUnavailable.Error()+": ", "unavailable: ", 1))
		} else {
			fmt.Printf("usable (%v)\n", err)
		}
	case "emfile":
		if err := newUnderEMFILE(); err != nil {
			fmt.Println(err)
			return 0
		}
		fmt.Println("ok")
	case "nofile":
		if err := teardownWithoutDescriptors(); err != nil {
			fmt.Println(err)
			return 0
		}
		fmt.Println("ok")
	case "delegated":
		if err := delegatedRun(args[0]); err != nil {
			fmt.Println(err)
			return 0
		}
		fmt.Println("ok")
	default:
		fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
		return 2
	}
	return 0
}

// flagArgs returns the arguments after the test flags.
func flagArgs() []string {
	var args []string
	for _, a := range os.Args[1:] {
		if !strings.HasPrefix(a, "-test.") {
			args = append(args, a)
		}
	}
	return args
}

// delegatedRun is the whole cycle as an unprivileged user in a delegated
// cgroup (want is that cgroup, as /proc/self/cgroup should name it).
func delegatedRun(want string) error {
	if os.Geteuid() == 0 {
		return errors.New("the delegated helper runs as root")
	}
	p, err := Find()
	if err != nil {
		return fmt.Errorf("Find: %w", err)
	}
	if p.Path != want {
		return fmt.Errorf("Find says the caller is in %q, want %q", p.Path, want)
	}
	c, err := p.New()
	if err != nil {
		return fmt.Errorf("New: %w", err)
	}
	defer c.Remove()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = helperEnviron("sleep")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: c.FD(), Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start into %s: %w", c.Path(), err)
	}
	defer cmd.Process.Kill()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", cmd.Process.Pid))
	if err != nil {
		return err
	}
	if got, _, _ := parseProcCgroup(data); got != path.Join(want, filepath.Base(c.Path())) {
		return fmt.Errorf("the process is in %q, want %q", got, path.Join(want, filepath.Base(c.Path())))
	}
	if err := c.Kill(); err != nil {
		return fmt.Errorf("Kill: %w", err)
	}
	if empty, err := c.WaitEmpty(goneTimeout); err != nil || !empty {
		return fmt.Errorf("WaitEmpty after Kill = %v, %v", empty, err)
	}
	_ = cmd.Wait()
	if err := c.Remove(); err != nil {
		return fmt.Errorf("Remove: %w", err)
	}
	if _, err := os.Stat(c.Path()); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s after Remove: %v", c.Path(), err)
	}
	return nil
}

// newUnderEMFILE calls New with room for 0, 1, 2 … new descriptors until
// it succeeds, and checks after each failure that nothing was left.
func newUnderEMFILE() error {
	p, err := Find()
	if err != nil {
		return err
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	// The runtime poller costs a descriptor when it starts: start it
	// while there is room (a timer does), as corral's has long before.
	time.Sleep(time.Millisecond)
	mine := fmt.Sprintf("corral-%d-", os.Getpid())
	for room := 0; room < 8; room++ {
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: limitLeaving(room), Max: lim.Max}); err != nil {
			return err
		}
		c, newErr := p.New()
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
			return err
		}
		entries, err := os.ReadDir(p.Dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), mine) && (newErr != nil || e.Name() != filepath.Base(c.Path())) {
				os.Remove(filepath.Join(p.Dir, e.Name()))
				return fmt.Errorf("room for %d descriptors: New said %v and left %s behind", room, newErr, e.Name())
			}
		}
		if newErr == nil {
			if err := c.Remove(); err != nil || room >= 4 {
				return err
			}
			return fmt.Errorf("New succeeded with room for only %d descriptors", room)
		}
		if !errors.Is(newErr, unix.EMFILE) {
			return fmt.Errorf("room for %d descriptors: New said %v, want EMFILE", room, newErr)
		}
	}
	return errors.New("New never succeeded")
}

// limitLeaving returns the RLIMIT_NOFILE that leaves exactly room free
// descriptor numbers (a new descriptor takes the lowest free one).
func limitLeaving(room int) uint64 {
	fd := 0
	for free := 0; ; fd++ {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == unix.EBADF {
			if free == room {
				return uint64(fd)
			}
			free++
		}
	}
}

// teardownWithoutDescriptors starts a process into a new cgroup, then
// leaves no descriptor free and ends the cgroup.
func teardownWithoutDescriptors() error {
	p, err := Find()
	if err != nil {
		return err
	}
	c, err := p.New()
	if err != nil {
		return err
	}
	defer c.Remove()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = helperEnviron("sleep")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: c.FD(), Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer cmd.Process.Kill()
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: limitLeaving(0), Max: lim.Max}); err != nil {
		return err
	}
	if fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0); !errors.Is(err, unix.EMFILE) {
		unix.Close(fd)
		return fmt.Errorf("open with no room = %v, want EMFILE: the test is broken", err)
	}
	if pids, err := c.Procs(nil); err != nil || !slices.Equal(pids, []int{cmd.Process.Pid}) {
		return fmt.Errorf("Procs with no descriptor free = %v, %v; want [%d]", pids, err, cmd.Process.Pid)
	}
	if err := c.Kill(); err != nil {
		return fmt.Errorf("Kill with no descriptor free: %w", err)
	}
	if empty, err := c.WaitEmpty(goneTimeout); err != nil || !empty {
		return fmt.Errorf("WaitEmpty with no descriptor free = %v, %v", empty, err)
	}
	if populated, err := c.Populated(); err != nil || populated {
		return fmt.Errorf("Populated with no descriptor free = %v, %v", populated, err)
	}
	if err := c.Remove(); err != nil {
		return fmt.Errorf("Remove with no descriptor free: %w", err)
	}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	if _, err := os.Stat(c.Path()); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s after Remove: %v", c.Path(), err)
	}
	if err := cmd.Wait(); err == nil {
		return errors.New("the process in the cgroup survived Kill")
	}
	return nil
}
