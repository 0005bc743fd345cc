package test

// Transparency (docs/signals-and-teardown.md, "What the runner inherits";
// issue 10): the
// runner gets the caller's descriptors at their numbers, its arguments,
// environment and paths byte for byte, and its blocked signal mask, in every
// mode and on both of corral's start paths.

import (
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// startPaths are the ways corral starts a runner: forked straight from
// the engine and held under ptrace until every signal is registered,
// forked without that hold (--allow-new-privs: a traced exec would not
// grant what an untraced one does), and through the re-executed exec
// stage, which a resource limit selects.
var startPaths = []struct {
	name string
	opts []string
}{
	{"direct", nil},
	{"unheld", []string{"--allow-new-privs"}},
	{"exec-stage", []string{"--rlimit", "RLIMIT_NOFILE=1024:4096"}},
}

// forEachModeAndPath runs fn as a parallel subtest for every mode and start
// path; opts are the path's corral options.
func forEachModeAndPath(t *testing.T, fn func(t *testing.T, m mode, opts []string)) {
	forEachMode(t, func(t *testing.T, m mode) {
		for _, p := range startPaths {
			t.Run(p.name, func(t *testing.T) {
				t.Parallel()
				fn(t, m, p.opts)
			})
		}
	})
}

// fileID says which open file a descriptor refers to.
type fileID struct{ dev, ino uint64 }

func fdID(t *testing.T, fd int) fileID {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatalf("fstat %d: %v", fd, err)
	}
	return fileID{uint64(st.Dev), st.Ino}
}

// ownInheritedFDs are the descriptors (3 and up) this test process was
// itself started with: whoever ran go test may pass some, and they reach
// corral and its runner too, as they should.
func ownInheritedFDs(t *testing.T) map[int]fileID {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]fileID{}
	for _, ent := range entries {
		fd, err := strconv.Atoi(ent.Name())
		if err != nil || fd < 3 {
			continue
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
			out[fd] = fdID(t, fd)
		}
	}
	return out
}

// parseFDs reads the helper's "fds" report.
func parseFDs(t *testing.T, out string) map[int]fileID {
	t.Helper()
	got := map[int]fileID{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var fd int
		var id fileID
		if _, err := fmt.Sscanf(line, "fd=%d dev=%d ino=%d", &fd, &id.dev, &id.ino); err != nil {
			t.Fatalf("fds report line %q: %v (output %q)", line, err, out)
		}
		got[fd] = id
	}
	return got
}

// fds 3-6 and 9 (7 and 8 closed) reach the runner as the same open files at
// the same numbers, and corral adds none of its own: its stage socket sits
// in the gap at 7 or above 9 and is gone before the runner runs.
func TestInheritedFDsKeepTheirNumbers(t *testing.T) {
	forEachModeAndPath(t, func(t *testing.T, m mode, pathOpts []string) {
		e := newEnv(t, m)
		file, err := os.Create(e.file("fd3"))
		if err != nil {
			t.Fatal(err)
		}
		defer file.Close()
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer pr.Close()
		defer pw.Close()
		devNull, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		defer devNull.Close()
		dir, err := os.Open(e.dir)
		if err != nil {
			t.Fatal(err)
		}
		defer dir.Close()
		extra := []*os.File{file, pr, pw, devNull, nil, nil, dir} // fds 3..9

		cmd := e.command(e.args(opts("", "0.1", pathOpts...), e.helper("fds")))
		cmd.ExtraFiles = extra
		leaked := ownInheritedFDs(t)
		res := e.startCmd(cmd).wait(corralTimeout)
		wantCode(t, res, 0)
		got := parseFDs(t, res.stdout)

		for _, fd := range []int{0, 1, 2} {
			if _, ok := got[fd]; !ok {
				t.Errorf("the runner has no fd %d", fd)
			}
		}
		for i, f := range extra {
			fd := 3 + i
			id, ok := got[fd]
			switch {
			case f == nil && ok:
				t.Errorf("fd %d was closed by the caller, the runner has it open (%v)", fd, id)
			case f == nil:
			case !ok:
				t.Errorf("the caller's fd %d (%s) did not reach the runner", fd, f.Name())
			case id != fdID(t, int(f.Fd())):
				t.Errorf("the runner's fd %d is another file than the caller's %s", fd, f.Name())
			}
		}
		for fd, id := range got {
			if fd <= 2 || fd < 3+len(extra) {
				continue
			}
			if want, ok := leaked[fd]; !ok || want != id {
				t.Errorf("the runner has fd %d, which the caller never gave it: corral's own descriptor leaked (report %q)", fd, res.stdout)
			}
		}
		e.assertGone()
	})
}

