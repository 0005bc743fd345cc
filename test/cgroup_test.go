package test

// cgroup v2 containment (issue 8; docs/signals-and-teardown.md): where a
// writable cgroup v2 exists (root here; a delegated subtree elsewhere) the
// runner starts inside a cgroup of its own, nothing it forks can leave it,
// teardown's SIGKILL goes through cgroup.kill, and the cgroup is removed.
// Where none is writable (rootless without delegation, a seccomp filter
// refusing clone3) the /proc walk stays and -v says why.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cgroupV2 returns the mount point of a writable cgroup v2 hierarchy that
// shows the test's own cgroup, after making and removing a child cgroup
// there to see that it can (and that the kernel has cgroup.kill); it fails
// or skips (missingFeature) otherwise.
func cgroupV2(t *testing.T) string {
	t.Helper()
	mountinfo, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	mount := ""
	for line := range strings.SplitSeq(string(mountinfo), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		fields, after := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 6 || len(after) < 1 || after[0] != "cgroup2" || fields[3] != "/" {
			continue
		}
		if strings.HasPrefix(fields[5], "rw") {
			mount = fields[4]
			break
		}
	}
	if mount == "" {
		missingFeature(t, "no writable cgroup2 mount of the hierarchy's root in /proc/self/mountinfo")
	}
	probe := filepath.Join(mount, ownCgroup(t, os.Getpid()), "corral-test-probe-"+randomHex())
	if err := os.Mkdir(probe, 0o755); err != nil {
		missingFeature(t, fmt.Sprintf("cannot make a cgroup beneath %s: %v", mount, err))
	}
	_, err = os.Stat(filepath.Join(probe, "cgroup.kill"))
	if rerr := os.Remove(probe); rerr != nil {
		t.Errorf("removing the probe cgroup: %v", rerr)
	}
	if err != nil {
		missingFeature(t, "this kernel's cgroup v2 has no cgroup.kill (Linux 5.14 or later)")
	}
	return mount
}

// ownCgroup reads a process's cgroup v2 path from the host's /proc.
func ownCgroup(t *testing.T, pid int) string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatalf("reading the cgroup of pid %d: %v", pid, err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p
		}
	}
	t.Fatalf("pid %d is in no cgroup v2: %q", pid, data)
	return ""
}

// markedPID returns the one live process carrying the test's marker whose
// command line holds word.
func (e *env) markedPID(word string) int {
	e.t.Helper()
	var found []procInfo
	for _, p := range markedProcs(e.marker) {
		if strings.Contains(p.cmdline, "-marker "+e.marker+" "+word+" ") && !strings.HasPrefix(p.cmdline, corralBin) {
			found = append(found, p)
		}
	}
	if len(found) != 1 {
		e.t.Fatalf("want one %q process carrying the marker, found:\n%s", word, formatProcs(found))
	}
	return found[0].pid
}

// forModes is forEachMode for the modes keep accepts (rootless has no
// cgroup without delegation, so some checks only mean something as root).
func forModes(t *testing.T, keep func(mode) bool, fn func(t *testing.T, m mode)) {
	t.Parallel()
	for _, m := range modes {
		if keep(m) {
			t.Run(m.name, func(t *testing.T) {
				t.Parallel()
				fn(t, m)
			})
		}
	}
}

var cgroupLine = regexp.MustCompile(`corral: cgroup: the runner's tree goes into (\S+);`)

// runCgroup is the path the -v output names as the run's cgroup, or "".
func runCgroup(stderr string) string {
	if m := cgroupLine.FindStringSubmatch(stderr); m != nil {
		return m[1]
	}
	return ""
}

// cleanupCgroup removes the run's cgroup dir if a failed test left it
// (corral killed by the test's bound): it is this test's own, so killing
// what is inside hits nobody else's processes.
func cleanupCgroup(t *testing.T, dir string) {
	t.Cleanup(func() {
		if _, err := os.Stat(dir); err != nil {
			return
		}
		_ = os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
		deadline := time.Now().Add(goneTimeout)
		for os.Remove(dir) != nil && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	})
}

func wantRemoved(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the run's cgroup %s is left behind (stat: %v)", dir, err)
		_ = os.Remove(dir)
	}
}

