package reaper

import "github.com/corral-sh/corral/internal/setuperr"

// SetupError is a failure of corral's own setup, not of the runner: exit
// status 125 (exitstatus.Setup). It is the module's one setup error type:
// the engine returns it, package sandbox builds its boundary failures with
// it, and a failure in a re-executed stage decodes back into it with its
// errno intact, so errors.Is(err, unix.EPERM) holds on either side of the
// pipe.
type SetupError struct {
	Step string // what corral was doing, e.g. "mount proc on /proc"
	Err  error
	Hint string // the usual cause and the fix, when known
}

// Error is the step, the cause with its errno name (e.g. "operation not
// permitted (EPERM)", so that a user can search for it), and the hint.
func (e *SetupError) Error() string {
	msg := e.Step + ": " + setuperr.Describe(e.Err)
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

func (e *SetupError) Unwrap() error { return e.Err }
