package probe

import (
	"os"

	"github.com/corral-sh/corral/internal/exitstatus"
	"github.com/corral-sh/corral/internal/setuperr"
	"github.com/corral-sh/corral/reaper"
	"github.com/corral-sh/corral/sandbox/internal/plan"
	"github.com/corral-sh/corral/sandbox/internal/stage"
	"golang.org/x/sys/unix"
)

// ChildMain is the probe child: it tries one step and reports; it never
// returns. setupNamespaces is what the init does first (package pidinit's,
// handed in by package sandbox), for the "proc" step.
func ChildMain(setupNamespaces func(*stage.Proc, plan.Namespaces) *setuperr.SetupError) {
	reaper.CatchPipe()
	link, _, msg, err := stage.Open(stage.StepProbeStart)
	if err != nil {
		link.Fail(err)
		os.Exit(exitstatus.Setup)
	}
	var failed *setuperr.SetupError
	switch msg.(*stage.ProbeStart).Step {
	case "proc":
		failed = setupNamespaces(nil, plan.Namespaces{})
	case "hold": // diagnose.go
		holdProbe(link)
	case "subreaper":
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			failed = &setuperr.SetupError{Step: "prctl(PR_SET_CHILD_SUBREAPER)", Err: err}
		}
	}
	if failed != nil {
		link.Fail(failed)
		os.Exit(exitstatus.Setup)
	}
	if link.Ready() != nil {
		os.Exit(exitstatus.Setup)
	}
	os.Exit(0)
}

// holdProbe is the probe child's side of diagnoseUserns: say it is
// running, then wait to be killed.
func holdProbe(link *stage.Link) {
	_ = link.Ready()
	link.Close()
	// A blocking system call, not select{}: the runtime would call an
	// empty select a deadlock and crash.
	for {
		_ = unix.Pause()
	}
}
