package test

// Namespaces and the runner's privileges (docs/modes.md,
// docs/privileges.md).

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRunnerPrivileges(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		const none, netBindService = "0000000000000000", "0000000000000400" // bit 10
		for _, tc := range []struct {
			name string
			opts []string
			caps string
			nnp  string
		}{
			{"default", nil, none, "1"},
			{"cap-add", []string{"--cap-add", "NET_BIND_SERVICE"}, netBindService, "1"},
			{"cap-add-with-prefix", []string{"--cap-add", "CAP_NET_BIND_SERVICE"}, netBindService, "1"},
			{"allow-new-privs", []string{"--allow-new-privs"}, none, "0"},
			// A resource limit takes the re-executed exec stage rather than
			// the in-engine start: the same promises hold there.
			{"exec-stage", []string{"--rlimit", "RLIMIT_CORE=0"}, none, "1"},
			{"exec-stage-cap-add", []string{"--rlimit", "RLIMIT_CORE=0", "--cap-add", "NET_BIND_SERVICE"}, netBindService, "1"},
			{"exec-stage-allow-new-privs", []string{"--rlimit", "RLIMIT_CORE=0", "--allow-new-privs"}, none, "0"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, m)
				res := e.run(e.args(opts("", "0.1", tc.opts...), e.helper("report")))
				wantCode(t, res, 0)
				r := parseReport(t, res.stdout)
				for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
					if r[set] != tc.caps {
						t.Errorf("runner %s: want %s, got %s", set, tc.caps, r[set])
					}
				}
				if r["NoNewPrivs"] != tc.nnp {
					t.Errorf("runner NoNewPrivs: want %s, got %s", tc.nnp, r["NoNewPrivs"])
				}
				e.assertGone()
			})
		}
	})
}

func TestRunnerIdentityAndView(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		res := e.run(e.args(opts("", "0.1"), e.helper("report")))
		wantCode(t, res, 0)
		r := parseReport(t, res.stdout)
		id := strconv.Itoa(m.uid())
		if want := strings.Repeat(id+" ", 3) + id; r["Uid"] != want {
			t.Errorf("runner Uid (real effective saved fs): want %q, the caller's, got %q", want, r["Uid"])
		}
		gid := 0
		if m.rootless {
			gid = nobodyGID
		}
		if want := strings.Repeat(strconv.Itoa(gid)+" ", 3) + strconv.Itoa(gid); r["Gid"] != want {
			t.Errorf("runner Gid: want %q, the caller's, got %q", want, r["Gid"])
		}
		if !m.pidns() {
			e.assertGone()
			return
		}
		if r["ppid"] != "1" {
			t.Errorf("runner's parent: want PID 1 (corral's engine), got %s", r["ppid"])
		}
		if !pid1IsCorral(r["pid1_cmdline"]) {
			t.Errorf("PID 1 in the runner's namespace is not corral: %q", r["pid1_cmdline"])
		}
		if n, err := strconv.Atoi(r["proc_pids"]); err != nil || n >= 10 {
			t.Errorf("the runner's /proc lists %s processes: want only the namespace's few", r["proc_pids"])
		}
		e.assertGone()
	})
}

func TestSIGKILLOfCorralTakesWholeNamespaceDown(t *testing.T) {
	t.Parallel()
	for _, m := range modes {
		if !m.pidns() {
			continue // subreaper mode: a documented limit
		}
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, m)
			ready := e.file("ready")
			runner := e.helper("spawn", "-setsid", "-ready", ready, "-then", "sleep", "--", "sleep", "-ignore-term")
			c := e.start(e.args(opts(e.file("state.json"), "10"), runner))
			c.waitFile(ready)
			if n := len(markedProcs(e.marker)); n < 3 {
				t.Fatalf("want corral, its init, the runner and the helper alive, found %d:\n%s", n, formatProcs(markedProcs(e.marker)))
			}
			c.signal(syscall.SIGKILL)
			res := c.wait(corralTimeout)
			if res.signal != syscall.SIGKILL {
				t.Errorf("corral: want killed by SIGKILL, got %v", res)
			}
			if left := waitMarkedGone(e.marker, 2*time.Second); len(left) > 0 {
				t.Errorf("2 s after corral was SIGKILLed, processes it started survive:\n%s", formatProcs(left))
			}
			removeOrphanCgroups(t, c.cmd.Process.Pid)
		})
	}
}

func TestVerboseNamesChosenMode(t *testing.T) {
	t.Parallel()
	// One run per user the modes run corral as; the pidns mode of that user
	// says whether auto should pick pidns.
	for _, m := range modes {
		if !m.pidns() {
			continue
		}
		tc := struct {
			name string
			m    mode
		}{"auto-as-root", m}
		if m.rootless {
			tc.name = "auto-as-nobody"
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Run as the mode's user even where the mode itself cannot run.
			user := tc.m
			user.needsPIDNS = false
			e := newEnv(t, user)
			res := e.run([]string{"-v", "--mode", "auto", "--", "/bin/true", e.marker})
			wantCode(t, res, 0)
			want := "pidns"
			if tc.m.unavailable() != "" {
				want = "subreaper"
			}
			found := false
			for _, line := range strings.Split(res.stderr, "\n") {
				if strings.Contains(line, want) {
					found = true
				}
			}
			if !found {
				t.Errorf("-v --mode auto: want a stderr line naming mode %q, got %q", want, res.stderr)
			}
			e.assertGone()
		})
	}
}

// removeOrphanCgroups removes the empty cgroups a SIGKILLed corral of pid
// left (as root, where the init made one, corral-PID-*, named after the
// host side): nobody is left to remove them, the documented limit, and a
// test leaves nothing behind.
func removeOrphanCgroups(t *testing.T, pid int) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return
	}
	var own string
	for line := range strings.SplitSeq(string(data), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			own = p
		}
	}
	for _, mount := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		dirs, _ := filepath.Glob(filepath.Join(mount, own, fmt.Sprintf("corral-%d-*", pid)))
		for _, dir := range dirs {
			deadline := time.Now().Add(goneTimeout)
			for os.Remove(dir) != nil && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond) // the killed tree still leaving it
			}
		}
	}
}
