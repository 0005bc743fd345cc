package sandbox

import (
	"errors"
	"os"

	"github.com/corral-sh/corral/internal/exitstatus"
	"github.com/corral-sh/corral/internal/proc"
	"github.com/corral-sh/corral/reaper"
	"github.com/corral-sh/corral/sandbox/internal/probe"
	"github.com/corral-sh/corral/sandbox/internal/runner"
	"github.com/corral-sh/corral/sandbox/internal/stage"
	"github.com/corral-sh/corral/sandbox/internal/supervise"
)

// host is the host side of one run: the process Launch runs in.
type host struct {
	*stage.Proc
	plan   stage.Plan
	parent *ParentWatch
	net    *network // network.go
}

// Launch runs the runner contained as o asks and returns the status corral
// exits with. A *SetupError means corral's own setup failed (status 125).
func Launch(o Options) (int, error) {
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	plan, err := o.plan()
	if err != nil {
		return exitstatus.Setup, err
	}
	h := &host{Proc: stage.NewProc(o.Stderr, o.Verbose, stage.Inherited(), o.Signals), plan: plan, parent: o.Parent}
	if err := h.startPolicy(); err != nil { // policy.go
		return exitstatus.Setup, err
	}
	if h.net, err = openNetwork(h.Proc, &h.plan); err != nil {
		return exitstatus.Setup, err
	}
	// Every proxied connection and forward ends, and every listener is
	// gone, before corral exits.
	defer h.net.close()
	switch plan.Mode {
	case ModeSubreaper:
		return h.runSubreaper("")
	case ModePidns:
		return h.runPidns() // pidns.go
	default:
		status, err := h.runPidns()
		var unavailable *probe.UnavailableError
		if !errors.As(err, &unavailable) {
			return status, err
		}
		if plan.Namespaces.Any() {
			// Only a namespace can honour the request: no fallback.
			return exitstatus.Setup, unavailable.SetupError
		}
		return h.runSubreaper("pidns unavailable: " + unavailable.SetupError.Error())
	}
}

// runSubreaper runs the engine in this process: the host side is the
// engine's process, and the process the caller's shell waits on.
func (h *host) runSubreaper(why string) (int, error) {
	if why == "" {
		why = "as asked"
	}
	if proc.PID1() {
		why += "; corral is PID 1 and reaps its namespace"
	}
	plan, network, err := h.net.forSubreaper(h.plan) // network.go
	if err != nil {
		return exitstatus.Setup, err
	}
	engine := supervise.New(h.Proc, &plan, 0, runner.Prepare) // its cgroup is made in Prepare
	h.Logf("mode subreaper: %s", why)
	if network != "" {
		h.Logf("network: %s", network)
	}
	var jobs reaper.JobControl
	term := openTerminal(h.Proc) // terminal mode (terminal.go)
	if term != nil {
		defer term.restore()
		jobs = term
	}
	engine.Prepare(term != nil)
	return engine.Run(jobs, false)
}
