package test

// The sandbox policy (docs/sandbox.md; issue 12), on the built
// binary in every mode, with the machine's real Landlock: the runner tries
// each operation itself (helper "try") and says how it went, errno by
// errno, and the files it must not have touched are checked from outside.

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// requireLandlock skips (fails under CI=true) without Landlock ABI abi.
func requireLandlock(t *testing.T, abi int) {
	t.Helper()
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		missingFeature(t, fmt.Sprintf("Landlock is unavailable: %v", errno))
	}
	if int(v) < abi {
		missingFeature(t, fmt.Sprintf("Landlock ABI %d, the test needs %d", v, abi))
	}
}

// mkdirs makes directories in the test's directory that anyone may write
// to, so that only the policy stands between the runner's uid and them.
func (e *env) mkdirs(names ...string) []string {
	e.t.Helper()
	var out []string
	for _, n := range names {
		p := e.file(n)
		if err := os.Mkdir(p, 0o777); err != nil {
			e.t.Fatal(err)
		}
		if err := os.Chmod(p, 0o777); err != nil { // past the umask
			e.t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// writeFile writes a file anyone may change.
func (e *env) writeFile(path, content string, mode os.FileMode) {
	e.t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		e.t.Fatal(err)
	}
}

// tryResults parses the "OP=RESULT" lines of helper try.
func tryResults(t *testing.T, out string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if op, res, ok := strings.Cut(line, "="); ok {
			got[op] = res
		}
	}
	return got
}

// denied is what a refused filesystem access may say.
var denied = []string{"EACCES", "EROFS"}

// wantTried checks each op's result: "ok", or one of the errnos listed.
func wantTried(t *testing.T, res result, want map[string][]string) {
	t.Helper()
	got := tryResults(t, res.stdout)
	for op, allowed := range want {
		if r, ok := got[op]; !ok {
			t.Errorf("%s: not tried (output %q, stderr %q)", op, res.stdout, res.stderr)
		} else if !slices.Contains(allowed, r) {
			t.Errorf("%s: %s, want %s", op, r, strings.Join(allowed, " or "))
		}
	}
}

// tryOps returns the op list of want, in a stable order.
func tryOps(want map[string][]string) []string {
	var ops []string
	for op := range want {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	return ops
}

var ok = []string{"ok"}

// snapshot is a directory's entries and their contents.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, ent := range entries {
		data, _ := os.ReadFile(dir + "/" + ent.Name())
		fmt.Fprintf(&b, "%s=%q\n", ent.Name(), data)
	}
	return b.String()
}

