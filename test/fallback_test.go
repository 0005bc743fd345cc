package test

// --mode auto's fallback, tested for real (docs/modes.md; issue 3): for one
// corral run, make pidns impossible without touching the machine's global
// settings, and check that auto runs in subreaper mode with every promise of
// that mode kept, and that --mode pidns exits 125 naming the reason.

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// jail describes how one corral run is denied pidns mode.
type jail struct {
	name string
	// clone are the namespaces the jail process is made in; it is root
	// there, so it can set up the denial and then become uid 65534.
	clone uintptr
	// setup is shell run as the jail's root before corral starts.
	setup string
	// reason is what corral must say when --mode pidns cannot be honoured.
	reason []string
}

var jails = []jail{
	{
		// user.max_user_namespaces is per user namespace: 0 in a nested one
		// forbids new user namespaces below it, and only there.
		name:   "user-namespaces-disabled",
		clone:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		setup:  "echo 0 > /proc/sys/user/max_user_namespaces",
		reason: []string{"CLONE_NEWUSER", "ENOSPC", "max_user_namespaces"},
	},
	{
		// What every Docker or Kubernetes user meets: part of /proc is
		// overmounted, and the kernel refuses a fresh proc mount to an
		// unprivileged user namespace. The overmount lives in the jail's
		// own mount namespace.
		name:   "proc-overmounted",
		clone:  syscall.CLONE_NEWNS,
		setup:  "mount --make-rprivate / && mount -t tmpfs -o ro tmpfs /proc/sys",
		reason: []string{"mount proc", "EPERM", "overmounted"},
	},
}

// jailed returns corral with args, run as uid 65534 inside j.
func (e *env) jailed(j jail, args []string) *exec.Cmd {
	script := j.setup + ` && exec setpriv --reuid 65534 --regid 65534 --clear-groups "$@"`
	cmd := e.command(append([]string{"-c", script, "jail", corralBin}, args...))
	cmd.Path, cmd.Args[0] = "/bin/sh", "/bin/sh"
	cmd.SysProcAttr.Credential = nil // root in the jail, then setpriv
	cmd.SysProcAttr.Cloneflags = j.clone
	if j.clone&syscall.CLONE_NEWUSER != 0 {
		// Map the host's first 65536 ids to themselves, so uid 65534 exists
		// in the jail and files keep their owners.
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 65536}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 65536}}
		cmd.SysProcAttr.GidMappingsEnableSetgroups = true
	}
	return cmd
}

func requireSetpriv(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("setpriv"); err != nil {
		missingFeature(t, "setpriv (util-linux) is needed to drop to uid 65534 in the jail")
	}
}

func TestAutoFallsBackToSubreaperWherePidnsIsDenied(t *testing.T) {
	t.Parallel()
	requireSetpriv(t)
	for _, j := range jails {
		t.Run(j.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, modes[0]) // the subreaper mode's user: root, to build the jail
			state := e.file("state.json")
			// A runner that reports its privileges and leaves a detached,
			// SIGTERM-ignoring helper behind.
			runner := e.helper("spawn", "-setsid", "-then", "report", "--", "sleep", "-ignore-term")
			args := append([]string{"-v", "--mode", "auto", "--grace", "0.05", "--poll", "0.01", "--state", state, "--"}, runner...)
			res := e.startCmd(e.jailed(j, args)).wait(corralTimeout)
			wantCode(t, res, 0)
			if !strings.Contains(res.stderr, "mode subreaper: pidns unavailable") {
				t.Errorf("-v does not explain the fallback: %q", res.stderr)
			}
			for _, want := range j.reason {
				if !strings.Contains(res.stderr, want) {
					t.Errorf("-v fallback reason lacks %q: %q", want, res.stderr)
				}
			}
			e.assertGone()
			doc := readState(t, state)
			wantState(t, doc, map[string]any{"escalated": true, "runner_exit_code": 0, "active_children": 0, "phase": "exited"})
			wantAtLeast(t, doc, map[string]int{"orphaned_children_total": 1, "reaped_orphans_total": 1})

			r := parseReport(t, res.stdout)
			if r["Uid"] != "65534 65534 65534 65534" {
				t.Errorf("runner Uid %q, want the caller's 65534", r["Uid"])
			}
			for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapAmb"} {
				if r[set] != "0000000000000000" {
					t.Errorf("runner %s = %s, want none", set, r[set])
				}
			}
			if r["NoNewPrivs"] != "1" {
				t.Errorf("runner NoNewPrivs = %s, want 1", r["NoNewPrivs"])
			}
			if strings.Contains(r["pid1_cmdline"], "corral") {
				t.Errorf("subreaper mode: PID 1 should not be corral's init, got %q", r["pid1_cmdline"])
			}
		})
	}
}

func TestExplicitPidnsWherePidnsIsDeniedIsAnError(t *testing.T) {
	t.Parallel()
	requireSetpriv(t)
	for _, j := range jails {
		t.Run(j.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, modes[0])
			ran := e.file("ran")
			runner := e.helper("exit", "-ready", ran, "-code", "0")
			res := e.startCmd(e.jailed(j, append([]string{"--mode", "pidns", "--"}, runner...))).wait(corralTimeout)
			wantCode(t, res, 125)
			if lines := strings.Split(strings.TrimSpace(res.stderr), "\n"); len(lines) != 1 {
				t.Errorf("want one line naming the step and errno, got %q", res.stderr)
			}
			for _, want := range append([]string{"corral:"}, j.reason...) {
				if !strings.Contains(res.stderr, want) {
					t.Errorf("stderr lacks %q: %q", want, res.stderr)
				}
			}
			assertNotExist(t, ran)
			e.assertGone()
		})
	}
}

