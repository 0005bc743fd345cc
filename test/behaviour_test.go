package test

// Signals, stdio, teardown and environment, beyond the Python supervisor's scenarios
// (seed_test.go).

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestCancelSignalFromOutside(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		for _, tc := range []struct {
			name      string
			sig       syscall.Signal
			runner    []string // helper flags of the runner, a "sleep"
			code      int
			escalated bool
		}{
			{"term-runner-handles-it", syscall.SIGTERM, []string{"-exit-on-term", "42"}, 42, false},
			{"term-runner-ignores-it", syscall.SIGTERM, []string{"-ignore-term"}, 137, true},
			{"term-runner-dies", syscall.SIGTERM, nil, 128 + 15, false},
			{"int-runner-dies", syscall.SIGINT, nil, 128 + 2, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, m)
				state, ready := e.file("state.json"), e.file("ready")
				runner := e.helper(append(append([]string{"sleep"}, tc.runner...), "-ready", ready)...)
				c := e.start(e.args(opts(state, "0.05"), runner))
				c.waitFile(ready)
				c.signal(tc.sig)
				res := c.wait(corralTimeout)
				wantCode(t, res, tc.code)
				e.assertGone()
				doc := readState(t, state)
				wantState(t, doc, map[string]any{
					"termination_signal": int(tc.sig),
					"escalated":          tc.escalated,
					"runner_exit_code":   tc.code,
					"active_children":    0,
					"phase":              "exited",
				})
			})
		}
	})
}

func TestSecondCancelSignalCutsGraceShort(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		state, ready := e.file("state.json"), e.file("ready")
		runner := e.helper("spawn", "-ignore-term", "-setsid", "-ready", ready, "-then", "sleep", "--",
			"sleep", "-ignore-term")
		c := e.start(e.args(opts(state, "30"), runner))
		c.waitFile(ready)
		c.signal(syscall.SIGTERM)
		// Only once corral acted on SIGTERM: two pending signals would be
		// delivered lowest number first.
		c.waitPhase(state, "terminating")
		c.signal(syscall.SIGINT)
		// Grace is 30 s: ending within 15 s means the second signal cut it.
		res := c.wait(15 * time.Second)
		wantCode(t, res, 137)
		e.assertGone()
		doc := readState(t, state)
		wantState(t, doc, map[string]any{
			"termination_signal": 15,
			"escalated":          true,
			"runner_exit_code":   137,
			"active_children":    0,
		})
	})
}

func TestSigusr1ForwardedToRunnerAlone(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		state, ready := e.file("state.json"), e.file("ready")
		runnerGot, helperGot := e.file("runner-usr1"), e.file("helper-usr1")
		// The runner waits for SIGUSR1; its helper records any SIGUSR1.
		runner := e.helper("spawn", "-setsid", "-ready", ready, "-then", "usr1", "-code", "5", "-report", runnerGot, "--",
			"sleep", "-usr1-file", helperGot)
		c := e.start(e.args(opts(state, "0.1"), runner))
		c.waitFile(ready)
		c.signal(syscall.SIGUSR1)
		res := c.wait(corralTimeout)
		wantCode(t, res, 5)
		if res.stdout != "got SIGUSR1\n" {
			t.Errorf("runner stdout: want %q, got %q", "got SIGUSR1\n", res.stdout)
		}
		if _, err := os.Stat(runnerGot); err != nil {
			t.Errorf("the runner did not receive SIGUSR1: %v", err)
		}
		if data, err := os.ReadFile(helperGot); err == nil {
			t.Errorf("SIGUSR1 reached the runner's helper too: %q", data)
		}
		e.assertGone()
		doc := readState(t, state)
		wantState(t, doc, map[string]any{"termination_signal": nil, "runner_exit_code": 5, "active_children": 0})
	})
}