// The runner's tree lives in a cgroup of its own: a double-forked setsid
// helper that ignores SIGTERM is still in it, SIGKILL reaches it through
// cgroup.kill, and the cgroup is gone afterwards. Rootless (uid 65534, no
// delegation) the run works as before, through the /proc walk, and -v says
// why no cgroup is used.
func TestCgroupContainment(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		mount := ""
		if !m.rootless {
			mount = cgroupV2(t)
		}
		ready, state := e.file("ready"), e.file("state.json")
		runner := e.helper("spawn", "-setsid", "-orphan", "-ready", ready, "-pause", "1h", "--", "sleep", "-ignore-term")
		c := e.start(e.args(append(opts(state, "0.3"), "-v"), runner))
		c.waitFile(ready)

		corralCg := ownCgroup(t, c.cmd.Process.Pid)
		runnerCg := ownCgroup(t, e.markedPID("spawn"))
		helperCg := ownCgroup(t, e.markedPID("sleep"))
		if !m.rootless {
			cleanupCgroup(t, filepath.Join(mount, runnerCg))
		}
		if m.pidns() {
			// The engine is the init: it stays where corral is.
			if initCg := ownCgroup(t, initPID(t, c.cmd.Process.Pid)); initCg != corralCg {
				t.Errorf("the init is in cgroup %s, corral in %s", initCg, corralCg)
			}
		}
		if helperCg != runnerCg {
			t.Errorf("the double-forked setsid helper is in cgroup %s, the runner in %s", helperCg, runnerCg)
		}

		c.signal(syscall.SIGTERM)
		res := c.wait(corralTimeout)
		wantCode(t, res, 128+int(syscall.SIGTERM))
		e.assertGone()
		wantState(t, readState(t, state), map[string]any{"phase": "exited", "escalated": true, "active_children": 0})

		if m.rootless {
			if runnerCg != corralCg {
				t.Errorf("rootless, the runner is in cgroup %s, not corral's %s", runnerCg, corralCg)
			}
			for _, want := range []string{"corral: cgroup: not used:", "uid 65534 may not write", "teardown walks /proc"} {
				if !strings.Contains(res.stderr, want) {
					t.Errorf("-v does not say why no cgroup is used (%q):\n%s", want, res.stderr)
				}
			}
			if strings.Contains(res.stderr, "cgroup.kill") {
				t.Errorf("rootless -v mentions cgroup.kill:\n%s", res.stderr)
			}
			return
		}
		if path.Dir(runnerCg) != corralCg || !strings.HasPrefix(path.Base(runnerCg), "corral-") {
			t.Errorf("the runner's cgroup %s is not a corral-… cgroup beneath corral's %s", runnerCg, corralCg)
		}
		dir := filepath.Join(mount, runnerCg)
		if named := runCgroup(res.stderr); named != dir {
			t.Errorf("-v names the run's cgroup %q, want %q:\n%s", named, dir, res.stderr)
		}
		for _, want := range []string{
			"teardown: SIGKILL through " + dir + "/cgroup.kill",
			"cgroup: " + dir + " empty (populated 0), removed",
		} {
			if !strings.Contains(res.stderr, want) {
				t.Errorf("-v lacks %q:\n%s", want, res.stderr)
			}
		}
		wantRemoved(t, dir)
	})
}

// A run that fails after its cgroup was made (the runner cannot be
// exec'd, on either start path) removes the cgroup too.
func TestCgroupRemovedAfterFailedStart(t *testing.T) {
	forModes(t, func(m mode) bool { return !m.rootless }, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		cgroupV2(t)
		for _, extra := range [][]string{nil, {"--rlimit", "RLIMIT_NOFILE=1024:1024"}} { // the starter thread, the exec stage
			res := e.run(e.args(append([]string{"-v"}, extra...), []string{"/nonexistent-" + e.marker}))
			wantCode(t, res, 127)
			dir := runCgroup(res.stderr)
			if dir == "" {
				t.Fatalf("-v names no cgroup for the run (%v):\n%s", extra, res.stderr)
			}
			wantRemoved(t, dir)
		}
	})
}

// Where a seccomp filter refuses clone3 (Docker's default profile answers
// ENOSYS), no process can be started into a cgroup: the run works through
// the /proc walk, nothing is left, and -v says why.
func TestCgroupClone3Refused(t *testing.T) {
	t.Parallel()
	m := modes[0] // subreaper, as root
	e := newEnv(t, m)
	cgroupV2(t)
	runner := e.helper("spawn", "-setsid", "-orphan", "-code", "4", "--", "sleep", "-ignore-term")
	args := append([]string{"-marker", e.marker, "deny-namespaces", "--", corralBin}, e.args([]string{"-v", "--grace", "0.2"}, runner)...)
	cmd := e.command(nil)
	cmd.Path, cmd.Args = helperBin, append([]string{helperBin}, args...)
	res := e.startCmd(cmd).wait(corralTimeout)
	wantCode(t, res, 4)
	e.assertGone()
	for _, want := range []string{"corral: cgroup: not used:", "clone3 is refused", "teardown walks /proc"} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("-v lacks %q:\n%s", want, res.stderr)
		}
	}
	if strings.Contains(res.stderr, "cgroup.kill") {
		t.Errorf("-v mentions cgroup.kill though no cgroup was used:\n%s", res.stderr)
	}
}

// corral probe says whether runs get a cgroup, and why not.
// The probe does not depend on the mode: root once, rootless once.
func TestProbeCgroup(t *testing.T) {
	forModes(t, func(m mode) bool { return m.rootless || !m.pidns() }, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		if !m.rootless {
			cgroupV2(t)
		}
		_, available, detail := parseProbe(t, e.run([]string{"probe", "--json"}))
		got := detail["cgroup v2"]
		if available["cgroup v2"] == m.rootless {
			t.Errorf("probe: cgroup v2 available %v as uid %d: %q", available["cgroup v2"], m.uid(), got)
		}
		want := "cgroup.kill"
		if m.rootless {
			want = "may not write"
		}
		if !strings.Contains(got, want) {
			t.Errorf("probe's cgroup v2 detail lacks %q: %q", want, got)
		}
	})
}
