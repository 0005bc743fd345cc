package landlock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Landlock cannot be undone, so every real restriction happens in a child:
// the test binary re-executed with childEnv naming a scenario (and argsEnv
// holding its paths as JSON), which TestMain runs on a locked thread instead
// of the tests. A scenario reports through its exit status: 0 passed,
// exitMissing a kernel feature it needs is absent (the reason on stderr),
// anything else failed (the reasons on stderr).
const (
	childEnv    = "CORRAL_LANDLOCK_TEST_CHILD"
	argsEnv     = "CORRAL_LANDLOCK_TEST_ARGS"
	exitMissing = 3
)

var scenarios = map[string]func(c *child){}

func TestMain(m *testing.M) {
	if name := os.Getenv(childEnv); name != "" {
		runtime.LockOSThread()
		f, ok := scenarios[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "no scenario %q\n", name)
			os.Exit(2)
		}
		c := &child{}
		if err := json.Unmarshal([]byte(os.Getenv(argsEnv)), &c.args); err != nil {
			fmt.Fprintf(os.Stderr, "scenario arguments: %v\n", err)
			os.Exit(2)
		}
		f(c)
		os.Exit(c.exit())
	}
	os.Exit(m.Run())
}

type child struct {
	args     map[string]string
	failures []string
	missing  string
}

func (c *child) arg(name string) string {
	v, ok := c.args[name]
	if !ok {
		c.fatalf("scenario argument %q missing", name)
	}
	return v
}

func (c *child) errorf(format string, args ...any) {
	c.failures = append(c.failures, fmt.Sprintf(format, args...))
}

// fatalf records a failure and ends the scenario at once.
func (c *child) fatalf(format string, args ...any) {
	c.errorf(format, args...)
	os.Exit(c.exit())
}

func (c *child) missingFeature(format string, args ...any) {
	c.missing = fmt.Sprintf(format, args...)
	os.Exit(c.exit())
}

func (c *child) exit() int {
	if len(c.failures) > 0 {
		fmt.Fprintln(os.Stderr, strings.Join(c.failures, "\n"))
		return 1
	}
	if c.missing != "" {
		fmt.Fprintln(os.Stderr, c.missing)
		return exitMissing
	}
	return 0
}

// ok expects an operation to have worked.
func (c *child) ok(what string, err error) {
	if err != nil {
		c.errorf("%s: %v, want it to work", what, err)
	}
}

// denied expects an operation refused by Landlock: EACCES, or one of
// others the kernel uses for the same refusal (EXDEV for a rename
// Landlock will not let cross).
func (c *child) denied(what string, err error, also ...unix.Errno) {
	if errors.Is(err, unix.EACCES) {
		return
	}
	for _, e := range also {
		if errors.Is(err, e) {
			return
		}
	}
	c.errorf("%s: %v, want EACCES", what, err)
}

// missingFeature skips, except with CI=true, where a missing kernel feature
// is a failure: a green CI means the test ran.
func missingFeature(t *testing.T, reason string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: a missing feature is a failure)", reason)
	}
	t.Skip(reason)
}

func requireLandlock(t *testing.T, abi int) {
	t.Helper()
	have, err := ABI()
	if err != nil {
		missingFeature(t, err.Error())
	}
	if have < abi {
		missingFeature(t, fmt.Sprintf("Landlock ABI %d, the test needs %d", have, abi))
	}
}

// childCmd prepares scenario name in a re-executed test binary.
func childCmd(t *testing.T, name string, args map[string]string) *exec.Cmd {
	t.Helper()
	js, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+name, argsEnv+"="+string(js),
		// The race runtime otherwise sleeps a second before exiting.
		"GORACE=atexit_sleep_ms=0")
	return cmd
}

// runChild runs scenario name and turns its report into the test's result.
func runChild(t *testing.T, name string, args map[string]string, setup func(*exec.Cmd)) {
	t.Helper()
	cmd := childCmd(t, name, args)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if setup != nil {
		setup(cmd)
	}
	childResult(t, name, cmd.Run(), out.String())
}

func childResult(t *testing.T, name string, err error, out string) {
	t.Helper()
	report := strings.TrimSpace(out)
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == exitMissing {
		missingFeature(t, report)
		return
	}
	if err != nil {
		t.Fatalf("scenario %s: %v\n%s", name, err, report)
	}
}
