package test

// Teardown at grace 0 through the run's cgroup
// (docs/signals-and-teardown.md): the SIGTERM round reaches the tree through
// the members
// cgroup.procs lists, without a /proc walk, and still reaches every
// process, SIGCONT included, before the SIGKILL round.

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// signalTrace records, in a tracefs instance of its own, every SIGKILL,
// SIGTERM and SIGCONT the kernel generates (the signal_generate
// tracepoint), in one clock across CPUs. A TERM handler that writes a
// line cannot show that a signal came at grace 0: the SIGKILL round
// follows within microseconds, before a woken process runs; the kernel's
// own record of the signal can.
type signalTrace struct {
	t   *testing.T
	dir string
}

func startSignalTrace(t *testing.T) *signalTrace {
	t.Helper()
	dir := filepath.Join(tracefs(t), "instances", "corral-test-"+randomHex())
	if err := os.Mkdir(dir, 0o700); err != nil {
		missingFeature(t, fmt.Sprintf("no tracefs instance for the signal_generate tracepoint: %v", err))
	}
	tr := &signalTrace{t: t, dir: dir}
	t.Cleanup(func() {
		tr.write("events/signal/signal_generate/enable", "0")
		for deadline := time.Now().Add(goneTimeout); ; time.Sleep(10 * time.Millisecond) {
			if err := os.Remove(dir); err == nil || os.IsNotExist(err) {
				return
			} else if time.Now().After(deadline) {
				t.Errorf("removing the trace instance %s: %v", dir, err)
				return
			}
		}
	})
	tr.write("trace_clock", "global")
	tr.write("events/signal/signal_generate/filter", "sig == 9 || sig == 15 || sig == 18")
	tr.write("events/signal/signal_generate/enable", "1")
	return tr
}

// tracefs returns where tracefs is mounted: the host's
// /sys/kernel/tracing when it is, else a mount of the test's own on a
// temporary folder, unmounted at the test's end. A fresh machine has none
// mounted (systemd mounts it on first access only where it runs), and
// tracefs is one file system whatever the mount point, so a private mount
// sees the same instances and tracepoints without changing the host's
// /sys for anything else.
func tracefs(t *testing.T) string {
	t.Helper()
	const host = "/sys/kernel/tracing"
	if _, err := os.Stat(filepath.Join(host, "instances")); err == nil {
		return host
	}
	dir := t.TempDir()
	if err := unix.Mount("nodev", dir, "tracefs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		missingFeature(t, fmt.Sprintf("tracefs is not mounted at %s and mounting it on %s failed: %v", host, dir, err))
	}
	// Registered after TempDir's own cleanup, so it runs first: the
	// folder is empty again when TempDir removes it.
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting the test's tracefs at %s: %v", dir, err)
		}
	})
	return dir
}

func (tr *signalTrace) write(name, value string) {
	tr.t.Helper()
	if err := os.WriteFile(filepath.Join(tr.dir, name), []byte(value), 0); err != nil {
		tr.t.Fatalf("tracefs %s: %v", name, err)
	}
}

var signalEvent = regexp.MustCompile(`signal_generate: sig=(\d+) .* pid=(\d+) grp=\d+ res=(\d+)`)

// signals stops the trace and returns, per pid, the signals generated for
// it in the order they were.
func (tr *signalTrace) signals() map[int][]int {
	tr.t.Helper()
	tr.write("events/signal/signal_generate/enable", "0")
	data, err := os.ReadFile(filepath.Join(tr.dir, "trace"))
	if err != nil {
		tr.t.Fatal(err)
	}
	got := map[int][]int{}
	for line := range strings.SplitSeq(string(data), "\n") {
		if m := signalEvent.FindStringSubmatch(line); m != nil {
			sig, _ := strconv.Atoi(m[1])
			pid, _ := strconv.Atoi(m[2])
			got[pid] = append(got[pid], sig)
		}
	}
	return got
}

