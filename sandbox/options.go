package sandbox

import (
	"io"

	"github.com/corral-sh/corral/internal/setuperr"
	"github.com/corral-sh/corral/reaper"
	"github.com/corral-sh/corral/sandbox/internal/egress"
	"github.com/corral-sh/corral/sandbox/internal/plan"
)

// Options are the caller's request for one contained run: the run's Plan,
// which every process of the run reads and the pidns init receives as it
// is, and what only the calling process holds.
type Options struct {
	Plan

	Stderr io.Writer

	// Signals is the process's signal registration (reaper.CatchSignals),
	// made at its start; nil: made when needed.
	Signals *reaper.Signals

	// Parent is corral's parent as found at corral's start (WatchParent),
	// for DieWithParent; nil: taken when Launch starts.
	Parent *ParentWatch

	// SettingsFiles are the settings files read for this run: beneath a
	// --writable path they are protected paths (protect.go).
	SettingsFiles []string
}

// Plan is one contained run: what the runner is, its privileges, its
// namespaces, its network and sandbox policy, the engine's timing. Check
// validates it; nothing changes it after.
type Plan = plan.Plan

// Mode is how the boundary is built.
type Mode = plan.Mode

const (
	ModeAuto      = plan.ModeAuto
	ModePidns     = plan.ModePidns
	ModeSubreaper = plan.ModeSubreaper
)

// Privileges are applied to the runner alone, on the thread it is forked or
// exec'd from.
type Privileges = plan.Privileges

// Namespaces beyond the PID and mount namespaces pidns mode always makes.
type Namespaces = plan.Namespaces

// Network is the network policy beyond --net none (Namespaces.Net):
// --allow-net, --host-port, --publish, --net-log.
type Network = plan.Network

// Rlimit is one resource limit for the runner.
type Rlimit = plan.Rlimit

// SetupError is a failure of corral's own setup: exit status 125. It is
// the module's one setup error type (the engine's too), so a failure in a
// re-executed stage decodes into the same type, errno included.
type SetupError = setuperr.SetupError

// UsageError is a request that contradicts itself: exit status 2. Flag
// names the option at fault.
type UsageError = plan.UsageError

// ParseMode accepts the names of the --mode flag.
func ParseMode(s string) (Mode, error) { return plan.ParseMode(s) }

// ParseCap accepts a capability name as in capabilities(7), with or
// without the CAP_ prefix, in any case: "NET_BIND_SERVICE",
// "cap_net_bind_service".
func ParseCap(name string) (int, error) { return plan.ParseCap(name) }

// CapName is the capabilities(7) name of c, e.g. CAP_NET_BIND_SERVICE.
func CapName(c int) string { return plan.CapName(c) }

// RlimitByName returns the resource number of a spec name like RLIMIT_NOFILE.
func RlimitByName(name string) (int, error) { return plan.RlimitByName(name) }

// ParseRlimit parses NAME=SOFT[:HARD]; a missing HARD equals SOFT, and
// "unlimited" (or "infinity") means no limit.
func ParseRlimit(s string) (Rlimit, error) { return plan.ParseRlimit(s) }

// WithRlimit returns list with rl in place of any limit on the same resource.
func WithRlimit(list []Rlimit, rl Rlimit) []Rlimit { return plan.WithRlimit(list, rl) }

// Check is the one validation of a request, before anything starts: a
// *UsageError naming the option for a request that contradicts itself or
// an --allow-net or --deny-net destination that does not parse, a
// *SetupError for namespaces asked of subreaper mode. Launch makes it too.
func (o *Options) Check() error {
	_, _, err := o.check()
	return err
}

// check is Check, and returns the allowlist and the deny rules it parsed:
// Launch parses them once.
func (o *Options) check() (allow, deny []egress.Rule, err error) {
	if err := o.Plan.Check(); err != nil {
		return nil, nil, err
	}
	for _, d := range o.Net.Allow {
		r, err := egress.ParseRule(d)
		if err != nil {
			return nil, nil, &UsageError{Flag: "--allow-net", Err: err}
		}
		allow = append(allow, r)
	}
	for _, d := range o.Net.Deny {
		r, err := egress.ParseDenyRule(d)
		if err != nil {
			return nil, nil, &UsageError{Flag: "--deny-net", Err: err}
		}
		deny = append(deny, r)
	}
	return allow, deny, nil
}