func TestStdioPassThroughUnchanged(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		inR, inW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		outR, outW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer inW.Close()
		defer outR.Close()
		cmd := e.command(e.args(opts(e.file("state.json"), "0.1"),
			e.helper("cat", "-stderr", "to-stderr", "-code", "4")))
		cmd.Stdin, cmd.Stdout = inR, outW
		c := e.startCmd(cmd)
		inR.Close()
		outW.Close()

		// The first chunk comes back while stdin is still open: nothing
		// between the runner and the caller buffers.
		first := []byte("ping\n")
		if _, err := inW.Write(first); err != nil {
			t.Fatal(err)
		}
		outR.SetReadDeadline(time.Now().Add(readyTimeout))
		got := make([]byte, len(first))
		if _, err := io.ReadFull(outR, got); err != nil {
			t.Fatalf("reading the echo of the first chunk while the runner lives: %v (%s)", err, c.partial())
		}
		if !bytes.Equal(got, first) {
			t.Fatalf("first chunk: want %q, got %q", first, got)
		}

		// Then every byte value, no trailing newline, and EOF.
		var payload []byte
		for i := 0; i < 4*256; i++ {
			payload = append(payload, byte(i))
		}
		if _, err := inW.Write(payload); err != nil {
			t.Fatal(err)
		}
		inW.Close()
		outR.SetReadDeadline(time.Now().Add(corralTimeout))
		rest, err := io.ReadAll(outR)
		if err != nil {
			t.Fatalf("reading stdout: %v", err)
		}
		res := c.wait(corralTimeout)
		wantCode(t, res, 4)
		if !bytes.Equal(rest, payload) {
			t.Errorf("stdout: want the %d bytes written to stdin, got %d bytes %q", len(payload), len(rest), rest)
		}
		if res.stderr != "to-stderr\n" {
			t.Errorf("stderr: want only the runner's %q, got %q", "to-stderr\n", res.stderr)
		}
		e.assertGone()
	})
}

func TestStoppedHelperEndsWithoutWaitingOutGrace(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		state := e.file("state.json")
		// The helper exits on SIGTERM, but has stopped itself: only SIGCONT
		// lets it act on the signal.
		runner := e.helper("spawn", "-setsid", "-await-stopped", "--", "sleep", "-exit-on-term", "0", "-stop")
		c := e.start(e.args(opts(state, "30"), runner))
		res := c.wait(15 * time.Second)
		wantCode(t, res, 0)
		e.assertGone()
		doc := readState(t, state)
		wantState(t, doc, map[string]any{"escalated": false, "runner_exit_code": 0, "active_children": 0})
		wantAtLeast(t, doc, map[string]int{"orphaned_children_total": 1, "reaped_orphans_total": 1})
	})
}

func TestForkLoopDuringTeardownIsFullyKilled(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		state := e.file("state.json")
		runner := e.helper("spawn", "-setsid", "-pause", "200ms", "--", "sleep", "-ignore-term", "-forkloop")
		res := e.run(e.args(opts(state, "0.05"), runner))
		wantCode(t, res, 0)
		e.assertGone()
		doc := readState(t, state)
		wantState(t, doc, map[string]any{"escalated": true, "runner_exit_code": 0, "active_children": 0})
	})
}

func TestOwnSubreaperHelperIsFullyKilled(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		state := e.file("state.json")
		// A helper that is a subreaper itself, with three orphans of its own.
		runner := e.helper("spawn", "-setsid", "-code", "6", "--",
			"sleep", "-subreaper", "-ignore-term", "-children", "3", "-orphan-children")
		res := e.run(e.args(opts(state, "0.05"), runner))
		wantCode(t, res, 6)
		e.assertGone()
		doc := readState(t, state)
		wantState(t, doc, map[string]any{"escalated": true, "runner_exit_code": 6, "active_children": 0})
	})
}

func TestProcessOutsideTreeIsNeverTouched(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		// A process the test starts itself, as corral's user, carrying the
		// marker: it exits on SIGTERM, dies on SIGKILL/SIGINT/SIGHUP and
		// records SIGUSR1, so any signal from corral would show.
		outsideReady, outsideUsr1 := e.file("outside-ready"), e.file("outside-usr1")
		outside := exec.Command(helperBin, "-marker", e.marker, "sleep", "-exit-on-term", "0",
			"-usr1-file", outsideUsr1, "-ready", outsideReady)
		outside.Dir = e.dir
		outside.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL, Credential: m.credential()}
		if err := outside.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			outside.Process.Kill()
			outside.Wait()
		})
		deadline := time.Now().Add(readyTimeout)
		for {
			if _, err := os.Stat(outsideReady); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the outside process never became ready")
			}
			time.Sleep(5 * time.Millisecond)
		}

		state := e.file("state.json")
		runner := e.helper("spawn", "-setsid", "--", "sleep", "-ignore-term")
		res := e.run(e.args(opts(state, "0.05"), runner))
		wantCode(t, res, 0)
		doc := readState(t, state)
		wantState(t, doc, map[string]any{"escalated": true, "runner_exit_code": 0})

		var info unix.Siginfo
		if err := unix.Waitid(unix.P_PID, outside.Process.Pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil); err != nil {
			t.Fatal(err)
		}
		if info.Signo != 0 { // SIGCHLD: it changed state
			t.Errorf("corral's teardown ended a process outside its tree")
		}
		p, ok := carriesMarker(outside.Process.Pid, []byte(e.marker), []byte("HELPER_MARKER="+e.marker))
		if !ok || !strings.ContainsAny(p.state, "RSD") {
			t.Errorf("the process outside the tree is not running: %+v", p)
		}
		if data, err := os.ReadFile(outsideUsr1); err == nil {
			t.Errorf("corral signalled a process outside its tree: %q", data)
		}
		outside.Process.Kill()
		outside.Wait()
		e.assertGone()
	})
}

