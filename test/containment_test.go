package test

// Containment that nothing the runner (or the world around corral) does can
// break (issue 8; docs/signals-and-teardown.md,
// docs/usage.md "Exit status"):
// broken pipes, fatal and early signals, an exhausted pids limit, a lowered
// RLIMIT_NOFILE, orphans handed over while the tree is walked.

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// runtimeCrash are the marks of a Go runtime fault or an uncaught signal
// on corral's stderr: none may ever reach a user.
var runtimeCrash = []string{"goroutine ", "fatal error", "panic:", "SIGQUIT: quit", "SIGABRT: abort", "[signal ", "runtime: "}

func wantNoCrash(t *testing.T, stderr string) {
	t.Helper()
	for _, mark := range runtimeCrash {
		if strings.Contains(stderr, mark) {
			t.Fatalf("corral's stderr shows a runtime crash (%q):\n%s", mark, stderr)
		}
	}
}

// A closed pipe behind corral's stderr: corral's own writes to it (-v
// lines, the "process state unavailable" line) fail with EPIPE, and
// corral goes on: the runner's status, nothing left, the final state.
func TestClosedStderrPipe(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		for _, tc := range []struct {
			name  string
			extra func(e *env) []string
		}{
			{"verbose", func(e *env) []string { return []string{"-v", "--state", e.file("state.json")} }},
			{"unwritable-state", func(e *env) []string { return []string{"--state", "/proc/1/no-such-dir/state.json"} }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, m)
				r, w, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				r.Close() // nobody will ever read corral's stderr
				runner := e.helper("spawn", "-setsid", "-code", "5", "--", "sleep", "-ignore-term")
				cmd := e.command(e.args(append([]string{"--grace", "0.2", "--poll", "0.01"}, tc.extra(e)...), runner))
				cmd.Stderr = w
				c := e.startCmd(cmd)
				w.Close()
				res := c.wait(corralTimeout)
				wantCode(t, res, 5)
				e.assertGone()
				if tc.name == "verbose" {
					wantState(t, readState(t, e.file("state.json")), map[string]any{
						"phase": "exited", "runner_exit_code": 5, "escalated": true, "active_children": 0,
					})
				}
			})
		}
	})
}

// initPID returns the pid, in the host's namespace, of the init a pidns
// corral cloned (its only child).
func initPID(t *testing.T, corral int) int {
	t.Helper()
	deadline := time.Now().Add(readyTimeout)
	for time.Now().Before(deadline) {
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", corral))
		for _, task := range tasks {
			data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", corral, task.Name()))
			if f := strings.Fields(string(data)); len(f) > 0 {
				if pid, err := strconv.Atoi(f[0]); err == nil {
					return pid
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("corral (pid %d) has no child", corral)
	return 0
}

// A fault signal sent with kill(2) (a systemd watchdog's SIGABRT) is not a
// fault of corral's: it goes to the runner alone, corral prints no dump and
// exits with the runner's status. In pidns mode, to the init too.
func TestFaultSignalsFromKillAreForwarded(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		targets := []string{"corral"}
		if m.pidns() {
			targets = append(targets, "init")
		}
		for _, target := range targets {
			for _, sig := range []syscall.Signal{syscall.SIGABRT, syscall.SIGSEGV, syscall.SIGBUS} {
				t.Run(target+"-"+unix.SignalName(sig), func(t *testing.T) {
					t.Parallel()
					e := newEnv(t, m)
					ready, runnerLog, helperLog := e.file("ready"), e.file("runner.log"), e.file("helper.log")
					name := unix.SignalName(sig)
					runner := e.helper("catch", "-ready", ready, "-log", runnerLog, "-exit", name, "--",
						"catch", "-log", helperLog, "-keep", name)
					c := e.start(e.args(opts(e.file("state.json"), "0.2"), runner))
					c.waitFile(ready)
					pid := c.cmd.Process.Pid
					if target == "init" {
						pid = initPID(t, pid)
					}
					if err := unix.Kill(pid, sig); err != nil {
						t.Fatal(err)
					}
					res := c.wait(corralTimeout)
					wantCode(t, res, 100+int(sig))
					wantNoCrash(t, res.stderr)
					if data, _ := os.ReadFile(runnerLog); string(data) != name+"\n" {
						t.Errorf("runner's log: want %q, got %q", name+"\n", data)
					}
					if data, err := os.ReadFile(helperLog); err == nil {
						t.Errorf("%s reached the runner's helper too: %q", name, data)
					}
					e.assertGone()
					wantState(t, readState(t, e.file("state.json")), map[string]any{
						"termination_signal": nil, "runner_exit_code": 100 + int(sig), "phase": "exited",
					})
				})
			}
		}
	})
}

// SIGHUP is a reload, not a cancel: it reaches the runner alone, the run
// goes on (a service trapping it keeps serving), and termination_signal
// stays null.
func TestHangupReachesRunnerAndRunGoesOn(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		state, ready, runnerLog, helperLog := e.file("state.json"), e.file("ready"), e.file("runner.log"), e.file("helper.log")
		runner := e.helper("catch", "-ready", ready, "-log", runnerLog, "-keep", "HUP", "-exit", "USR1", "--",
			"catch", "-log", helperLog, "-keep", "HUP")
		c := e.start(e.args(opts(state, "0.2"), runner))
		c.waitFile(ready)
		for i := 1; i <= 2; i++ {
			c.signal(syscall.SIGHUP)
			waitLines(t, c, runnerLog, i)
		}
		if c.exited() {
			t.Fatalf("corral ended on SIGHUP: %v", c.result())
		}
		wantState(t, readState(t, state), map[string]any{"phase": "running", "termination_signal": nil})
		c.signal(syscall.SIGUSR1)
		res := c.wait(corralTimeout)
		wantCode(t, res, 100+int(syscall.SIGUSR1))
		if data, _ := os.ReadFile(runnerLog); string(data) != "SIGHUP\nSIGHUP\nSIGUSR1\n" {
			t.Errorf("runner's log: %q", data)
		}
		if data, err := os.ReadFile(helperLog); err == nil {
			t.Errorf("SIGHUP reached the runner's helper too: %q", data)
		}
		e.assertGone()
		wantState(t, readState(t, state), map[string]any{
			"termination_signal": nil, "runner_exit_code": 100 + int(syscall.SIGUSR1), "escalated": false,
		})
	})
}

