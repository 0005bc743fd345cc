package test

// A settings file and --timeout are input corral reads before it chooses
// a mode (SPEC.md, "Settings files", and the --timeout row of "Sandbox
// policy"): each bad input is a usage error, exit 2, or a warning, at
// once and never with a stack trace; one mode is enough to show it.

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// settingsBound bounds each run of these tests: it catches a corral that
// hangs reading its input (a FIFO blocked it for good), and is no timing
// assertion.
const settingsBound = 10 * time.Second

// settingsAS is the address-space limit every corral of these tests runs
// under, so that one that reads /dev/zero without end (as it once did,
// to 18.8 GB) fails with an error instead of taking the machine's memory.
const settingsAS = 2 << 30

// settingsEnv is a test's world in the one mode these tests use.
func settingsEnv(t *testing.T) *env {
	t.Helper()
	if _, err := exec.LookPath("prlimit"); err != nil {
		missingFeature(t, "prlimit(1) (util-linux) is not installed: it bounds corral's memory in these tests")
	}
	return newEnv(t, modes[0])
}

// runLimited runs corral with opts and the runner under prlimit
// --as=limit (prlimit execs corral: the limit is corral's own), bounded
// by settingsBound.
func (e *env) runLimited(limit int, opts, runner []string) result {
	e.t.Helper()
	path, err := exec.LookPath("prlimit")
	if err != nil {
		e.t.Fatal(err)
	}
	cmd := e.command(e.args(opts, runner))
	cmd.Path = path
	cmd.Args = append([]string{"prlimit", "--as=" + strconv.Itoa(limit), "--", corralBin}, cmd.Args[1:]...)
	return e.startCmd(cmd).wait(settingsBound)
}

// sub is e for subtest t: its failures and cleanups are t's.
func (e *env) sub(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}

// wantUsage fails unless res is a usage error whose message contains
// each of want, with no Go runtime output.
func wantUsage(t *testing.T, res result, want ...string) {
	t.Helper()
	wantNoTrace(t, res)
	if res.code != 2 || !strings.HasPrefix(res.stderr, "usage: ") {
		t.Fatalf("want a usage error, exit status 2: %v", res)
	}
	for _, w := range want {
		if !strings.Contains(res.stderr, w) {
			t.Errorf("stderr does not contain %q: %v", w, res)
		}
	}
}

// wantNoTrace fails if corral printed anything of the Go runtime's.
func wantNoTrace(t *testing.T, res result) {
	t.Helper()
	for _, trace := range []string{"goroutine ", "fatal error", "panic:", "runtime."} {
		if strings.Contains(res.stderr, trace) {
			t.Fatalf("the Go runtime's %q in corral's stderr: %v", trace, res)
		}
	}
}