// --writable: everything the runner needs works beneath the writable
// paths, nothing changes elsewhere, and what the runner starts is bound too.
func TestPolicyWritable(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		requireLandlock(t, 1)
		e := newEnv(t, m)
		dirs := e.mkdirs("a", "a2", "b")
		a, a2, b := dirs[0], dirs[1], dirs[2]
		e.writeFile(b+"/keep", "original\n", 0o666)
		before := snapshot(t, b)

		// Without the policy the runner's uid may write in B: the policy is
		// what stops it below.
		res := e.run(e.args(nil, e.helper("try", "create:"+b+"/control", "remove:"+b+"/control")))
		wantCode(t, res, 0)
		wantTried(t, res, map[string][]string{"create:" + b + "/control": ok, "remove:" + b + "/control": ok})

		want := map[string][]string{
			"create:" + a + "/f":                ok,
			"append:" + a + "/f":                ok,
			"rename:" + a + "/f:" + a + "/g":    ok,
			"remove:" + a + "/g":                ok,
			"mkdir:" + a + "/d":                 ok,
			"create:" + a2 + "/f":               ok,
			"create:" + b + "/x":                denied,
			"append:" + b + "/keep":             denied,
			"truncate:" + b + "/keep":           denied,
			"rename:" + b + "/keep:" + b + "/y": denied,
			"rename:" + a2 + "/f:" + b + "/f":   append([]string{"EXDEV"}, denied...),
			"remove:" + b + "/keep":             denied,
			"mkdir:" + b + "/d":                 denied,
			"read:" + b + "/keep":               ok,
			"read:/etc/passwd":                  ok,
			"list:" + b:                         ok,
			"write:/dev/null":                   ok,
			"exec:/bin/true":                    ok,
		}
		// Sorted: create before append before rename before remove in A.
		ops := []string{"create:" + a + "/f", "append:" + a + "/f", "rename:" + a + "/f:" + a + "/g", "remove:" + a + "/g"}
		for _, op := range tryOps(want) {
			if !slices.Contains(ops, op) {
				ops = append(ops, op)
			}
		}
		res = e.run(e.args([]string{"--writable", a, "--writable", a2}, e.helper(append([]string{"try", "-code", "3"}, ops...)...)))
		wantCode(t, res, 3)
		wantTried(t, res, want)
		if _, err := os.Stat(a + "/d"); err != nil {
			t.Errorf("the runner's mkdir in a writable path left nothing: %v", err)
		}

		// A detached, double-forked grandchild is bound by the same rules.
		grand := map[string][]string{"create:" + b + "/grandchild": denied, "create:" + a + "/grandchild": ok}
		res = e.run(e.args([]string{"--writable", a}, e.helper(append([]string{"spawn", "-orphan", "-setsid", "--", "try"}, tryOps(grand)...)...)))
		wantCode(t, res, 0)
		wantTried(t, res, grand)

		if after := snapshot(t, b); after != before {
			t.Errorf("the sibling outside the writable paths changed:\nbefore %s\nafter  %s", before, after)
		}
		e.assertGone()
	})
}

// --allow-new-privs leaves no_new_privs unset, so Landlock goes on while
// the runner's thread still holds CAP_SYS_ADMIN (root, or the init in its
// user namespace): the policy holds all the same.
func TestPolicyWithAllowNewPrivs(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		requireLandlock(t, 1)
		e := newEnv(t, m)
		dirs := e.mkdirs("w", "b")
		want := map[string][]string{"create:" + dirs[0] + "/x": ok, "create:" + dirs[1] + "/x": denied}
		res := e.run(e.args([]string{"--allow-new-privs", "--writable", dirs[0]}, e.helper(append([]string{"try"}, tryOps(want)...)...)))
		wantCode(t, res, 0)
		wantTried(t, res, want)
		e.assertGone()
	})
}

// Where the runner's thread has neither no_new_privs nor CAP_SYS_ADMIN
// (an unprivileged caller in subreaper mode with --allow-new-privs; its
// bounding set emptied beforehand, or the privilege drop would refuse
// first), the kernel takes no Landlock policy: a 125 naming Landlock and
// the cause, and the runner does not run.
func TestPolicyAllowNewPrivsWithoutCapSysAdminIsRefused(t *testing.T) {
	t.Parallel()
	requireSetpriv(t)
	requireLandlock(t, 1)
	e := newEnv(t, modes[0])
	w := e.mkdirs("w")[0]
	ran := e.file("ran")
	cmd := e.command(append([]string{"--reuid", "65534", "--regid", "65534", "--clear-groups", "--bounding-set", "-all", "--", corralBin},
		e.args([]string{"--allow-new-privs", "--writable", w}, []string{"/usr/bin/touch", ran})...))
	cmd.Path, cmd.Args[0] = "/usr/bin/setpriv", "setpriv"
	res := e.startCmd(cmd).wait(corralTimeout)
	wantCode(t, res, 125)
	for _, want := range []string{"Landlock", "--allow-new-privs", "no_new_privs"} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr lacks %q: %q", want, res.stderr)
		}
	}
	assertNotExist(t, ran)
	e.assertGone()
}