// A request only a namespace can honour makes auto mean pidns: no fallback.
func TestAutoWithNamespaceRequestDoesNotFallBack(t *testing.T) {
	t.Parallel()
	requireSetpriv(t)
	j := jails[0]
	e := newEnv(t, modes[0])
	ran := e.file("ran")
	runner := e.helper("exit", "-ready", ran, "-code", "0")
	config := e.writeConfig("config.json", map[string]any{"linux": map[string]any{"namespaces": namespaces("pid", "mount", "ipc")}})
	res := e.startCmd(e.jailed(j, append([]string{"--mode", "auto", "--config", config, "--"}, runner...))).wait(corralTimeout)
	wantCode(t, res, 125)
	if !strings.Contains(res.stderr, "ENOSPC") {
		t.Errorf("stderr does not name the reason: %q", res.stderr)
	}
	assertNotExist(t, ran)
	e.assertGone()
}

// The network policy is no such request: where the kernel refuses a
// namespace step, auto falls back to subreaper mode's enforcement of it
// (the socket filter), and the runner runs without the network.
func TestAutoWithNetNoneFallsBackToTheSocketFilter(t *testing.T) {
	t.Parallel()
	requireSetpriv(t)
	for _, j := range jails {
		t.Run(j.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, modes[0])
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			res := e.startCmd(e.jailed(j, []string{"--mode", "auto", "-v", "--net", "none", "--",
				netprobe(t), "-marker", e.marker, "-dial", ln.Addr().String()})).wait(corralTimeout)
			wantCode(t, res, 0)
			for _, want := range []string{"mode subreaper", "network: seccomp socket filter"} {
				if !strings.Contains(res.stderr, want) {
					t.Errorf("stderr lacks %q: %q", want, res.stderr)
				}
			}
			if !strings.Contains(res.stdout, "\ndial=error: socket: EACCES") {
				t.Errorf("the runner reached the host's loopback: %q", res.stdout)
			}
			e.assertGone()
		})
	}
}

// assertNotExist fails the test if path exists: proof that a runner never ran.
func assertNotExist(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err == nil {
		t.Errorf("%s exists: the runner ran", path)
	}
}

type probeReport struct {
	UID    int `json:"uid"`
	Checks []struct {
		Name      string `json:"name"`
		Available bool   `json:"available"`
		Detail    string `json:"detail"`
	} `json:"checks"`
	AutoMode string `json:"auto_mode"`
	Reason   string `json:"auto_reason"`
}

func parseProbe(t *testing.T, res result) (probeReport, map[string]bool, map[string]string) {
	t.Helper()
	wantCode(t, res, 0)
	var r probeReport
	if err := json.Unmarshal([]byte(res.stdout), &r); err != nil {
		t.Fatalf("probe --json: %v: %q", err, res.stdout)
	}
	available, detail := map[string]bool{}, map[string]string{}
	for _, c := range r.Checks {
		available[c.Name], detail[c.Name] = c.Available, c.Detail
	}
	for _, name := range []string{"user namespaces", "pid namespaces", "fresh /proc mount", "subreaper", "pidfd", "cgroup v2", "landlock", "seccomp"} {
		if _, ok := available[name]; !ok {
			t.Errorf("probe lacks %q: %q", name, res.stdout)
		}
	}
	return r, available, detail
}

// corral probe, where the machine allows everything pidns needs (as CI's
// does), says so for root and for an unprivileged user, and picks pidns.
func TestProbeReportsWhatTheMachineAllows(t *testing.T) {
	t.Parallel()
	for _, m := range modes {
		if !m.pidns() {
			continue
		}
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, m)
			r, available, _ := parseProbe(t, e.run([]string{"probe", "--json"}))
			if r.UID != m.uid() {
				t.Errorf("probe uid %d, want %d", r.UID, m.uid())
			}
			for _, name := range []string{"user namespaces", "pid namespaces", "fresh /proc mount", "subreaper", "pidfd"} {
				if !available[name] {
					t.Errorf("probe says %q is unavailable on a machine that runs mode %s", name, m.name)
				}
			}
			if r.AutoMode != "pidns" {
				t.Errorf("auto_mode %q, want pidns", r.AutoMode)
			}
			text := e.run([]string{"probe"})
			wantCode(t, text, 0)
			if !strings.Contains(text.stdout, "--mode auto would use pidns") {
				t.Errorf("text probe lacks the auto decision: %q", text.stdout)
			}
		})
	}
}

// In each jail the probe names what is missing and why, and picks subreaper.
func TestProbeExplainsWhyNot(t *testing.T) {
	t.Parallel()
	requireSetpriv(t)
	for _, tc := range []struct {
		jail    jail
		missing string
	}{
		{jails[0], "user namespaces"},
		{jails[1], "fresh /proc mount"},
	} {
		t.Run(tc.jail.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, modes[0])
			r, available, detail := parseProbe(t, e.startCmd(e.jailed(tc.jail, []string{"probe", "--json"})).wait(corralTimeout))
			if available[tc.missing] {
				t.Fatalf("probe says %q is available in jail %s", tc.missing, tc.jail.name)
			}
			for _, want := range tc.jail.reason[1:] {
				if !strings.Contains(detail[tc.missing], want) {
					t.Errorf("probe's reason for %q lacks %q: %q", tc.missing, want, detail[tc.missing])
				}
			}
			if !available["subreaper"] || r.AutoMode != "subreaper" {
				t.Errorf("auto_mode %q (subreaper available: %v), want subreaper", r.AutoMode, available["subreaper"])
			}
		})
	}
}