func TestConfigurationVariablesHiddenFromRunner(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		configVars := []string{
			"CORRAL_STATE_PATH", "CORRAL_GRACE_SECONDS", "CORRAL_POLL_SECONDS", "CORRAL_MODE",
			"HERMES_CLI_PROCESS_STATE_PATH", "HERMES_CLI_PROCESS_GRACE_SECONDS", "HERMES_CLI_PROCESS_POLL_SECONDS",
		}
		check := func(t *testing.T, e *env, res result) {
			t.Helper()
			wantCode(t, res, 0)
			vars := map[string]string{}
			for _, line := range strings.Split(strings.TrimSpace(res.stdout), "\n") {
				name, value, _ := strings.Cut(line, "=")
				vars[name] = value
			}
			for _, name := range configVars {
				if v, ok := vars[name]; ok {
					t.Errorf("the runner sees corral's configuration %s=%s", name, v)
				}
			}
			if vars["PASS_THROUGH_CHECK"] != e.marker {
				t.Errorf("the runner lost PASS_THROUGH_CHECK: want %q, got %q", e.marker, vars["PASS_THROUGH_CHECK"])
			}
			if vars["PATH"] != testPath {
				t.Errorf("the runner's PATH: want %q, got %q", testPath, vars["PATH"])
			}
		}
		t.Run("corral-variables-win", func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, m)
			corralState, hermesState := e.file("corral.json"), e.file("hermes.json")
			res := e.run(e.args(nil, e.helper("env")),
				"CORRAL_STATE_PATH="+corralState,
				"CORRAL_GRACE_SECONDS=0.1",
				"CORRAL_POLL_SECONDS=0.01",
				"CORRAL_MODE="+m.flag,
				"HERMES_CLI_PROCESS_STATE_PATH="+hermesState,
				"HERMES_CLI_PROCESS_GRACE_SECONDS=999",
				"HERMES_CLI_PROCESS_POLL_SECONDS=0",
				"PASS_THROUGH_CHECK="+e.marker,
			)
			check(t, e, res)
			wantState(t, readState(t, corralState), map[string]any{"runner_exit_code": 0, "phase": "exited"})
			if _, err := os.Stat(hermesState); err == nil {
				t.Errorf("HERMES_CLI_PROCESS_STATE_PATH was used although CORRAL_STATE_PATH is set")
			}
			e.assertGone()
		})
		t.Run("hermes-variables-alone", func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, m)
			hermesState := e.file("hermes.json")
			res := e.run(e.args(nil, e.helper("env")),
				"HERMES_CLI_PROCESS_STATE_PATH="+hermesState,
				"HERMES_CLI_PROCESS_GRACE_SECONDS=0.1",
				"HERMES_CLI_PROCESS_POLL_SECONDS=0",
				"PASS_THROUGH_CHECK="+e.marker,
			)
			check(t, e, res)
			wantState(t, readState(t, hermesState), map[string]any{"runner_exit_code": 0, "phase": "exited"})
			e.assertGone()
		})
	})
}

// TestCorralAsPID1OfFreshNamespace runs corral --mode subreaper as PID 1 of a
// new PID namespace with its own /proc, which is what a container entrypoint
// is (as `unshare --pid --fork --mount-proc` would start it; the helper's
// pid1 command does the mount and then execs corral, so corral is PID 1).
func TestCorralAsPID1OfFreshNamespace(t *testing.T) {
	t.Parallel()
	m := mode{name: "subreaper-as-pid1", flag: "subreaper", needsPIDNS: true}
	start := func(e *env, args []string) *running {
		cmd := e.command(nil)
		cmd.Path = helperBin
		cmd.Args = append(e.helper("pid1", "--", corralBin), args...)
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWPID | syscall.CLONE_NEWNS
		return e.startCmd(cmd)
	}
	t.Run("teardown", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, m)
		state := e.file("state.json")
		runner := e.helper("spawn", "-setsid", "-code", "3", "--", "sleep", "-ignore-term")
		res := start(e, e.args(opts(state, "0.05"), runner)).wait(corralTimeout)
		wantCode(t, res, 3)
		e.assertGone()
		doc := readState(t, state)
		wantState(t, doc, map[string]any{
			"escalated":          true,
			"runner_exit_code":   3,
			"active_children":    0,
			"termination_signal": nil,
			"phase":              "exited",
		})
		wantAtLeast(t, doc, map[string]int{"orphaned_children_total": 1, "reaped_orphans_total": 1})
	})
	t.Run("runner-sees-corral-as-pid1", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, m)
		res := start(e, e.args(opts("", "0.1"), e.helper("report"))).wait(corralTimeout)
		wantCode(t, res, 0)
		r := parseReport(t, res.stdout)
		if r["ppid"] != "1" {
			t.Errorf("the runner's parent: want PID 1 (corral), got %s", r["ppid"])
		}
		if !pid1IsCorral(r["pid1_cmdline"]) {
			t.Errorf("PID 1 is not corral: %q", r["pid1_cmdline"])
		}
		e.assertGone()
	})
}