// --read-only: nothing is writable but the devices, and the runner's own
// status comes back.
func TestPolicyReadOnly(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		requireLandlock(t, 1)
		e := newEnv(t, m)
		dir := e.mkdirs("d")[0]
		tmp := "/tmp/corral-read-only-" + randomHex()
		t.Cleanup(func() { os.Remove(tmp) })
		want := map[string][]string{
			"create:" + dir + "/x": denied,
			"mkdir:" + dir + "/y":  denied,
			"create:" + tmp:        denied,
			"write:/dev/null":      ok,
			"write:/dev/full":      {"ENOSPC"}, // opened, then full, as without a policy
			"read:/etc/passwd":     ok,
			"exec:/bin/true":       ok,
		}
		res := e.run(e.args([]string{"--read-only"}, e.helper(append([]string{"try", "-code", "7"}, tryOps(want)...)...)))
		wantCode(t, res, 7)
		wantTried(t, res, want)
		assertNotExist(t, tmp)
		if entries, _ := os.ReadDir(dir); len(entries) > 0 {
			t.Errorf("the runner wrote under --read-only: %v", entries)
		}
		e.assertGone()
	})
}

// --hide S with --writable W: S is out of reach entirely, its sibling is
// readable, W writable.
func TestPolicyHide(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		requireLandlock(t, 1)
		e := newEnv(t, m)
		dirs := e.mkdirs("s", "t", "w")
		s, sib, w := dirs[0], dirs[1], dirs[2]
		e.writeFile(s+"/secret", "secret\n", 0o666)
		e.writeFile(sib+"/open", "open\n", 0o666)
		data, err := os.ReadFile("/bin/true")
		if err != nil {
			t.Fatal(err)
		}
		e.writeFile(s+"/true", string(data), 0o755)

		want := map[string][]string{
			"read:" + s + "/secret":   denied,
			"append:" + s + "/secret": denied,
			"list:" + s:               denied,
			"exec:" + s + "/true":     denied,
			"create:" + s + "/new":    denied,
			"read:" + sib + "/open":   ok,
			"list:" + sib:             ok,
			"create:" + w + "/x":      ok,
			"read:/etc/passwd":        ok,
		}
		res := e.run(e.args([]string{"--hide", s, "--writable", w}, e.helper(append([]string{"try"}, tryOps(want)...)...)))
		wantCode(t, res, 0)
		wantTried(t, res, want)
		if data, _ := os.ReadFile(s + "/secret"); string(data) != "secret\n" {
			t.Errorf("the hidden file changed: %q", data)
		}
		// A hidden path wins over a writable one that contains it.
		res = e.run(e.args([]string{"--writable", e.dir, "--hide", s}, e.helper("try", "read:"+s+"/secret", "create:"+sib+"/y")))
		wantCode(t, res, 0)
		wantTried(t, res, map[string][]string{"read:" + s + "/secret": denied, "create:" + sib + "/y": ok})
		e.assertGone()
	})
}

// A path that does not exist, and the contradictions, are usage errors,
// and the runner does not run.
func TestPolicyUsageErrors(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		ran, missing := e.file("ran"), e.file("missing")
		for _, tc := range []struct {
			opts []string
			want string
		}{
			{[]string{"--writable", missing}, "usage: --writable " + missing + ": no such file or directory"},
			{[]string{"--hide", missing}, "usage: --hide " + missing + ": no such file or directory"},
			{[]string{"--read-only", "--writable", e.dir}, "usage: --read-only and --writable"},
			{[]string{"--timeout", "0"}, "usage: --timeout"},
			{[]string{"--timeout", "soon"}, "usage: --timeout"},
		} {
			res := e.run(e.args(tc.opts, []string{"/usr/bin/touch", ran}))
			wantCode(t, res, 2)
			if !strings.HasPrefix(res.stderr, tc.want) {
				t.Errorf("%q: stderr %q, want it to start with %q", tc.opts, res.stderr, tc.want)
			}
		}
		assertNotExist(t, ran)
		e.assertGone()
	})
}

// viaHelper turns a corral command into helper ARGS... -- corral ...: the
// helper sets something up, then execs corral with the same arguments.
func (e *env) viaHelper(cmd *exec.Cmd, args ...string) *exec.Cmd {
	cmd.Args = append(append(e.helper(args...), "--", corralBin), cmd.Args[1:]...)
	cmd.Path = helperBin
	return cmd
}

