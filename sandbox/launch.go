package sandbox

import (
	"errors"
	"os"

	"github.com/corral-sh/corral/internal/exitstatus"
	"github.com/corral-sh/corral/sandbox/internal/explain"
	"github.com/corral-sh/corral/sandbox/internal/stage"
)

// Launch runs the runner contained as o asks and returns the status corral
// exits with. A *UsageError means the request contradicts itself (status
// 2), a *SetupError that corral's own setup failed (status 125).
//
// One run, top to bottom: o is checked once (options.go); the sandbox
// policy's host part starts (policy.go); the network session opens
// (network.go) and derives, for each mode tried, the plan that mode's
// processes get; then the mode runs (pidns.go, subreaper.go).
func Launch(o Options) (int, error) {
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	rules, deny, err := o.check()
	var usage *UsageError
	if errors.As(err, &usage) {
		return exitstatus.Usage, err
	}
	if err != nil {
		return exitstatus.Setup, err
	}
	run := o.Plan
	if run.Mode == "" {
		run.Mode = ModeAuto
	}
	p := stage.NewProc(o.Stderr, run.Verbose, stage.Inherited(), o.Signals)
	// --overlay: the changes folder and its layers (overlay.go), counted
	// and named once the run is over, whatever its end.
	ov, err := prepareOverlay(&run, o.SettingsFiles)
	if err != nil {
		return exitstatus.Setup, err
	}
	defer ov.finish(o.Stderr)
	hideState(&run, ov)
	if err := startPolicy(p, &run, o.Parent); err != nil {
		return exitstatus.Setup, err
	}
	run = withProtection(run, o.SettingsFiles) // protect.go
	ov.grantWritable(&run)
	n, err := openNetwork(p, &run, rules, deny)
	if err != nil {
		return exitstatus.Setup, err
	}
	// Every proxied connection and forward ends, and every listener is
	// gone, before corral exits.
	defer n.close()
	// What the policy refused, once the run is over (summary.go).
	defer n.summarize()
	// Namespace modes hold the protected paths that exist as mounts;
	// what the run creates at an absent one is moved aside as it
	// appears, and once more at its end (protectwatch.go).
	absent := findAbsent(run.Privileges.Protect)
	pidns := func() (int, error) {
		watch := watchAbsent(p, absent)
		status, err := runPidns(p, n)
		watch.stop()
		var unavailable *explain.UnavailableError
		if !errors.As(err, &unavailable) {
			quarantine(p, absent)
		}
		return status, err
	}
	switch run.Mode {
	case ModeSubreaper:
		return runSubreaper(p, n, "as asked")
	case ModePidns:
		return pidns()
	}
	status, err := pidns()
	var unavailable *explain.UnavailableError
	if !errors.As(err, &unavailable) {
		return status, err
	}
	if run.Namespaces.Any() || len(run.Overlay) > 0 {
		// Only a namespace can honour the request: no fallback.
		return exitstatus.Setup, unavailable.SetupError
	}
	return runSubreaper(p, n, "pidns unavailable: "+unavailable.SetupError.Error())
}