// waitLines waits (bounded) until path holds n lines.
func waitLines(t *testing.T, c *running, path string, n int) {
	t.Helper()
	deadline := time.Now().Add(readyTimeout)
	for {
		data, _ := os.ReadFile(path)
		if strings.Count(string(data), "\n") >= n {
			return
		}
		if time.Now().After(deadline) || c.exited() {
			t.Fatalf("%s never got %d lines (has %q): %s", path, n, data, c.partial())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// rounds runs fn n times in parallel subtests.
func rounds(t *testing.T, n int, fn func(t *testing.T, round int)) {
	for i := 0; i < n; i++ {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			fn(t, i)
		})
	}
}

// A cancel in corral's first milliseconds, while it starts the runner or
// before the runner exists: 128+S, never a goroutine dump, nothing left.
// The signal goes as soon as corral's code runs (its state file exists),
// after a random 0-3 ms more. That is past the one window
// docs/signals-and-teardown.md allows (the Go runtime's start, before corral's
// package early has registered the fatal signals, which it does before
// main: test/bench/window measures it), in every process of the run: the
// host registered before its main, and in pidns mode the init before it
// said ready. So being killed by the signal is a failure here too, not the
// window: it was the host's registration, then in a goroutine, not yet run
// on a loaded machine when the init had written the state file (issue 26).
func TestEarlyCancelSignals(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		for _, sig := range []syscall.Signal{syscall.SIGQUIT, syscall.SIGTERM} {
			t.Run(unix.SignalName(sig), func(t *testing.T) {
				t.Parallel()
				rounds(t, 20, func(t *testing.T, round int) {
					e := newEnv(t, m)
					state := e.file("state.json")
					// A grace the runner's death by the signal fits in on a
					// loaded machine: past it, SIGKILL, and 137 (under two
					// CPU hogs, 0.2 s was too short for SIGQUIT's core path).
					c := e.start(e.args(opts(state, "5"), []string{"/bin/sleep", "1000"}), e.markerEnv())
					deadline := time.Now().Add(readyTimeout)
					for {
						if _, err := os.Stat(state); err == nil {
							break
						}
						if c.exited() || time.Now().After(deadline) {
							t.Fatalf("no state file: %s", c.partial())
						}
						time.Sleep(50 * time.Microsecond)
					}
					time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
					c.signal(sig)
					res := c.wait(corralTimeout)
					if res.code < 0 && res.signal == sig {
						t.Fatalf("corral was killed by %v, sent once its state file existed: it had not registered the fatal signals yet\n%v", sig, res)
					}
					wantCode(t, res, 128+int(sig))
					wantNoCrash(t, res.stderr)
					e.assertGone()
					wantState(t, readState(t, state), map[string]any{
						"termination_signal": int(sig), "runner_exit_code": 128 + int(sig), "phase": "exited",
					})
				})
			})
		}
	})
}

