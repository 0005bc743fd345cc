package test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Bounds of every wait. They catch hangs; none of them is a timing assertion.
const (
	corralTimeout = 30 * time.Second // corral must exit within this
	readyTimeout  = 15 * time.Second // a runner must become ready within this
	goneTimeout   = 5 * time.Second  // the kernel must finish tearing down within this
)

// The unprivileged identity the rootless mode runs corral as.
const (
	nobodyUID = 65534
	nobodyGID = 65534
)

// testPath is the PATH corral and its runners get.
const testPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

var (
	corralBin string // the corral binary under test
	helperBin string // test/helper
	baseDir   string // 0755 directory holding both binaries and every test's directory
)

// mode is one way of running corral. Every integration test runs once per
// entry of modes, with the entry's name in the subtest name.
type mode struct {
	name       string // subtest name
	flag       string // value of corral's --mode
	rootless   bool   // run corral as nobodyUID/nobodyGID instead of root
	needsPIDNS bool   // the kernel must allow the pid (and, rootless, user) namespaces
	// env is added to corral's environment in every run of the mode: a
	// variant of it (a test-only knob, such as the mounts' fallback).
	env []string
}

// modes is the one list of modes the tests run in.
var modes = []mode{
	{name: "subreaper", flag: "subreaper"},
	{name: "pidns-root", flag: "pidns", needsPIDNS: true},
	{name: "pidns-rootless", flag: "pidns", needsPIDNS: true, rootless: true},
}

// pidns reports whether corral runs its engine as PID 1 of a new namespace.
func (m mode) pidns() bool { return m.flag == "pidns" }

func (m mode) credential() *syscall.Credential {
	if !m.rootless {
		return nil
	}
	return &syscall.Credential{Uid: nobodyUID, Gid: nobodyGID, Groups: []uint32{}}
}

// uid is the uid corral (and, as the spec maps it to itself, the runner) has.
func (m mode) uid() int {
	if m.rootless {
		return nobodyUID
	}
	return 0
}

var (
	probeMu    sync.Mutex
	probeCache = map[string]string{} // by mode name
)

// unavailable returns why this machine cannot run the mode, or "".
func (m mode) unavailable() string {
	probeMu.Lock()
	defer probeMu.Unlock()
	if reason, ok := probeCache[m.name]; ok {
		return reason
	}
	reason := m.probe()
	probeCache[m.name] = reason
	return reason
}

func (m mode) probe() string {
	if os.Geteuid() != 0 {
		return fmt.Sprintf("mode %s needs the tests to run as root (euid is %d)", m.name, os.Geteuid())
	}
	if !m.needsPIDNS {
		return ""
	}
	args := []string{"-marker", "corral-probe-" + randomHex(), "nsprobe"}
	if m.rootless {
		args = append(args, "-userns")
	}
	cmd := exec.Command(helperBin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: m.credential(), Pdeathsig: syscall.SIGKILL}
	cmd.Dir = baseDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Sprintf("mode %s: the kernel does not let uid %d create the namespaces it needs: %v: %s",
			m.name, m.uid(), err, strings.TrimSpace(string(out)))
	}
	return ""
}

// missingFeature skips the test, or fails it under CI=true, where a green run
// must mean that everything ran.
func missingFeature(t *testing.T, reason string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: a missing feature is a failure)", reason)
	}
	t.Skip(reason)
}

func requireMode(t *testing.T, m mode) {
	t.Helper()
	if reason := m.unavailable(); reason != "" {
		missingFeature(t, reason)
	}
}

