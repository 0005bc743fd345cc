package reaper

import "github.com/corral-sh/corral/internal/setuperr"

// SetupError is a failure of corral's own setup, not of the runner: exit
// status 125. The engine returns it; it is the module's one setup error
// type, named here for a Go program that uses package reaper alone, which
// matches it with errors.As(err, &se) for a se *reaper.SetupError.
//
// Its fields: Step string, what corral was doing ("make a cgroup for the
// run"); Err error, the cause (Unwrap returns it); Hint string, the usual
// cause and the fix, when known. Error joins the three, the cause with
// its errno's name ("operation not permitted (EPERM)").
type SetupError = setuperr.SetupError