// Fail closed: where the Landlock system calls fail, a policy is a 125
// naming Landlock and the runner never runs; without a policy the same
// run works. Both ends are tried: the kernel refusing Landlock altogether
// (the host side refuses before it starts anything), and only the last
// step, on the runner's thread, failing.
func TestPolicyFailsClosed(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		requireLandlock(t, 1)
		e := newEnv(t, m)
		w := e.mkdirs("w")[0]
		ran := e.file("ran")
		touch := []string{"/usr/bin/touch", ran}
		for _, tc := range []struct {
			jail []string
			opts []string
		}{
			{[]string{"deny-landlock"}, []string{"--writable", w}},
			{[]string{"deny-landlock"}, []string{"--isolate-ipc"}},
			{[]string{"deny-landlock", "-restrict-only"}, []string{"--writable", w}},
			{[]string{"deny-landlock", "-restrict-only"}, []string{"--read-only", "--isolate-ipc"}},
		} {
			res := e.startCmd(e.viaHelper(e.command(e.args(tc.opts, touch)), tc.jail...)).wait(corralTimeout)
			wantCode(t, res, 125)
			if !strings.Contains(res.stderr, "Landlock") || strings.Count(strings.TrimSpace(res.stderr), "\n") > 0 {
				t.Errorf("%q %q: stderr %q, want one line naming Landlock", tc.jail, tc.opts, res.stderr)
			}
			assertNotExist(t, ran)
		}
		res := e.startCmd(e.viaHelper(e.command(e.args(nil, touch)), "deny-landlock")).wait(corralTimeout)
		wantCode(t, res, 0)
		if _, err := os.Stat(ran); err != nil {
			t.Errorf("without a policy the jailed run must work: %v (%v)", err, res)
		}
		e.assertGone()
	})
}

// decoy is a process outside the runner's tree, of the runner's uid.
func (e *env) decoy() *exec.Cmd {
	e.t.Helper()
	ready := e.file("decoy-ready-" + randomHex())
	cmd := exec.Command(helperBin, "-marker", "corral-decoy-"+randomHex(), "sleep", "-ready", ready)
	cmd.Dir = e.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: e.m.credential()}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	e.t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	deadline := time.Now().Add(readyTimeout)
	for {
		if _, err := os.Stat(ready); err == nil {
			return cmd
		}
		if time.Now().After(deadline) {
			e.t.Fatal("the decoy never became ready")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// alive reports whether the decoy still runs (it is our unreaped child).
func alive(cmd *exec.Cmd) bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(st), ')')
	return i > 0 && i+2 < len(st) && st[i+2] != 'Z'
}

// abstractListener listens on an abstract Unix socket outside the runner's
// tree and returns its name (without the @).
func abstractListener(t *testing.T) string {
	t.Helper()
	name := "corral-test-" + randomHex()
	l, err := net.Listen("unix", "@"+name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return name
}

// --isolate-ipc: no signal leaves the runner's tree and no abstract socket
// outside is reachable, while everything inside works as before.
func TestPolicyIsolateIPC(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		requireLandlock(t, 6)
		e := newEnv(t, m)
		state := e.file("state.json")
		sock := abstractListener(t)
		want := map[string][]string{
			"killppid:TERM": {"EPERM"}, // corral (the init in pidns mode): the runner cannot cancel its own run
			// Nor through one of corral's threads: none is in the runner's
			// domain (a SIGKILL to any would end all of corral).
			"tgkillppid:TERM":  {"EPERM"},
			"killchild:TERM":   ok,
			"abstract:" + sock: {"EPERM"},
			"abstract-self":    ok,
			"socketpair":       ok,
		}
		control := map[string][]string{"abstract:" + sock: ok}
		var decoy *exec.Cmd
		if !m.pidns() {
			// In a new PID namespace nothing outside the tree but the init
			// is visible to the runner at all; in subreaper mode every
			// process of its uid is, until --isolate-ipc.
			decoy = e.decoy()
			want[fmt.Sprintf("kill:%d:TERM", decoy.Process.Pid)] = []string{"EPERM"}
			control[fmt.Sprintf("kill:%d:0", decoy.Process.Pid)] = ok
		}
		res := e.run(e.args(opts(state, "1", "--isolate-ipc"), e.helper(append([]string{"try", "-code", "5"}, tryOps(want)...)...)))
		wantCode(t, res, 5)
		wantTried(t, res, want)
		wantState(t, readState(t, state), map[string]any{"termination_signal": nil, "runner_exit_code": 5})
		if decoy != nil && !alive(decoy) {
			t.Errorf("the decoy outside the tree did not survive")
		}
		// The same operations are allowed without the option.
		res = e.run(e.args(nil, e.helper(append([]string{"try"}, tryOps(control)...)...)))
		wantCode(t, res, 0)
		wantTried(t, res, control)
		e.assertGone()
	})
}