// forEachMode runs fn as a parallel subtest named after each mode.
func forEachMode(t *testing.T, fn func(t *testing.T, m mode)) {
	t.Parallel()
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			fn(t, m)
		})
	}
}

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "corral-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// uid 65534 must be able to reach the binaries and the test directories.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	root, err := filepath.Abs("..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	corralBin = filepath.Join(dir, "corral")
	helperBin = filepath.Join(dir, "helper")
	netprobeBin = filepath.Join(dir, "netprobe")
	baseDir = dir
	// Every binary the tests drive, built once here: corral first, so a
	// prebuilt one can stand in for it.
	builds := []struct{ out, pkg string }{{corralBin, "./cmd/corral"}, {helperBin, "./test/helper"}, {netprobeBin, "./test/netprobe"}}
	if prebuilt := os.Getenv("CORRAL_TEST_BINARY"); prebuilt != "" {
		// Test a given binary instead of building ./cmd/corral.
		data, err := os.ReadFile(prebuilt)
		if err == nil {
			err = os.WriteFile(corralBin, data, 0o755)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		builds = builds[1:]
	}
	for _, b := range builds {
		cmd := exec.Command("go", "build", "-o", b.out, b.pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", b.pkg, err, out)
			return 1
		}
		if err := os.Chmod(b.out, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

func randomHex() string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// env is one test's world: a unique marker and a directory the runner's uid
// can write to. When the test ends it asserts that no process carrying the
// marker survives, then kills any that do.
type env struct {
	t      *testing.T
	m      mode
	marker string
	dir    string
}

func newEnv(t *testing.T, m mode) *env {
	t.Helper()
	requireMode(t, m)
	dir, err := os.MkdirTemp(baseDir, "t-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, m: m, marker: "corral-test-" + randomHex(), dir: dir}
	t.Cleanup(func() {
		if left := waitMarkedGone(e.marker, goneTimeout); len(left) > 0 {
			t.Errorf("processes carrying marker %s survive the test:\n%s", e.marker, formatProcs(left))
		}
		killMarked(t, e.marker)
	})
	return e
}

// file returns a path in the test's directory.
func (e *env) file(name string) string { return filepath.Join(e.dir, name) }

// helper returns the command line of a helper carrying the test's marker.
func (e *env) helper(args ...string) []string {
	return append([]string{helperBin, "-marker", e.marker}, args...)
}

// args returns corral's arguments: --mode, opts, then "--" and the runner.
func (e *env) args(opts []string, runner []string) []string {
	a := append([]string{"--mode", e.m.flag}, opts...)
	return append(append(a, "--"), runner...)
}

// opts returns the usual options: a state file, the grace and a fast poll.
func opts(state, grace string, more ...string) []string {
	o := []string{"--grace", grace, "--poll", "0.01"}
	if state != "" {
		o = append(o, "--state", state)
	}
	return append(o, more...)
}

// baseEnviron is the environment corral gets: the test's, without corral's
// own variables, with a fixed PATH.
func baseEnviron() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "CORRAL_") || strings.HasPrefix(name, "HERMES_CLI_PROCESS_") || name == "PATH" {
			continue
		}
		out = append(out, kv)
	}
	return append(out, "PATH="+testPath)
}

// command returns an unstarted corral with args, as the mode's user, in its
// own process group (a corral that signalled its group could not reach the
// test), with extra environment variables appended.
func (e *env) command(args []string, extraEnv ...string) *exec.Cmd {
	cmd := exec.Command(corralBin, args...)
	cmd.Env = append(append(baseEnviron(), e.m.env...), extraEnv...)
	cmd.Dir = e.dir
	// A process corral failed to end may hold stdout or stderr open: do not
	// wait for it past corral's own exit.
	cmd.WaitDelay = 2 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
		Credential: e.m.credential(),
	}
	return cmd
}

// result is how a corral run ended.
type result struct {
	code   int // exit status, or -1 when killed by a signal
	signal syscall.Signal
	stdout string
	stderr string
}

func (r result) String() string {
	how := fmt.Sprintf("exit status %d", r.code)
	if r.code < 0 {
		how = fmt.Sprintf("killed by signal %d (%v)", int(r.signal), r.signal)
	}
	return fmt.Sprintf("%s\n--- stdout:\n%s\n--- stderr:\n%s", how, r.stdout, r.stderr)
}

// lockedBuffer is a bytes.Buffer safe to read while corral writes to it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// running is a started corral.
type running struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdout *lockedBuffer // nil when the test set cmd.Stdout itself
	stderr *lockedBuffer
	done   chan struct{}
	state  *os.ProcessState
}

