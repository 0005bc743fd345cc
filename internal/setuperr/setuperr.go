// Package setuperr is the one error type for a failure of corral's own
// setup (exit status 125), and the one way corral renders an errno, shared
// by the engine (package reaper) and the boundary (package sandbox).
//
// A setup failure may happen in another process (the pidns init, the exec
// stage): Remote rebuilds it on the parent's side with its errno intact, so
// errors.Is(err, unix.EPERM) means the same on both sides of the pipe.
package setuperr

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// Error is a failure of corral's own setup.
type Error struct {
	Step string // what corral was doing, e.g. "mount proc on /proc"
	Err  error
	Hint string // the usual cause and the fix, when known
}

func (e *Error) Error() string {
	msg := e.Step + ": " + Describe(e.Err)
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

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