// Each settings file that is not a small regular file, or that holds a
// key twice or a CIDR among sandbox-runtime's domains, is a usage error
// naming the path and the cause.
func TestSettingsInputRefused(t *testing.T) {
	t.Parallel()
	e := settingsEnv(t)
	fifo := e.file("fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	big := e.file("big.json")
	e.writeFile(big, "{}"+strings.Repeat(" ", 1<<20), 0o644)
	dupTop := e.file("dup-top.json")
	e.writeFile(dupTop, `{"hide":["/x"],"hide":[]}`, 0o644)
	dupNested := e.file("dup-nested.json")
	e.writeFile(dupNested, `{"network": {"allowedDomains": []}, "filesystem": {"allowWrite": [], "allowWrite": ["`+e.dir+`"]}}`, 0o644)
	cidr := e.file("cidr.json")
	e.writeFile(cidr, `{"network": {"allowedDomains": ["0.0.0.0/0"]}, "filesystem": {"allowWrite": []}}`, 0o644)
	for _, tc := range []struct {
		name, path string
		limit      int
		want       []string
	}{
		{"/dev/zero", "/dev/zero", settingsAS, []string{"--settings /dev/zero: a character device, not a regular file"}},
		// The issue's own case: under a 1 GiB address space corral died
		// of the Go runtime's "fatal error: out of memory".
		{"/dev/zero under --as=1G", "/dev/zero", 1 << 30, []string{"--settings /dev/zero: a character device"}},
		{"FIFO without a writer", fifo, settingsAS, []string{"--settings " + fifo + ": a FIFO"}},
		{"directory", e.dir, settingsAS, []string{"--settings " + e.dir + ": a directory"}},
		{"over 1 MiB", big, settingsAS, []string{"--settings " + big + ": larger than 1048576 bytes (1 MiB)"}},
		{"duplicate key", dupTop, settingsAS, []string{"--settings " + dupTop + `: key "hide" given twice`}},
		{"duplicate nested key", dupNested, settingsAS, []string{"--settings " + dupNested + `: key "filesystem.allowWrite" given twice`}},
		{"CIDR in sandbox-runtime's format", cidr, settingsAS, []string{`"0.0.0.0/0" is a CIDR`, `"allow-net"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantUsage(t, e.sub(t).runLimited(tc.limit, []string{"--settings", tc.path}, []string{"/bin/true"}), tc.want...)
		})
	}
}

// A FIFO given as the settings file, and a SIGTERM once corral catches
// it: corral ends, whether the signal finds it reading its options or
// already refusing them. It used to block in open(2), the signal caught
// and held for a runner that never came.
func TestSettingsFIFOAndSignal(t *testing.T) {
	t.Parallel()
	e := settingsEnv(t)
	fifo := e.file("fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	r := e.start(e.args([]string{"--settings", fifo}, []string{"/bin/true"}))
	// Sent before corral registers it (at the start of the Go runtime),
	// SIGTERM would kill it by default and show nothing: wait until it
	// is blocked in the FIFO's open, as it was, or has exited.
	deadline := time.Now().Add(readyTimeout)
	for !r.exited() && !inFIFOOpen(r.cmd.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatalf("corral neither exited nor blocked opening the FIFO within %v: %s", readyTimeout, r.partial())
		}
		time.Sleep(time.Millisecond)
	}
	if !r.exited() {
		r.signal(syscall.SIGTERM)
	}
	res := r.wait(settingsBound)
	wantNoTrace(t, res)
	if res.code != 2 && res.code != 128+int(syscall.SIGTERM) {
		t.Fatalf("want exit status 2 (the FIFO refused) or 143 (the signal): %v", res)
	}
}

// inFIFOOpen reports whether a thread of process pid waits in the open
// of a FIFO for the other end (its wchan).
func inFIFOOpen(pid int) bool {
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	for _, task := range tasks {
		wchan, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/wchan")
		if w := string(wchan); w == "wait_for_partner" || w == "fifo_open" {
			return true
		}
	}
	return false
}

// A settings file beneath a --writable path (README's "writable": ["."])
// is named in a warning on stderr, once; the run goes on.
func TestSettingsBeneathWritable(t *testing.T) {
	t.Parallel()
	e := settingsEnv(t)
	settings := e.file("settings.json")
	e.writeFile(settings, `{"writable": ["."]}`, 0o644)
	res := e.runLimited(settingsAS, []string{"--settings", settings}, []string{"/bin/sh", "-c", "exit 7"})
	wantNoTrace(t, res)
	wantCode(t, res, 7)
	want := "corral: warning: --settings " + settings + " lies beneath the writable path " + e.dir + ":"
	if strings.Count(res.stderr, want) != 1 || strings.Count(res.stderr, "warning: --settings") != 1 {
		t.Errorf("want the warning %q once: %v", want, res)
	}
}

// --timeout is a finite number above 0 and at most 31536000: 1e400,
// which parses to +Inf, and a second past a year are usage errors.
func TestTimeoutOutOfRange(t *testing.T) {
	t.Parallel()
	e := settingsEnv(t)
	for _, v := range []string{"1e400", "31536001"} {
		t.Run(v, func(t *testing.T) {
			wantUsage(t, e.sub(t).runLimited(settingsAS, []string{"--timeout", v}, []string{"/bin/true"}), `--timeout: invalid value "`+v+`"`, "at most 31536000")
		})
	}
}
