package test

// One test for each scenario of the suite of the Python supervisor that
// corral replaces (its HERMES_CLI_PROCESS_* variables still work,
// docs/usage.md), in every mode.

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

func TestNormalExitPreservesStatusStreamAndState(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		for _, code := range []int{0, 7} {
			t.Run(fmt.Sprintf("exit-%d", code), func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, m)
				state := e.file("process-state.json")
				runner := e.helper("exit", "-stdout", "provider-stream-ok", "-code", strconv.Itoa(code))
				res := e.run(e.args(opts(state, "0.1"), runner))
				wantCode(t, res, code)
				if res.stdout != "provider-stream-ok\n" {
					t.Errorf("stdout: want the runner's line exactly, got %q", res.stdout)
				}
				doc := readState(t, state)
				wantState(t, doc, map[string]any{
					"active_children":         0,
					"adopted_children":        0,
					"escalated":               false,
					"orphaned_children_total": 0,
					"phase":                   "exited",
					"reaped_children_total":   1,
					"reaped_orphans_total":    0,
					"runner_exit_code":        code,
					"termination_signal":      nil,
				})
				info, err := os.Stat(state)
				if err != nil {
					t.Fatal(err)
				}
				if perm := info.Mode().Perm(); perm != 0o600 {
					t.Errorf("state file mode: want 0600, got %#o", perm)
				}
				data, _ := os.ReadFile(state)
				for _, secret := range []string{"provider-stream-ok", e.marker, helperBin} {
					if strings.Contains(string(data), secret) {
						t.Errorf("state file holds runner output, arguments or paths (%q): %s", secret, data)
					}
				}
				e.assertGone()
			})
		}
	})
}

func TestProviderSessionOrphansAdoptedAndReapedWhileRunnerLives(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		for _, tc := range []struct {
			binary string
			args   []string
		}{{"git", []string{"--version"}}, {"ssh", []string{"-V"}}} {
			t.Run(tc.binary, func(t *testing.T) {
				t.Parallel()
				path, err := exec.LookPath(tc.binary)
				if err != nil {
					missingFeature(t, fmt.Sprintf("%s is not installed: %v", tc.binary, err))
				}
				e := newEnv(t, m)
				state := e.file(tc.binary + ".json")
				// The runner starts a provider in a new session and waits for
				// it; the provider forks a child that runs the program 50 ms
				// later and exits at once, orphaning it.
				provider := append([]string{"spawn", "--", "exec", "-delay", "50ms", path}, tc.args...)
				runner := e.helper(append([]string{"spawn", "-setsid", "-wait", "-pause", "250ms", "--"}, provider...)...)
				res := e.run(e.args(opts(state, "0.1"), runner))
				wantCode(t, res, 0)
				doc := readState(t, state)
				wantState(t, doc, map[string]any{"active_children": 0, "runner_exit_code": 0, "phase": "exited"})
				wantAtLeast(t, doc, map[string]int{"orphaned_children_total": 1, "reaped_orphans_total": 1})
				e.assertGone()
			})
		}
	})
}

func TestConcurrentProviderOrphansHaveOneWaitOwner(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		state := e.file("concurrent.json")
		runner := e.helper("spawn", "-setsid", "-count", "4", "-wait", "-check", "-pause", "250ms", "--",
			"spawn", "--", "exec", "-delay", "50ms", "/bin/true")
		res := e.run(e.args(opts(state, "0.1"), runner))
		wantCode(t, res, 0)
		doc := readState(t, state)
		wantState(t, doc, map[string]any{"active_children": 0, "runner_exit_code": 0})
		wantAtLeast(t, doc, map[string]int{
			"orphaned_children_total": 4,
			"reaped_orphans_total":    4,
			"reaped_children_total":   5,
		})
		e.assertGone()
	})
}

func TestRunnerExitTerminatesAndReapsDetachedHelper(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		state := e.file("restart.json")
		runner := e.helper("spawn", "-setsid", "--", "sleep", "-ignore-term")
		res := e.run(e.args(opts(state, "0.05"), runner))
		wantCode(t, res, 0)
		e.assertGone()
		doc := readState(t, state)
		wantState(t, doc, map[string]any{"escalated": true, "runner_exit_code": 0, "active_children": 0})
		wantAtLeast(t, doc, map[string]int{"orphaned_children_total": 1, "reaped_orphans_total": 1})
	})
}

func TestSigtermCancellationEscalatesToSigkill(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		state := e.file("cancel.json")
		// The runner ignores SIGTERM, leaves a helper in a new session that
		// ignores it too, then sends SIGTERM to its parent (corral's engine).
		runner := e.helper("spawn", "-ignore-term", "-setsid", "-kill-parent", "TERM", "-then", "sleep", "--",
			"sleep", "-ignore-term")
		res := e.run(e.args(opts(state, "0.05"), runner))
		wantCode(t, res, 137)
		e.assertGone()
		doc := readState(t, state)
		wantState(t, doc, map[string]any{
			"termination_signal": 15,
			"escalated":          true,
			"runner_exit_code":   137,
			"active_children":    0,
			"phase":              "exited",
		})
	})
}

func TestProviderCancellationLeavesNoUnownedHelper(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		state := e.file("provider-cancel.json")
		// The runner starts a provider in a new session whose own helper
		// (another session) ignores SIGTERM; it then kills the provider's
		// group, waits for it and exits 0, leaving the helper behind.
		runner := e.helper("spawn", "-setsid", "-killpg", "TERM", "-wait", "--",
			"spawn", "-setsid", "-then", "sleep", "--", "sleep", "-ignore-term")
		res := e.run(e.args(opts(state, "0.05"), runner))
		wantCode(t, res, 0)
		e.assertGone()
		doc := readState(t, state)
		wantState(t, doc, map[string]any{"active_children": 0, "runner_exit_code": 0})
		wantAtLeast(t, doc, map[string]int{"orphaned_children_total": 1, "reaped_orphans_total": 1})
	})
}

