package setuperr

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

func TestErrorNamesStepErrnoAndHint(t *testing.T) {
	err := &Error{Step: "mount proc on /proc", Err: unix.EPERM, Hint: "unmask /proc"}
	if got, want := err.Error(), "mount proc on /proc: operation not permitted (EPERM); unmask /proc"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if !errors.Is(err, unix.EPERM) {
		t.Error("errors.Is(EPERM) is false")
	}
	wrapped := &Error{Step: "read capabilities", Err: &os.PathError{Op: "open", Path: "/proc/self/status", Err: unix.ENOENT}}
	if got, want := wrapped.Error(), "read capabilities: open /proc/self/status: no such file or directory (ENOENT)"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	plain := &Error{Step: "verify privileges", Err: errors.New("CapEff is 1, want 0")}
	if got, want := plain.Error(), "verify privileges: CapEff is 1, want 0"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// A rebuilt error prints what the original printed and still matches its errno.
func TestRemoteKeepsTextAndErrno(t *testing.T) {
	orig := fmt.Errorf("open /x: %w", unix.EACCES)
	remote := &Remote{Text: orig.Error(), Errno: Errno(orig)}
	if Describe(remote) != Describe(orig) {
		t.Errorf("remote %q, original %q", Describe(remote), Describe(orig))
	}
	if !errors.Is(remote, unix.EACCES) || errors.Is(remote, unix.EPERM) {
		t.Error("errors.Is does not follow the errno")
	}
	if errors.Unwrap(&Remote{Text: "no errno"}) != nil {
		t.Error("a remote error without errno unwraps to something")
	}
}