// --timeout: the run is cancelled as by SIGTERM, escalated as usual, and
// corral exits 124; a runner that finishes first keeps its status.
func TestPolicyTimeout(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		for _, tc := range []struct {
			name string
			opts []string
			env  []string
		}{
			{"flag", []string{"--timeout", "0.5"}, nil},
			{"env", nil, []string{"CORRAL_TIMEOUT_SECONDS=0.5"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e := newEnv(t, m)
				state, ready := e.file("state.json"), e.file("ready")
				runner := e.helper("spawn", "-ignore-term", "-setsid", "-ready", ready, "-then", "sleep", "--", "sleep", "-ignore-term")
				res := e.run(e.args(opts(state, "0.2", tc.opts...), runner), tc.env...)
				wantCode(t, res, 124)
				if _, err := os.Stat(ready); err != nil {
					t.Errorf("the runner never got going: %v", err)
				}
				e.assertGone()
				wantState(t, readState(t, state), map[string]any{
					"termination_signal": 15, "runner_exit_code": 124, "escalated": true,
					"phase": "exited", "active_children": 0,
				})
			})
		}
		t.Run("runner-first", func(t *testing.T) {
			e := newEnv(t, m)
			state := e.file("state.json")
			res := e.run(e.args(opts(state, "1", "--timeout", "30"), e.helper("exit", "-code", "3")))
			wantCode(t, res, 3)
			wantState(t, readState(t, state), map[string]any{"termination_signal": nil, "runner_exit_code": 3})
			e.assertGone()
		})
	})
}

