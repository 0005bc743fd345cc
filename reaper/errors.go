package reaper

import "github.com/corral-sh/corral/internal/setuperr"

// SetupError is a failure of corral's own setup, not of the runner: exit
// status 125. The engine returns it; it is the module's one setup error
// type, named here for a Go program that uses package reaper alone.
type SetupError = setuperr.SetupError
