package supervise

import (
	"github.com/corral-sh/corral/sandbox/internal/plan"
	"github.com/corral-sh/corral/sandbox/internal/sockcheck"
)

// writeDevices are the devices every filesystem rule keeps writable
// (internal/landlock's exceptions): the checker opens them for writing
// wherever the writable paths are. A trailing "/" covers what lies
// beneath.
var writeDevices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/pts/"}

// writePolicy is what the checker holds the runner's write-intent calls
// to (plan.Privileges.NotifyWrites); nil without them.
func writePolicy(run *plan.Plan) *sockcheck.WritePolicy {
	pv := run.Privileges
	if !pv.NotifyWrites {
		return nil
	}
	return &sockcheck.WritePolicy{
		Writable:  pv.Protect.Writable,
		Protected: pv.Protect.Paths,
		Patterns:  pv.Protect.Patterns,
		Pinned:    pv.Protect.Pinned,
		Modules:   pv.Protect.Modules,
		Devices:   writeDevices,
	}
}