// A runner whose first action is to signal its parent (corral, or the
// init in pidns mode) gets the signal back: corral registered every
// signal before the runner existed.
func TestRunnerSignallingParentFirstThing(t *testing.T) {
	sigs := []string{"USR1", "USR2", "HUP", "WINCH", "ALRM", "CONT", "PWR", "XCPU", "IO", "VTALRM", "35", "40", "50", "64", "ABRT", "SEGV", "BUS", "USR1", "USR2", "HUP"}
	forEachMode(t, func(t *testing.T, m mode) {
		rounds(t, len(sigs), func(t *testing.T, round int) {
			e := newEnv(t, m)
			res := e.run(e.args(opts("", "0.2"), e.helper("sigparent", "-sig", sigs[round])))
			wantCode(t, res, 0)
			wantNoCrash(t, res.stderr)
			e.assertGone()
		})
	})
}

// pidsCgroup makes a v1 pids cgroup with pids.max = max, and removes it
// when the test ends (waiting for it to empty).
func pidsCgroup(t *testing.T, max int) string {
	t.Helper()
	root := "/sys/fs/cgroup/pids"
	if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
		missingFeature(t, "no v1 pids controller at "+root+": "+err.Error())
	}
	dir := filepath.Join(root, "corral-test-"+randomHex())
	if err := os.Mkdir(dir, 0o755); err != nil {
		missingFeature(t, "cannot make a pids cgroup: "+err.Error())
	}
	t.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := os.Remove(dir)
			if err == nil || os.IsNotExist(err) {
				return
			}
			if time.Now().After(deadline) {
				procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
				t.Errorf("removing %s: %v (procs: %q)", dir, err, procs)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.Itoa(max)), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startInCgroup starts corral with args inside cgroup dir: a shell waits on
// a pipe until the test has moved it there, then execs corral, so that
// every thread and child corral ever has is counted against the limit.
func (e *env) startInCgroup(dir string, args []string, extraEnv ...string) *running {
	e.t.Helper()
	cmd := e.command(nil, extraEnv...)
	cmd.Path = "/bin/sh"
	cmd.Args = append([]string{"sh", "-c", `read go <&3; exec "$@"`, "sh", corralBin}, args...)
	r, w, err := os.Pipe()
	if err != nil {
		e.t.Fatal(err)
	}
	cmd.ExtraFiles = []*os.File{r}
	c := e.startCmd(cmd)
	r.Close()
	defer w.Close()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		e.t.Fatalf("moving corral into %s: %v", dir, err)
	}
	if _, err := w.Write([]byte("go\n")); err != nil {
		e.t.Fatal(err)
	}
	return c
}

// A fork bomb in a pids-limited cgroup that corral shares: the Go runtime
// must never need a new OS thread (it would fail to make one and crash
// corral), and the teardown must win against the bomb.
func TestForkBombInPidsLimitedCgroup(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		dir := pidsCgroup(t, 64)
		// The runner starts a bomb (every process forks copies of itself
		// forever; a dash whose fork fails exits, which frees a pid for
		// the others) and exits 7 at once; corral tears down under a full
		// pids.max.
		bomb := `exec 2>/dev/null; f() { while :; do f & done; }; f & exit 7`
		c := e.startInCgroup(dir, e.args(opts(e.file("state.json"), "0.3"), []string{"/bin/sh", "-c", bomb}), e.markerEnv())
		res := c.wait(corralTimeout)
		wantCode(t, res, 7)
		wantNoCrash(t, res.stderr)
		e.assertGone()
		doc := readState(t, e.file("state.json"))
		wantState(t, doc, map[string]any{"phase": "exited", "runner_exit_code": 7, "active_children": 0})
		if events, err := os.ReadFile(filepath.Join(dir, "pids.events")); err == nil {
			t.Logf("pids.events: %s", bytes.TrimSpace(events))
		}
	})
}

