package runner

import "github.com/corral-sh/corral/internal/proc"

// Functions only tests use, kept beside the package they test.

// parseStatus takes the numbers verifyPrivileges checks out of a status
// file: the Cap* sets (hex) and NoNewPrivs, each required, and TracerPid.
func parseStatus(text string) (threadStatus, error) {
	return statusNumbers(proc.ParseStatus(text))
}