// --die-with-parent: corral's parent going away ends the run, whether it
// is killed while the runner works, or exits as corral starts.
func TestPolicyDieWithParent(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		t.Run("parent-killed", func(t *testing.T) {
			e := newEnv(t, m)
			state, ready := e.file("state.json"), e.file("ready")
			runner := e.helper("spawn", "-setsid", "-ready", ready, "-then", "sleep", "--", "sleep", "-ignore-term")
			// The parent is a shell that waits for corral; SIGKILL leaves
			// corral to whatever reaper the machine has.
			cmd := e.command(append([]string{"-c", `"$@"; :`, "parent", corralBin}, e.args(opts(state, "0.5", "--die-with-parent"), runner)...))
			cmd.Path, cmd.Args[0] = "/bin/sh", "/bin/sh"
			parent := e.startCmd(cmd)
			parent.waitFile(ready)
			parent.cmd.Process.Kill()
			parent.wait(corralTimeout)
			e.assertGone()
			waitState(t, state, "exited")
			wantState(t, readState(t, state), map[string]any{"termination_signal": 15, "phase": "exited"})
		})
		t.Run("parent-thread-exits", func(t *testing.T) {
			e := newEnv(t, m)
			state, ready, parentReady := e.file("state.json"), e.file("ready"), e.file("parent-ready")
			runner := e.helper("spawn", "-setsid", "-ready", ready, "-then", "sleep", "--", "sleep", "-ignore-term")
			// The thread that started corral exits, the process does not:
			// no cancel (PR_SET_PDEATHSIG would fire here).
			cmd := e.command(nil)
			cmd.Path = helperBin
			cmd.Args = append(e.helper("thread-parent", "-ready", parentReady, "--", corralBin), e.args(opts(state, "0.5", "--die-with-parent"), runner)...)
			parent := e.startCmd(cmd)
			parent.waitFile(ready)
			parent.waitFile(parentReady)
			time.Sleep(200 * time.Millisecond) // a false alarm would act within this
			if doc := readState(t, state); doc["phase"] != "running" || doc["termination_signal"] != nil {
				t.Fatalf("the exit of the parent's thread cancelled the run: %v", doc)
			}
			// Then the parent process itself goes.
			parent.cmd.Process.Kill()
			parent.wait(corralTimeout)
			e.assertGone()
			waitState(t, state, "exited")
			wantState(t, readState(t, state), map[string]any{"termination_signal": 15, "phase": "exited"})
		})
		// Under a PID 1 that only reaps (a container's init, bubblewrap's):
		// each case runs corral beneath it, in namespaces of its own,
		// whatever subreaper runs the tests.
		underPID1 := func(e *env, args ...string) result {
			reaper := []string{"pidns-reaper"}
			if m.rootless {
				reaper = append(reaper, "-userns")
			}
			cmd := e.command(nil)
			cmd.Path, cmd.Args = helperBin, e.helper(append(append(reaper, "--"), args...)...)
			return e.startCmd(cmd).wait(corralTimeout)
		}
		// A PID-1 parent is a live parent, watched like any other (issue
		// 20 point 1: it used to be taken for an exited one, and the run
		// was cancelled at once).
		t.Run("pid1-parent-watched", func(t *testing.T) {
			e := newEnv(t, m)
			state := e.file("state.json")
			res := underPID1(e, append([]string{corralBin}, e.args(opts(state, "0.5", "-v", "--die-with-parent"), e.helper("exit", "-code", "3"))...)...)
			if !strings.Contains(res.stderr, "watching corral's parent, pid 1") {
				t.Errorf("-v does not say PID 1 is watched: %q", res.stderr)
			}
			// pidns-reaper exits 0 once everything beneath it is gone;
			// the state file says how corral's run ended.
			wantCode(t, res, 0)
			e.assertGone()
			wantState(t, readState(t, state), map[string]any{"termination_signal": nil, "runner_exit_code": 3, "phase": "exited"})
		})
		// A parent gone before corral's first instruction left corral to
		// PID 1, which cannot be told from a PID-1 parent: the documented
		// window. corral watches PID 1 and the runner ends by itself.
		t.Run("parent-gone-before-start", func(t *testing.T) {
			e := newEnv(t, m)
			state := e.file("state.json")
			res := underPID1(e, append([]string{helperBin, "-marker", e.marker, "orphan-exec", "--", corralBin},
				e.args(opts(state, "0.5", "--die-with-parent"), e.helper("exit", "-code", "3"))...)...)
			wantCode(t, res, 0)
			e.assertGone()
			waitState(t, state, "exited")
			wantState(t, readState(t, state), map[string]any{"termination_signal": nil, "runner_exit_code": 3})
		})
		// The parent exits right as corral starts, before or after its
		// first instruction: cancelled, or watching PID 1 until the runner
		// ends by itself. Either way nothing is left behind.
		t.Run("parent-exits-at-start", func(t *testing.T) {
			e := newEnv(t, m)
			state := e.file("state.json")
			runner := e.helper("spawn", "-setsid", "-pause", "1s", "--", "sleep", "-ignore-term")
			res := underPID1(e, append([]string{"/bin/sh", "-c", `"$@" & exit 0`, "parent", corralBin}, e.args(opts(state, "0.5", "--die-with-parent"), runner)...)...)
			wantCode(t, res, 0)
			e.assertGone()
			waitState(t, state, "exited")
		})
	})
}