func TestObservabilityFailureDoesNotMaskRunnerStatus(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		// A runner that lives a little and has a child, so corral would write
		// the state several times.
		runner := e.helper("spawn", "-pause", "200ms", "-code", "3", "--", "exit")
		res := e.run(e.args(opts("/proc/not-writable/state", "0.1"), runner))
		wantCode(t, res, 3)
		if n := strings.Count(res.stderr, "process state unavailable"); n != 1 {
			t.Errorf("stderr: want exactly one %q, got %d: %q", "process state unavailable", n, res.stderr)
		}
		e.assertGone()
	})
}

func TestExecFailureIsGenericAndPreservesStatus(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		for _, tc := range []struct {
			name   string
			runner func(t *testing.T, e *env) string
			code   int
		}{
			{"missing-127", func(*testing.T, *env) string { return "/definitely/missing/runner" }, 127},
			{"not-executable-126", func(t *testing.T, e *env) string {
				path := e.file("not-executable")
				if err := os.WriteFile(path, []byte("#!/bin/sh\nexit 0\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return path
			}, 126},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, m)
				state := e.file("exec.json")
				res := e.run(e.args(opts(state, "0.1"), []string{tc.runner(t, e), e.marker}))
				wantCode(t, res, tc.code)
				if !strings.Contains(res.stderr, "runner exec failed") {
					t.Errorf("stderr does not name %q: %q", "runner exec failed", res.stderr)
				}
				doc := readState(t, state)
				wantState(t, doc, map[string]any{"runner_exit_code": tc.code, "phase": "exited", "active_children": 0})
				e.assertGone()
			})
		}
	})
}

func TestUsageErrors(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		usage := func(t *testing.T, res result) {
			t.Helper()
			wantCode(t, res, 2)
			if !strings.HasPrefix(res.stderr, "usage:") {
				t.Errorf("stderr does not start with %q: %q", "usage:", res.stderr)
			}
		}
		for _, tc := range []struct {
			name  string
			args  []string
			check func(t *testing.T, res result)
		}{
			{"no-runner", []string{"--mode", m.flag}, usage},
			{"no-runner-after-dashes", []string{"--mode", m.flag, "--"}, usage},
			{"relative-runner", []string{"--mode", m.flag, "--", "true"}, func(t *testing.T, res result) {
				usage(t, res)
				if !strings.Contains(res.stderr, "/usr/bin/true") && !strings.Contains(res.stderr, "/bin/true") {
					t.Errorf("stderr does not name the absolute path PATH gives (/usr/bin/true or /bin/true): %q", res.stderr)
				}
			}},
			{"malformed-grace", []string{"--mode", m.flag, "--grace", "abc", "--", "/bin/true"}, usage},
			{"malformed-poll", []string{"--mode", m.flag, "--poll", "soon", "--", "/bin/true"}, usage},
			{"unknown-mode", []string{"--mode", "bogus", "--", "/bin/true"}, usage},
			{"help-short", []string{"-h"}, helpOK},
			{"help-long", []string{"--help"}, helpOK},
			{"version", []string{"version"}, func(t *testing.T, res result) {
				wantCode(t, res, 0)
				if strings.TrimSpace(res.stdout) == "" {
					t.Errorf("version printed nothing on stdout: %v", res)
				}
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, m)
				tc.check(t, e.run(tc.args))
				e.assertGone()
			})
		}
	})
}

func helpOK(t *testing.T, res result) {
	t.Helper()
	wantCode(t, res, 0)
	if !strings.Contains(strings.ToLower(res.stdout), "usage") {
		t.Errorf("help: want the usage on stdout, got %v", res)
	}
}

// The Python suite's test_subreaper_setup_failure_is_explicit, for real: a seccomp
// filter makes prctl(PR_SET_CHILD_SUBREAPER) fail, and corral must refuse
// to run the runner (exit 125) with one line naming the step and errno,
// while pidns mode, whose PID 1 needs no subreaper, still works.
func TestSubreaperSetupFailureIsExplicit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, modes[0])
	ran := e.file("ran")
	runner := e.helper("exit", "-ready", ran, "-code", "0")
	deny := func(args []string) []string {
		return append(e.helper("deny-subreaper", "--", corralBin), args...)
	}
	cmd := e.command(nil)
	cmd.Path, cmd.Args = helperBin, deny(append([]string{"--mode", "subreaper", "--"}, runner...))
	res := e.startCmd(cmd).wait(corralTimeout)
	wantCode(t, res, 125)
	if lines := strings.Split(strings.TrimSpace(res.stderr), "\n"); len(lines) != 1 ||
		!strings.Contains(res.stderr, "subreaper") || !strings.Contains(res.stderr, "EINVAL") {
		t.Errorf("want one line naming subreaper and EINVAL, got %q", res.stderr)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Errorf("the runner ran although corral could not become its reaper")
	}

	if modes[1].unavailable() == "" { // pidns as root
		cmd := e.command(nil)
		cmd.Path, cmd.Args = helperBin, deny(append([]string{"--mode", "pidns", "--"}, e.helper("exit", "-code", "4")...))
		wantCode(t, e.startCmd(cmd).wait(corralTimeout), 4)
	}
	e.assertGone()
}
