package supervise

import (
	"path/filepath"

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
	writable := pv.Protect.Writable
	if pv.ReportFS {
		// Namespace modes: what the mounts leave writable, --overlay's
		// folders included; everything under --hide alone.
		writable = canonical(pv.Landlock.Writable)
		if len(writable) == 0 && !pv.Landlock.ReadOnly {
			writable = []string{"/"}
		}
	}
	return &sockcheck.WritePolicy{
		Writable:  writable,
		Protected: pv.Protect.Paths,
		Patterns:  pv.Protect.Patterns,
		Pinned:    pv.Protect.Pinned,
		Modules:   pv.Protect.Modules,
		Devices:   writeDevices,
	}
}

// canonical is paths with their symlinks followed, as the kernel names a
// resolved file (the checker compares those); one that does not resolve
// stays as given.
func canonical(paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		out = append(out, filepath.Clean(p))
	}
	return out
}