// waitState waits (bounded) until a state file written by a corral the
// test does not wait for shows phase.
func waitState(t *testing.T, path, phase string) {
	t.Helper()
	deadline := time.Now().Add(readyTimeout)
	for {
		if data, err := os.ReadFile(path); err == nil && strings.Contains(string(data), `"phase":"`+phase+`"`) {
			return
		}
		if time.Now().After(deadline) {
			data, _ := os.ReadFile(path)
			t.Fatalf("state never showed phase %q: %q", phase, data)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// -v names the ABI and what is enforced; probe says each option works.
func TestPolicyVerboseAndProbe(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		requireLandlock(t, 6)
		e := newEnv(t, m)
		w, s := e.mkdirs("w")[0], e.mkdirs("s")[0]
		res := e.run(e.args([]string{"-v", "--writable", w, "--hide", s, "--isolate-ipc"}, e.helper("exit")))
		wantCode(t, res, 0)
		for _, want := range []string{"landlock ABI ", "writable only beneath " + w, "no access beneath " + s, "IPC scopes: abstract_unix_socket, signal", "write_file"} {
			if !strings.Contains(res.stderr, want) {
				t.Errorf("-v lacks %q: %q", want, res.stderr)
			}
		}
		_, available, detail := parseProbe(t, e.run([]string{"probe", "--json"}))
		for _, name := range []string{"landlock rights", "--writable", "--read-only", "--hide", "--isolate-ipc", "--timeout", "--die-with-parent"} {
			if !available[name] {
				t.Errorf("probe says %s is unavailable: %q", name, detail[name])
			}
		}
		if !strings.Contains(detail["landlock rights"], "scopes: abstract_unix_socket, signal") {
			t.Errorf("probe's Landlock rights lack the scopes: %q", detail["landlock rights"])
		}
		e.assertGone()
	})
}

// --die-with-parent costs the engine no OS thread: with the pids.max of
// the cgroup corral shares with its runner used up, the parent's exit
// still ends the run, and the teardown wins.
func TestPolicyDieWithParentUnderPidsLimit(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		const max = 64
		dir := pidsCgroup(t, max)
		state, ready := e.file("state.json"), e.file("ready")
		// bash retries a fork that fails with EAGAIN and goes on, so the
		// limit stays used up (a dash fork bomb can die out).
		bomb := `: > ` + ready + `; exec 2>/dev/null; while :; do /bin/sleep 1000 & done`
		// The parent is a shell in the cgroup that waits for corral.
		cmd := e.command(nil, e.markerEnv())
		cmd.Path = "/bin/sh"
		cmd.Args = append([]string{"sh", "-c", `read go <&3; "$@"; :`, "sh", corralBin},
			e.args(opts(state, "0.3", "--die-with-parent"), []string{"/bin/bash", "-c", bomb})...)
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.ExtraFiles = []*os.File{r}
		parent := e.startCmd(cmd)
		r.Close()
		if err := os.WriteFile(dir+"/cgroup.procs", []byte(fmt.Sprint(cmd.Process.Pid)), 0o644); err != nil {
			t.Fatalf("moving the parent into %s: %v", dir, err)
		}
		if _, err := w.Write([]byte("go\n")); err != nil {
			t.Fatal(err)
		}
		w.Close()
		parent.waitFile(ready)
		deadline := time.Now().Add(readyTimeout)
		for {
			data, _ := os.ReadFile(dir + "/pids.current")
			if n := strings.TrimSpace(string(data)); n == fmt.Sprint(max) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the bomb never filled pids.max %d (pids.current %q): %s", max, data, parent.partial())
			}
			time.Sleep(5 * time.Millisecond)
		}
		parent.cmd.Process.Kill()
		parent.wait(corralTimeout)
		if left := waitMarkedGone(e.marker, corralTimeout); len(left) > 0 {
			t.Fatalf("the tree survived the parent's exit under a full pids.max:\n%s", formatProcs(left))
		}
		waitState(t, state, "exited")
		wantState(t, readState(t, state), map[string]any{"termination_signal": 15, "phase": "exited", "active_children": 0})
		wantNoCrash(t, parent.result().stderr)
	})
}