// The runner lowers corral's RLIMIT_NOFILE to 3:3 (prlimit needs only its
// uid), then leaves a helper that ignores SIGTERM: corral cannot open
// /proc any more, yet the teardown completes: it restores the limit where
// it holds CAP_SYS_RESOURCE, and as PID 1 of its namespace it needs no
// descriptor to kill(-1).
func TestLoweredNofileDoesNotHangTeardown(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		script := `prlimit --pid $PPID --nofile=3:3 || exit 99; exec "$@"`
		runner := append([]string{"/bin/sh", "-c", script, "sh"}, e.helper("spawn", "-setsid", "-code", "4", "--", "sleep", "-ignore-term")...)
		res := e.run(e.args([]string{"--grace", "0.2", "-v"}, runner), e.markerEnv())
		wantCode(t, res, 4)
		wantNoCrash(t, res.stderr)
		e.assertGone()
	})
}

// Graceful shutdown stays graceful when the tree changes under the walk:
// twenty sessions whose leader dies of SIGTERM hand their child to corral
// while the SIGTERM round walks another branch; a TERM trap starts a new
// process. Each gets SIGTERM once, and the run ends long before the 10 s
// grace, with escalated false.
func TestProcessesJoiningDuringGraceGetSigterm(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		for _, tc := range []struct{ name, script string }{
			{"twenty-sessions", `for i in $(seq 20); do setsid sh -c "sleep 1000 & wait" & done; sleep 0.5; exit 3`},
			{"term-trap-forks", `setsid sh -c 'trap "sleep 1000 & wait; exit 0" TERM; while :; do sleep 0.05; done' & sleep 0.5; exit 3`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, m)
				state := e.file("state.json")
				res := e.run(e.args(opts(state, "10", "-v"), []string{"/bin/bash", "-c", tc.script}), e.markerEnv())
				wantCode(t, res, 3)
				e.assertGone()
				wantState(t, readState(t, state), map[string]any{
					"escalated": false, "runner_exit_code": 3, "phase": "exited", "active_children": 0,
				})
			})
		}
	})
}

// A signal the caller left ignored (nohup) stays ignored by corral and
// reaches the runner ignored: the runner's SigIgn is the same as when it
// runs directly. SIGINT, which a non-interactive shell's & ignores, too.
func TestIgnoredSignalsStayIgnored(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sigIgn := func(out string) uint64 {
			for _, line := range strings.Split(out, "\n") {
				if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
					n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
					if err == nil {
						return n
					}
				}
			}
			t.Fatalf("no SigIgn line in %q", out)
			return 0
		}
		grep := []string{"/bin/grep", "^SigIgn:", "/proc/self/status"}
		for _, tc := range []struct {
			name string
			wrap func(argv []string) []string
			bit  syscall.Signal
		}{
			{"nohup", func(argv []string) []string { return append([]string{"/usr/bin/nohup"}, argv...) }, syscall.SIGHUP},
			{"shell-background", func(argv []string) []string {
				return append([]string{"/bin/sh", "-c", `"$@" & wait`, "sh"}, argv...)
			}, syscall.SIGINT},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, m)
				run := func(argv []string) string {
					cmd := e.command(nil, e.markerEnv())
					cmd.Path, cmd.Args = argv[0], argv
					res := e.startCmd(cmd).wait(corralTimeout)
					wantCode(t, res, 0)
					return res.stdout
				}
				direct := sigIgn(run(tc.wrap(grep)))
				viaCorral := sigIgn(run(tc.wrap(append([]string{corralBin}, e.args(opts("", "0.1"), grep)...))))
				bit := uint64(1) << (tc.bit - 1)
				if direct&bit == 0 {
					t.Fatalf("the direct run does not ignore %v (SigIgn %016x): the test is wrong", tc.bit, direct)
				}
				if tc.name == "nohup" && viaCorral != direct {
					t.Errorf("runner's SigIgn under nohup: %016x, run directly: %016x", viaCorral, direct)
				}
				if viaCorral&bit == 0 {
					t.Errorf("the runner does not ignore %v (SigIgn %016x; directly %016x)", tc.bit, viaCorral, direct)
				}
				if viaCorral&(1<<(syscall.SIGPIPE-1)) != 0 && direct&(1<<(syscall.SIGPIPE-1)) == 0 {
					t.Errorf("the runner ignores SIGPIPE (SigIgn %016x)", viaCorral)
				}
				e.assertGone()
			})
		}
	})
}

