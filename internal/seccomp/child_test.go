package seccomp

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// A filter cannot be removed, so every real install happens in a child: the
// test binary re-executed with childEnv naming a scenario, which TestMain
// runs on a locked thread instead of the tests. A scenario reports through
// its exit status: 0 passed, exitMissing a kernel feature it needs is
// absent (the reason on stderr), anything else failed (the reasons on
// stderr).
const (
	childEnv    = "CORRAL_SECCOMP_TEST_CHILD"
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
		f(c)
		os.Exit(c.exit())
	}
	os.Exit(m.Run())
}

type child struct {
	failures []string
	missing  string
}

func (c *child) errorf(format string, args ...any) {
	c.failures = append(c.failures, fmt.Sprintf(format, args...))
}

// fatalf records a failure and ends the scenario at once.
func (c *child) fatalf(format string, args ...any) {
	c.errorf(format, args...)
	os.Exit(c.exit())
}

// missingFeature ends the scenario: the kernel lacks what it needs.
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

// missingFeature skips, except with CI=true, where a missing kernel feature
// is a failure: a green CI means the test ran.
func missingFeature(t *testing.T, reason string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: a missing feature is a failure)", reason)
	}
	t.Skip(reason)
}

// runChild runs scenario name in a re-executed test binary and turns its
// report into the test's result.
func runChild(t *testing.T, name string, setup func(*exec.Cmd)) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+name,
		// The race runtime otherwise sleeps a second before exiting.
		"GORACE=atexit_sleep_ms=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if setup != nil {
		setup(cmd)
	}
	err := cmd.Run()
	report := strings.TrimSpace(out.String())
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == exitMissing {
		missingFeature(t, report)
		return
	}
	if err != nil {
		t.Fatalf("scenario %s: %v\n%s", name, err, report)
	}
}
