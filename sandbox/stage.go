package sandbox

import (
	"os"

	"github.com/corral-sh/corral/internal/exitstatus"
	"github.com/corral-sh/corral/sandbox/internal/pidinit"
	"github.com/corral-sh/corral/sandbox/internal/plan"
	"github.com/corral-sh/corral/sandbox/internal/probe"
	"github.com/corral-sh/corral/sandbox/internal/runner"
	"github.com/corral-sh/corral/sandbox/internal/stage"
	"github.com/corral-sh/corral/sandbox/internal/supervise"
)

// RunStage is the one entry point of every stage: when this process is
// one of the copies corral starts of itself (argv[0] names the role,
// argv[1] is the stage socket's number), it runs that role and never
// returns; in any other process it returns at once. main calls it first,
// before anything else would touch the process's state.
//
// Here, and in Launch, the roles are put together: no role package imports
// another, so each process is handed the other roles' parts it runs.
func RunStage() {
	switch stage.Current() {
	case stage.InitArg0:
		pidinit.Main(newEngine)
	case stage.ExecArg0:
		runner.ExecMain()
	case stage.ProbeArg0:
		probe.ChildMain(pidinit.SetupNamespaces)
	default:
		return
	}
	os.Exit(exitstatus.Setup) // not reached: each role exits or execs
}

// newEngine is the init's engine: package supervise's, starting the runner
// with package runner's.
func newEngine(p *stage.Proc, plan *plan.Plan, cgroupOwner int, refused func(stage.Refused), relay stage.Relay) stage.Engine {
	e := supervise.New(p, plan, cgroupOwner, runner.Prepare, refused)
	if relay != nil {
		e.SetEgress(supervise.Egress{Relay: relay})
	}
	return e
}
