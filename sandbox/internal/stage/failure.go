package stage

import (
	"errors"
	"syscall"

	"github.com/corral-sh/corral/internal/setuperr"
)

// Failure is one setup step that failed in a stage: a SetupError taken
// apart so that its errno crosses as a number.
type Failure struct {
	Step  string
	Errno uint64 // 0: the error carried none
	Text  string // the error as it printed in the stage
	Hint  string
}

// FailureOf takes err, a *setuperr.SetupError or any error, apart for the wire.
func FailureOf(err error) Failure {
	var s *setuperr.SetupError
	if !errors.As(err, &s) {
		s = &setuperr.SetupError{Step: "stage setup", Err: err}
	}
	f := Failure{Step: s.Step, Hint: s.Hint, Errno: uint64(setuperr.Errno(s.Err))}
	if s.Err != nil {
		f.Text = s.Err.Error()
	}
	return f
}

// SetupError rebuilds the stage's error on this side: it prints as it did
// there, and errors.Is(err, unix.EPERM) holds when it held there.
func (f Failure) SetupError() *setuperr.SetupError {
	return &setuperr.SetupError{Step: f.Step, Err: &setuperr.Remote{Text: f.Text, Errno: syscall.Errno(f.Errno)}, Hint: f.Hint}
}
