package setuperr

import (
	"errors"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

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
