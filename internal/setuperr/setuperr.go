// Package setuperr holds the module's one setup error type (SetupError:
// exit status 125), the one way corral renders an errno (Describe), used
// by it and by every message that names an errno, and the carrier of an
// error across a process boundary (Remote).
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

// SetupError is a failure of corral's own setup, not of the runner: exit
// status 125 (exitstatus.Setup). It is the module's one setup error type:
// the engine returns it (reaper.SetupError is this type), package sandbox
// builds its boundary failures with it (sandbox.SetupError), and a failure
// in a re-executed stage decodes back into it with its errno intact, so
// errors.Is(err, unix.EPERM) holds on either side of the pipe.
type SetupError struct {
	Step string // what corral was doing, e.g. "mount proc on /proc"
	Err  error
	Hint string // the usual cause and the fix, when known
}

// Error is the step, the cause with its errno name (e.g. "operation not
// permitted (EPERM)", so that a user can search for it), and the hint.
func (e *SetupError) Error() string {
	msg := e.Step + ": " + Describe(e.Err)
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

func (e *SetupError) Unwrap() error { return e.Err }

// Plain keeps a message whose errno is already named in it from
// being named twice by setuperr.Describe.
type Plain string

func (e Plain) Error() string { return string(e) }
