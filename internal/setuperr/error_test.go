package setuperr

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

func TestErrorNamesStepErrnoAndHint(t *testing.T) {
	err := &SetupError{Step: "mount proc on /proc", Err: unix.EPERM, Hint: "unmask /proc"}
	if got, want := err.Error(), "mount proc on /proc: operation not permitted (EPERM); unmask /proc"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if !errors.Is(err, unix.EPERM) {
		t.Error("errors.Is(EPERM) is false")
	}
	wrapped := &SetupError{Step: "read capabilities", Err: &os.PathError{Op: "open", Path: "/proc/self/status", Err: unix.ENOENT}}
	if got, want := wrapped.Error(), "read capabilities: open /proc/self/status: no such file or directory (ENOENT)"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	plain := &SetupError{Step: "verify privileges", Err: errors.New("CapEff is 1, want 0")}
	if got, want := plain.Error(), "verify privileges: CapEff is 1, want 0"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