// systemd socket activation: a listening socket at fd 3 with LISTEN_FDS=1
// is the runner's to accept on.
func TestSocketActivation(t *testing.T) {
	forEachModeAndPath(t, func(t *testing.T, m mode, pathOpts []string) {
		e := newEnv(t, m)
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		lf, err := l.(*net.TCPListener).File()
		if err != nil {
			t.Fatal(err)
		}
		defer lf.Close()
		cmd := e.command(e.args(opts("", "0.1", pathOpts...), e.helper("accept")), "LISTEN_FDS=1")
		cmd.ExtraFiles = []*os.File{lf}
		r := e.startCmd(cmd)

		conn, err := net.DialTimeout("tcp", l.Addr().String(), readyTimeout)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(readyTimeout))
		var b [1]byte
		if _, err := io.ReadFull(conn, b[:]); err != nil || b[0] != 'x' {
			t.Fatalf("read from the runner: %q, %v; corral: %s", b[:], err, r.partial())
		}
		wantCode(t, r.wait(corralTimeout), 0)
		e.assertGone()
	})
}

// bytesReport is the helper's "bytes" report, decoded.
type bytesReport struct {
	args, env []string
	exe, cwd  string
}

func parseBytes(t *testing.T, out string) bytesReport {
	t.Helper()
	var r bytesReport
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		key, value, _ := strings.Cut(line, " ")
		b, err := hex.DecodeString(value)
		if err != nil {
			t.Fatalf("bytes report line %q: %v", line, err)
		}
		switch key {
		case "arg":
			r.args = append(r.args, string(b))
		case "env":
			r.env = append(r.env, string(b))
		case "exe":
			r.exe = string(b)
		case "cwd":
			r.cwd = string(b)
		default:
			t.Fatalf("bytes report line %q", line)
		}
	}
	return r
}

// Arguments, environment names and values, the runner's path, the working
// directory and the --state path cross corral exactly, in whatever encoding
// (JSON, for one, would turn \xff into U+FFFD).
func TestBytesCrossExactly(t *testing.T) {
	forEachModeAndPath(t, func(t *testing.T, m mode, pathOpts []string) {
		e := newEnv(t, m)
		runner := e.file("h\xffelper")
		data, err := os.ReadFile(helperBin)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(runner, data, 0o755); err != nil {
			t.Fatal(err)
		}
		cwd := e.file("d\xffir")
		if err := os.Mkdir(cwd, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(cwd, 0o777); err != nil {
			t.Fatal(err)
		}
		state := e.file("st\xffate.json")
		argv := []string{runner, "-marker", e.marker, "bytes", "--", "\xff", "a\xc3(b", "", "line\nbreak", "\xed\xa0\x80", "é"}
		env := []string{"X\xffK=v\xfe", "TRANSPARENCY=\xc3(\xff", "EMPTY=", "UTF8=é"}

		cmd := e.command(e.args(opts(state, "0.1", pathOpts...), argv), env...)
		cmd.Dir = cwd
		res := e.startCmd(cmd).wait(corralTimeout)
		wantCode(t, res, 0)
		r := parseBytes(t, res.stdout)
		if !slices.Equal(r.args, argv) {
			t.Errorf("argv:\n got  %q\n want %q", r.args, argv)
		}
		for _, kv := range env {
			if !slices.Contains(r.env, kv) {
				t.Errorf("environment lacks %q: %q", kv, r.env)
			}
		}
		if r.exe != runner {
			t.Errorf("runner executable %q, want %q", r.exe, runner)
		}
		if r.cwd != cwd {
			t.Errorf("runner working directory %q, want %q", r.cwd, cwd)
		}
		if _, err := os.Stat(state); err != nil {
			names, _ := filepath.Glob(e.file("*"))
			t.Errorf("no state file at %q (%v); the directory holds %q", state, err, names)
		} else {
			wantState(t, readState(t, state), map[string]any{"phase": "exited", "runner_exit_code": 0})
		}
		e.assertGone()
	})
}

// blockedSignals are what the caller blocks. Only signals a Go program may
// keep blocked: the runtime unblocks SIGHUP, SIGINT, SIGQUIT, SIGTERM,
// SIGCHLD and the synchronous faults on every thread before any of corral's
// code runs, and keeps the original mask to itself (a documented limit).
const blockedSignals = "USR1,USR2,PIPE,ALRM,TTIN,TTOU,WINCH,37,64"

// A signal the caller blocked is blocked in the runner: its SigBlk equals
// what the same runner shows when the caller runs it directly (tini's
// sigconf test).
func TestBlockedSignalsReachTheRunner(t *testing.T) {
	grep, err := exec.LookPath("grep")
	if err != nil {
		missingFeature(t, "grep is needed as a runner that reports its own signal mask")
	}
	runner := []string{grep, "^SigBlk", "/proc/self/status"}
	forEachModeAndPath(t, func(t *testing.T, m mode, pathOpts []string) {
		e := newEnv(t, m)
		blocking := func(argv ...string) string {
			cmd := e.command(nil)
			cmd.Path = helperBin
			cmd.Args = append([]string{helperBin, "-marker", e.marker, "sigmask", "-block", blockedSignals, "--"}, argv...)
			res := e.startCmd(cmd).wait(corralTimeout)
			wantCode(t, res, 0)
			return strings.TrimSpace(res.stdout)
		}
		direct := blocking(runner...)
		viaCorral := blocking(append([]string{corralBin}, e.args(opts("", "0.1", pathOpts...), runner)...)...)

		mask, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(direct, "SigBlk:")), 16, 64)
		if err != nil {
			t.Fatalf("direct run printed %q: %v", direct, err)
		}
		for _, name := range strings.Split(blockedSignals, ",") {
			sig := unix.SignalNum("SIG" + name)
			if n, err := strconv.Atoi(name); err == nil {
				sig = unix.Signal(n)
			}
			if mask&(1<<(uint(sig)-1)) == 0 {
				t.Fatalf("the direct run does not have %s blocked (%s): the test's caller is broken", name, direct)
			}
		}
		if viaCorral != direct {
			t.Errorf("runner under corral: %q, run directly: %q", viaCorral, direct)
		}
		e.assertGone()
	})
}