// startCmd starts cmd, capturing stdout and stderr unless the test set them.
// A cleanup kills corral if the test ends before it exited.
func (e *env) startCmd(cmd *exec.Cmd) *running {
	e.t.Helper()
	r := &running{t: e.t, cmd: cmd, done: make(chan struct{})}
	if cmd.Stdout == nil {
		r.stdout = &lockedBuffer{}
		cmd.Stdout = r.stdout
	}
	if cmd.Stderr == nil {
		r.stderr = &lockedBuffer{}
		cmd.Stderr = r.stderr
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatalf("starting %v: %v", cmd.Args, err)
	}
	e.follow(r)
	return r
}

// follow waits for r's started process in the background, and kills it
// if the test ends before it exited.
func (e *env) follow(r *running) {
	go func() {
		r.cmd.Wait()
		r.state = r.cmd.ProcessState
		close(r.done)
	}()
	e.t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			r.cmd.Process.Kill()
			<-r.done
		}
	})
}

// start starts corral with args.
func (e *env) start(args []string, extraEnv ...string) *running {
	e.t.Helper()
	return e.startCmd(e.command(args, extraEnv...))
}

// run runs corral with args to its end (bounded by corralTimeout).
func (e *env) run(args []string, extraEnv ...string) result {
	e.t.Helper()
	return e.start(args, extraEnv...).wait(corralTimeout)
}

func (r *running) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// wait waits at most timeout for corral to exit; past it, the test fails
// and corral is killed.
func (r *running) wait(timeout time.Duration) result {
	r.t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-r.done:
	case <-timer.C:
		r.cmd.Process.Kill()
		<-r.done
		r.t.Fatalf("corral did not exit within %v (killed it): %v", timeout, r.result())
	}
	return r.result()
}

// result is valid once corral exited.
func (r *running) result() result {
	res := result{code: r.state.ExitCode()}
	if ws, ok := r.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.signal = ws.Signal()
	}
	if r.stdout != nil {
		res.stdout = r.stdout.String()
	}
	if r.stderr != nil {
		res.stderr = r.stderr.String()
	}
	return res
}

// partial describes corral while it may still run, for failure messages.
func (r *running) partial() string {
	if r.exited() {
		return r.result().String()
	}
	var out, errs string
	if r.stdout != nil {
		out = r.stdout.String()
	}
	if r.stderr != nil {
		errs = r.stderr.String()
	}
	return fmt.Sprintf("still running\n--- stdout:\n%s\n--- stderr:\n%s", out, errs)
}

// signal sends sig to the corral process the test started.
func (r *running) signal(sig syscall.Signal) {
	r.t.Helper()
	if err := r.cmd.Process.Signal(sig); err != nil {
		r.t.Fatalf("sending %v to corral: %v", sig, err)
	}
}