// awaitTree waits until n processes of the runner's tree carry the
// test's marker, stopped of them at least, and returns them.
func (e *env) awaitTree(c *running, n, stopped int) []procInfo {
	e.t.Helper()
	deadline := time.Now().Add(readyTimeout)
	for {
		var ps []procInfo
		t := 0
		for _, p := range markedProcs(e.marker) {
			if strings.HasPrefix(p.cmdline, corralBin) {
				continue // corral's own command line holds the marker
			}
			ps = append(ps, p)
			if p.state == "T" {
				t++
			}
		}
		if len(ps) == n && t >= stopped {
			return ps
		}
		if c.exited() || time.Now().After(deadline) {
			e.t.Fatalf("want %d processes, %d stopped; found:\n%s%s", n, stopped, formatProcs(ps), c.partial())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// In subreaper mode as root, with a cgroup and --grace 0: the runner's
// children trap SIGTERM and are stopped, their children are in sessions
// of their own, and their grandchildren, orphaned to corral, trap SIGTERM
// and are stopped. Each of the nine gets SIGTERM, and each stopped one
// SIGCONT after it, before its SIGKILL; -v says the round went through
// the cgroup's member list; nothing is left.
func TestTeardownGraceZeroThroughCgroup(t *testing.T) {
	t.Parallel()
	m := modes[0] // subreaper, as root
	e := newEnv(t, m)
	cgroupV2(t)
	ready := e.file("ready")
	catch := []string{"catch", "-keep", "TERM,CONT", "-stop"}
	runner := e.helper(append(append([]string{"spawn", "-ignore-term", "-count", "2", "-await-stopped", "-ready", ready, "-then", "sleep", "--"},
		catch...), append([]string{"--", "spawn", "-orphan", "-count", "2", "-then", "sleep", "--"}, catch...)...)...)
	c := e.start(e.args([]string{"-v", "--grace", "0"}, runner))
	c.waitFile(ready)
	tree := e.awaitTree(c, 9, 6)
	trace := startSignalTrace(t)

	c.signal(syscall.SIGTERM)
	res := c.wait(corralTimeout)
	sent := trace.signals()
	wantCode(t, res, 128+int(syscall.SIGKILL)) // the runner ignores SIGTERM
	e.assertGone()
	for _, p := range tree {
		if err := termBeforeKill(sent[p.pid], p.state == "T"); err != nil {
			t.Errorf("pid %d (state %s, %s): %v; signals generated: %v", p.pid, p.state, p.cmdline, err, sent[p.pid])
		}
	}
	dir := runCgroup(res.stderr)
	if dir == "" {
		t.Fatalf("-v names no cgroup:\n%s", res.stderr)
	}
	for _, want := range []string{
		"teardown: SIGTERM through " + dir + "/cgroup.procs\n",
		"teardown: SIGTERM to 9 processes, grace 0s",
		"teardown: SIGKILL through " + dir + "/cgroup.kill",
	} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("-v lacks %q:\n%s", want, res.stderr)
		}
	}
	if strings.Contains(res.stderr, "walking /proc") {
		t.Errorf("the SIGTERM round walked /proc:\n%s", res.stderr)
	}
	wantRemoved(t, dir)
}

// termBeforeKill checks one process's signals: SIGTERM, then SIGCONT if
// it was stopped, before any SIGKILL (a process that dies of SIGTERM
// gets none).
func termBeforeKill(sigs []int, stopped bool) error {
	at := func(sig int) int {
		for i, s := range sigs {
			if s == sig {
				return i
			}
		}
		return len(sigs)
	}
	term, cont, kill := at(int(syscall.SIGTERM)), at(int(syscall.SIGCONT)), at(int(syscall.SIGKILL))
	switch {
	case term == len(sigs):
		return fmt.Errorf("no SIGTERM")
	case term > kill:
		return fmt.Errorf("SIGTERM after SIGKILL")
	case stopped && (cont < term || cont > kill):
		return fmt.Errorf("stopped, and no SIGCONT between SIGTERM and SIGKILL")
	}
	return nil
}
