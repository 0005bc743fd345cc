// Package setuperr is the one way corral renders an errno (Describe), used
// by the module's one setup error type (reaper.SetupError) and by every
// message that names an errno, and the carrier of an error across a
// process boundary (Remote).
//
// A setup failure may happen in another process (the pidns init, the exec
// stage): Remote rebuilds its cause on the parent's side with the errno
// intact, so errors.Is(err, unix.EPERM) means the same on both sides of
// the pipe.
package setuperr

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// Describe renders an error with its errno name, e.g.
// "operation not permitted (EPERM)", so a user can search for it.
func Describe(err error) string {
	if err == nil {
		return "<nil>"
	}
	if errno := Errno(err); errno != 0 {
		if name := unix.ErrnoName(errno); name != "" {
			return err.Error() + " (" + name + ")"
		}
	}
	return err.Error()
}

// Errno is the errno err wraps, or 0.
func Errno(err error) syscall.Errno {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return 0
}

// Remote is an error that happened in another process, rebuilt from its
// text and errno number: it prints as it did there, and unwraps to the
// errno so that errors.Is keeps working.
type Remote struct {
	Text  string
	Errno syscall.Errno // 0: none
}

func (e *Remote) Error() string { return e.Text }

func (e *Remote) Unwrap() error {
	if e.Errno == 0 {
		return nil
	}
	return e.Errno
}