// corral --mode pidns as PID 1 of a container reaps whatever the kernel
// hands it, not only its init: a process started into its namespace from
// outside (docker exec) whose parent left is reparented to it, and must
// not stay a zombie once it exits.
func TestPidnsHostAsPID1ReapsStrayOrphans(t *testing.T) {
	t.Parallel()
	m := mode{name: "pidns-as-pid1", flag: "pidns", needsPIDNS: true}
	e := newEnv(t, m)
	if _, err := exec.LookPath("nsenter"); err != nil {
		missingFeature(t, "nsenter (util-linux) is not installed")
	}
	ready := e.file("ready")
	cmd := e.command(nil)
	cmd.Path = helperBin
	cmd.Args = append(e.helper("pid1", "--", corralBin), e.args(opts("", "0.1"), e.helper("sleep", "-ready", ready))...)
	cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWPID | syscall.CLONE_NEWNS
	c := e.startCmd(cmd)
	c.waitFile(ready)

	// The stray: started into corral's PID namespace from outside, by an
	// intermediate that exits at once, so it is orphaned to PID 1 there.
	strayMarker := "stray-" + randomHex()
	enter := exec.Command("nsenter", "--target", strconv.Itoa(cmd.Process.Pid), "--pid", "--",
		helperBin, "-marker", e.marker, "spawn", "-orphan", "--", "exec", "-delay", "1s", "/bin/true", strayMarker)
	// Not a pipe: the stray would hold it open, and the wait for nsenter
	// would last as long as the stray.
	out, err := os.Create(e.file("nsenter.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	enter.Stdout, enter.Stderr = out, out
	if err := enter.Run(); err != nil {
		data, _ := os.ReadFile(e.file("nsenter.out"))
		t.Fatalf("nsenter: %v: %s", err, data)
	}
	stray := 0
	for _, p := range markedProcs(strayMarker) {
		stray = p.pid
	}
	if stray == 0 {
		t.Fatal("the stray orphan is not running")
	}
	if ppid := parentOf(stray); ppid != cmd.Process.Pid {
		t.Fatalf("the stray's parent is %d, want corral (%d)", ppid, cmd.Process.Pid)
	}
	deadline := time.Now().Add(goneTimeout)
	for {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", stray))
		if err != nil {
			break // reaped
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stray orphan was not reaped by corral as PID 1: %s", data)
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.signal(syscall.SIGTERM)
	wantCode(t, c.wait(corralTimeout), 128+int(syscall.SIGTERM))
	e.assertGone()
}

// parentOf returns the parent pid /proc shows for pid, or 0.
func parentOf(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(data, ')')
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// A runner with corral's own uid must not be able to take hold of the
// process whose engine contains it, as a debugger would: the thread that
// forked it has dropped every capability, so the kernel's ptrace checks
// (same uid, a subset of the capabilities) would let the runner attach to
// it, or open the whole process's memory through it, and from there run
// code in corral's other threads, which keep corral's privileges and are
// outside the runner's seccomp filter. Every mode, and subreaper mode as an
// unprivileged user, where every thread of corral is as unprivileged as
// the runner. There is no Yama on these machines to stop it either. With
// --net none in subreaper mode the starter thread is in the runner's
// Landlock domain too, which lets a domain trace its own members.
func TestRunnerCannotTraceCorral(t *testing.T) {
	check := func(t *testing.T, m mode, extra ...string) {
		e := newEnv(t, m)
		res := e.run(e.args(opts("", "0.1", extra...), e.helper("trace-parent")))
		wantCode(t, res, 0)
		threads := 0
		for _, line := range strings.Split(strings.TrimSpace(res.stdout), "\n") {
			what, result, ok := strings.Cut(line, "=")
			if strings.HasPrefix(what, "tid") {
				threads++
				_, result, ok = strings.Cut(result, "seize=")
			}
			if !ok {
				t.Fatalf("unexpected line %q in %q", line, res.stdout)
			}
			if result != "EPERM" && result != "EACCES" {
				t.Errorf("the runner took hold of corral: %s, want EPERM or EACCES", line)
			}
		}
		// The engine's process has more than one thread (the starter among
		// them): a report on one thread alone would prove nothing.
		if threads < 2 {
			t.Errorf("the runner saw %d threads of corral's process: %q", threads, res.stdout)
		}
		e.assertGone()
	}
	forEachMode(t, func(t *testing.T, m mode) { check(t, m) })
	unprivileged := mode{name: "subreaper-uid65534", flag: "subreaper", rootless: true}
	t.Run(unprivileged.name, func(t *testing.T) {
		t.Parallel()
		check(t, unprivileged)
	})
	for _, m := range []mode{modes[0], unprivileged} {
		t.Run(m.name+"-net-none", func(t *testing.T) {
			t.Parallel()
			check(t, m, "--net", "none")
		})
	}
}