// waitFile waits (bounded) until path exists; corral exiting first fails.
func (r *running) waitFile(path string) {
	r.t.Helper()
	deadline := time.Now().Add(readyTimeout)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if r.exited() {
			// One last look: the file may have appeared just before.
			if _, err := os.Stat(path); err == nil {
				return
			}
			r.t.Fatalf("corral exited before %s appeared: %v", path, r.result())
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s did not appear within %v: %s", path, readyTimeout, r.partial())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitPhase waits (bounded) until the state file shows phase.
func (r *running) waitPhase(statePath, phase string) {
	r.t.Helper()
	deadline := time.Now().Add(readyTimeout)
	last := ""
	for {
		if data, err := os.ReadFile(statePath); err == nil {
			var doc map[string]any
			if json.Unmarshal(data, &doc) == nil {
				last = fmt.Sprint(doc["phase"])
				if last == phase {
					return
				}
			}
		}
		if r.exited() {
			r.t.Fatalf("corral exited before the state showed phase %q (last %q): %v", phase, last, r.result())
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("state never showed phase %q within %v (last %q): %s", phase, readyTimeout, last, r.partial())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// wantCode fails the test unless corral exited with code.
func wantCode(t *testing.T, res result, code int) {
	t.Helper()
	if res.code != code {
		t.Fatalf("corral: want exit status %d, got %v", code, res)
	}
}

// stateKeys are exactly the keys of a state document.
var stateKeys = []string{
	"active_children", "adopted_children", "escalated", "orphaned_children_total", "phase",
	"reaped_children_total", "reaped_orphans_total", "runner_exit_code", "termination_signal",
	"updated_at",
}

// readState reads a state document and checks its keys and updated_at.
func readState(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the state file: %v", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("state file is not JSON: %v: %q", err, data)
	}
	keys := slices.Sorted(maps.Keys(doc))
	if !slices.Equal(keys, stateKeys) {
		t.Errorf("state keys: want %v, got %v", stateKeys, keys)
	}
	if s, ok := doc["updated_at"].(string); !ok {
		t.Errorf("updated_at is not a string: %v", doc["updated_at"])
	} else if ts, err := time.Parse(time.RFC3339Nano, s); err != nil {
		t.Errorf("updated_at %q is not RFC 3339: %v", s, err)
	} else if _, off := ts.Zone(); off != 0 || !strings.HasSuffix(s, "Z") {
		t.Errorf("updated_at %q is not UTC", s)
	}
	return doc
}

// wantState checks the given keys of a state document; a number is compared
// as JSON decodes it, nil means null.
func wantState(t *testing.T, doc map[string]any, want map[string]any) {
	t.Helper()
	for key, w := range want {
		got := doc[key]
		if n, ok := w.(int); ok {
			w = float64(n)
		}
		if got != w {
			t.Errorf("state %s: want %v, got %v (document %v)", key, w, got, doc)
		}
	}
}

// wantAtLeast checks that numeric keys of a state document are >= a bound.
func wantAtLeast(t *testing.T, doc map[string]any, min map[string]int) {
	t.Helper()
	for key, m := range min {
		got, ok := doc[key].(float64)
		if !ok || got < float64(m) {
			t.Errorf("state %s: want >= %d, got %v (document %v)", key, m, doc[key], doc)
		}
	}
}

// assertGone asserts, waiting at most goneTimeout for the kernel, that no
// process carrying the test's marker is left.
func (e *env) assertGone() {
	e.t.Helper()
	if left := waitMarkedGone(e.marker, goneTimeout); len(left) > 0 {
		e.t.Errorf("processes started by the runner survive corral:\n%s", formatProcs(left))
	}
}

// procInfo is a process found on the host carrying a marker.
type procInfo struct {
	pid     int
	state   string
	cmdline string
}

func formatProcs(ps []procInfo) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "  pid %d state %s: %s\n", p.pid, p.state, p.cmdline)
	}
	return b.String()
}

// markedProcs scans the host's /proc for processes whose command line (or,
// for external programs the helper ran, environment) carries marker.
// Zombies have neither and are not listed.
func markedProcs(marker string) []procInfo {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		panic(err)
	}
	needle := []byte(marker)
	envNeedle := []byte("HELPER_MARKER=" + marker)
	var out []procInfo
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if p, ok := carriesMarker(pid, needle, envNeedle); ok {
			out = append(out, p)
		}
	}
	return out
}

func carriesMarker(pid int, needle, envNeedle []byte) (procInfo, bool) {
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if !bytes.Contains(cmdline, needle) {
		environ, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if !bytes.Contains(environ, envNeedle) {
			return procInfo{}, false
		}
	}
	state := "?"
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) {
			state = string(stat[i+2])
		}
	}
	return procInfo{pid: pid, state: state, cmdline: string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))}, true
}

// waitMarkedGone polls until no process carries marker, or timeout; it
// returns what is left.
func waitMarkedGone(marker string, timeout time.Duration) []procInfo {
	deadline := time.Now().Add(timeout)
	for {
		left := markedProcs(marker)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// killMarked SIGKILLs, by pid, every process carrying marker, through a
// pidfd opened before the marker is checked again, so a reused pid is never
// hit.
func killMarked(t *testing.T, marker string) {
	deadline := time.Now().Add(10 * time.Second)
	needle := []byte(marker)
	envNeedle := []byte("HELPER_MARKER=" + marker)
	for {
		left := markedProcs(marker)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("could not kill the processes carrying marker %s:\n%s", marker, formatProcs(left))
			return
		}
		for _, p := range left {
			fd, err := unix.PidfdOpen(p.pid, 0)
			if err != nil {
				continue
			}
			if _, ok := carriesMarker(p.pid, needle, envNeedle); ok {
				err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
				if err != nil && !errors.Is(err, unix.ESRCH) {
					t.Logf("killing pid %d: %v", p.pid, err)
				}
			}
			unix.Close(fd)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
