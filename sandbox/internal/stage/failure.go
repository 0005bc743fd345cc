package stage

import (
	"errors"
	"syscall"

	"github.com/corral-sh/corral/internal/setuperr"
	"github.com/corral-sh/corral/reaper"
)

// SetupError is a failure of corral's own setup: exit status 125. It is
// the module's one setup error type (the engine's too), so a failure in a
// re-executed stage decodes into the same type, errno included.
type SetupError = reaper.SetupError

// PlainError keeps a message whose errno is already named in it from
// being named twice by setuperr.Describe.
type PlainError string

func (e PlainError) Error() string { return string(e) }

// Failure is one setup step that failed in a stage: a SetupError taken
// apart so that its errno crosses as a number.
type Failure struct {
	Step  string
	Errno uint64 // 0: the error carried none
	Text  string // the error as it printed in the stage
	Hint  string
}

// FailureOf takes err, a *SetupError or any error, apart for the wire.
func FailureOf(err error) Failure {
	var s *SetupError
	if !errors.As(err, &s) {
		s = &SetupError{Step: "stage setup", Err: err}
	}
	f := Failure{Step: s.Step, Hint: s.Hint, Errno: uint64(setuperr.Errno(s.Err))}
	if s.Err != nil {
		f.Text = s.Err.Error()
	}
	return f
}

// SetupError rebuilds the stage's error on this side: it prints as it did
// there, and errors.Is(err, unix.EPERM) holds when it held there.
func (f Failure) SetupError() *SetupError {
	return &SetupError{Step: f.Step, Err: &setuperr.Remote{Text: f.Text, Errno: syscall.Errno(f.Errno)}, Hint: f.Hint}
}