// parseReport parses the KEY=VALUE lines of the helper's report command.
func parseReport(t *testing.T, out string) map[string]string {
	t.Helper()
	r := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("report line without '=': %q (output %q)", line, out)
		}
		r[k] = v
	}
	for _, k := range []string{"pid", "ppid", "Uid", "Gid", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "pid1_cmdline", "proc_pids"} {
		if _, ok := r[k]; !ok {
			t.Fatalf("report lacks %s: %q", k, out)
		}
	}
	return r
}

// pid1IsCorral reports whether a /proc/1/cmdline (NULs as spaces) is corral's.
func pid1IsCorral(cmdline string) bool {
	argv0, _, _ := strings.Cut(cmdline, " ")
	return strings.Contains(argv0[strings.LastIndexByte(argv0, '/')+1:], "corral")
}

// While the runner lives, the state file shows phase running and counts an
// adopted orphan as live, with no exit code or signal yet; the poll
// interval brings the adoption to disk without any phase change.
func TestStateWhileRunning(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		state, ready := e.file("state.json"), e.file("ready")
		// The runner orphans a helper that sleeps, then sleeps itself.
		runner := e.helper("spawn", "-orphan", "-ready", ready, "-then", "sleep", "--", "sleep")
		c := e.start(e.args(opts(state, "1"), runner))
		c.waitFile(ready)
		deadline := time.Now().Add(readyTimeout)
		var doc map[string]any
		for {
			c.waitPhase(state, "running")
			doc = readState(t, state)
			if doc["adopted_children"] == float64(1) || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		wantState(t, doc, map[string]any{
			"phase": "running", "active_children": 2, "adopted_children": 1, "orphaned_children_total": 1,
			"reaped_children_total": 0, "reaped_orphans_total": 0, "escalated": false,
			"runner_exit_code": nil, "termination_signal": nil,
		})
		if info, err := os.Stat(state); err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("state file mode: %v %v, want 0600", info.Mode(), err)
		}
		c.signal(syscall.SIGTERM)
		res := c.wait(corralTimeout)
		wantCode(t, res, 128+int(syscall.SIGTERM))
		e.assertGone()
		doc = readState(t, state)
		wantState(t, doc, map[string]any{"phase": "exited", "active_children": 0, "adopted_children": 0,
			"termination_signal": 15, "reaped_children_total": 2, "reaped_orphans_total": 1, "orphaned_children_total": 1})
	})
}

// Ctrl-Z: a job-stop signal reaches the runner, and corral stops itself
// too, so the shell waiting on corral sees its job stop; SIGCONT (the
// shell's fg) resumes both.
func TestJobStopStopsRunnerAndCorral(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		ready := e.file("ready")
		c := e.start(e.args(opts("", "0.1"), e.helper("sleep", "-ready", ready)))
		c.waitFile(ready)
		runner := 0
		for _, p := range markedProcs(e.marker) {
			if strings.HasPrefix(p.cmdline, helperBin+" ") {
				runner = p.pid
			}
		}
		if runner == 0 {
			t.Fatalf("runner not found among %v", markedProcs(e.marker))
		}
		corral := c.cmd.Process.Pid
		c.signal(syscall.SIGTSTP)
		waitStopped(t, runner, true)
		waitStopped(t, corral, true)
		c.signal(syscall.SIGCONT)
		waitStopped(t, corral, false)
		waitStopped(t, runner, false)
		c.signal(syscall.SIGTERM)
		wantCode(t, c.wait(corralTimeout), 128+int(syscall.SIGTERM))
		e.assertGone()
	})
}

// waitStopped waits (bounded) until pid is, or is no longer, stopped.
func waitStopped(t *testing.T, pid int, stopped bool) {
	t.Helper()
	deadline := time.Now().Add(readyTimeout)
	state := ""
	for time.Now().Before(deadline) {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			t.Fatalf("pid %d: %v", pid, err)
		}
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) {
			state = string(stat[i+2])
		}
		if (state == "T") == stopped {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("pid %d: state %q, want stopped=%v", pid, state, stopped)
}