// The pidns init reads the forwarded signals os/signal would register one
// round trip each (SIGUSR1, SIGWINCH, the real-time ones, ...) from a
// signalfd: the host clones it with them blocked, and every thread of the
// init keeps them blocked. A thread that let one through would hand it to
// the Go runtime's handler, which drops what os/signal was not asked for;
// os/signal's own thread used to. On the unheld path the init registers
// them with os/signal too, before its starter thread takes the caller's
// mask for the fork, and os/signal's thread unblocks them: there the test
// asks only that they arrive. On every path a runner's first act, a signal
// to its parent, comes back to it.
func TestInitKeepsLaterSignalsBlocked(t *testing.T) {
	later := []unix.Signal{unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH, unix.SIGALRM, unix.SIGPWR, 35, 50, 64}
	forEachModeAndPath(t, func(t *testing.T, m mode, pathOpts []string) {
		if !m.pidns() {
			t.Skip("subreaper mode has no init: corral's own mask is its caller's")
		}
		e := newEnv(t, m)
		for _, sig := range []string{"USR1", "50"} {
			res := e.run(e.args(append(opts("", "0.2"), pathOpts...), e.helper("sigparent", "-sig", sig)))
			wantCode(t, res, 0)
		}
		if slices.Contains(pathOpts, "--allow-new-privs") {
			e.assertGone()
			return
		}
		script := `for s in /proc/1/task/*/status; do grep ^SigBlk "$s"; done`
		res := e.run(e.args(pathOpts, []string{"/bin/sh", "-c", script}))
		wantCode(t, res, 0)
		lines := strings.Fields(strings.ReplaceAll(res.stdout, "SigBlk:", ""))
		if len(lines) < 2 {
			t.Fatalf("want the init's threads' masks, got %q", res.stdout)
		}
		for i, hex := range lines {
			mask, err := strconv.ParseUint(hex, 16, 64)
			if err != nil {
				t.Fatalf("thread %d: mask %q: %v", i, hex, err)
			}
			for _, sig := range later {
				if mask&(1<<(uint(sig)-1)) == 0 {
					t.Errorf("a thread of the init lets signal %d through (SigBlk %s): it must stay blocked, read from the signalfd", sig, hex)
				}
			}
		}
		e.assertGone()
	})
}

// Where the init cannot give its held runner the caller's mask
// (PTRACE_SETSIGMASK refused by a seccomp filter), it kills the held
// runner before its first instruction and starts it again without the
// hold: the runner runs once, with the caller's mask, and its signals
// still come back to it.
func TestHeldRunnerMaskRefused(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		if !m.pidns() {
			t.Skip("only the pidns init holds a runner with signals blocked")
		}
		e := newEnv(t, m)
		runs := e.file("runs")
		script := `echo ran >> ` + runs + `; grep ^SigBlk /proc/self/status`
		caller := func(argv ...string) result {
			cmd := e.command(nil)
			cmd.Path = helperBin
			cmd.Args = append([]string{helperBin, "-marker", e.marker, "sigmask", "-block", blockedSignals, "--"}, argv...)
			return e.startCmd(cmd).wait(corralTimeout)
		}
		direct := caller("/bin/sh", "-c", script)
		wantCode(t, direct, 0)
		via := caller(append(e.helper("deny-setsigmask", "--", corralBin), e.args(nil, []string{"/bin/sh", "-c", script})...)...)
		wantCode(t, via, 0)
		if via.stdout != direct.stdout {
			t.Errorf("runner's mask under corral %q, run directly %q", via.stdout, direct.stdout)
		}
		data, _ := os.ReadFile(runs)
		if n := strings.Count(string(data), "ran"); n != 2 {
			t.Errorf("the runner ran %d times in two runs (one of them corral's): the held one must die before its first instruction", n)
		}
		cmd := e.command(nil)
		cmd.Path = helperBin
		cmd.Args = append(e.helper("deny-setsigmask", "--", corralBin), e.args(opts("", "0.2"), e.helper("sigparent", "-sig", "USR1"))...)
		wantCode(t, e.startCmd(cmd).wait(corralTimeout), 0)
		e.assertGone()
	})
}
