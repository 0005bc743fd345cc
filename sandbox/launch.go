package sandbox

import (
	"errors"
	"fmt"
	"os"

	"github.com/corral-sh/corral/reaper/statefile"
	"github.com/corral-sh/corral/reaper"
)

// Launch runs the runner contained as o asks and returns the status corral
// exits with. A *SetupError means corral's own setup failed (status 125).
func Launch(o Options) (int, error) {
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if err := o.startPolicy(); err != nil { // policy.go
		return 125, err
	}
	switch o.Mode {
	case ModeSubreaper:
		if o.Namespaces.any() {
			return 125, &SetupError{Step: "subreaper mode", Err: errors.New("namespaces were requested (--net, --config linux.namespaces or hostname)"),
				Hint: "only pidns mode can create them: use --mode pidns or --mode auto"}
		}
		return runSubreaper(&o, "")
	case ModePidns:
		status, err := runPidns(&o)
		return status, err
	default:
		status, err := runPidns(&o)
		var unavailable *unavailableError
		if !errors.As(err, &unavailable) {
			return status, err
		}
		if o.Namespaces.any() {
			// Only a namespace can honour the request: no fallback.
			return 125, unavailable.SetupError
		}
		return runSubreaper(&o, "pidns unavailable: "+unavailable.SetupError.Error())
	}
}

// unavailableError says pidns mode could not be set up and nothing of the
// runner has started, so falling back loses nothing.
type unavailableError struct{ *SetupError }

// Unwrap makes the SetupError itself, not only its cause, visible to
// errors.As.
func (u *unavailableError) Unwrap() error { return u.SetupError }

func (o *Options) logf(format string, a ...any) {
	if o.Verbose {
		o.signals().WaitUrgent() // a closed stderr must not kill corral
		fmt.Fprintf(o.Stderr, "corral: "+format+"\n", a...)
	}
}

// runEngine runs the reaper engine in this process.
func runEngine(o *Options, ownsNamespace bool) (int, error) {
	o.prepareStart()
	// After the start is prepared, so that the starter thread drops the
	// runner's privileges meanwhile; before the engine, which never sees
	// a runner outside it.
	o.startCgroup()        // cgroup.go; already under way where the caller started it
	defer o.removeCgroup() // whatever ends the run: setup failure, cancel, teardown
	var state *statefile.Writer
	if o.StatePath != "" {
		state = statefile.Open(o.StatePath, o.Stderr)
		defer state.Close()
	}
	var logf func(string, ...any)
	if o.Verbose {
		logf = o.logf
	}
	res, err := reaper.Run(reaper.Config{
		Start:         func() (int, error) { return startRunner(o) },
		Grace:         o.Grace,
		Poll:          o.Poll,
		Timeout:       o.Timeout,
		State:         stateWriter(state),
		Signals:       o.signals(),
		StartHolds:    true,
		OwnsNamespace: ownsNamespace,
		OwnsProcess:   true,
		KillAll:       o.killAll(),
		JobControl:    o.jobs,
		Stderr:        o.Stderr,
		Logf:          logf,
	})
	if err != nil {
		return 125, err
	}
	return res.ExitCode, nil
}

func runSubreaper(o *Options, why string) (int, error) {
	if why == "" {
		why = "as asked"
	}
	if os.Getpid() == 1 {
		why += "; corral is PID 1 and reaps its namespace"
	}
	o.startCgroup() // cgroup.go: beside the rest of the setup
	o.logf("mode subreaper: %s", why)
	o.Terminal, o.jobs = false, nil
	if t := openTerminal(o); t != nil { // terminal mode (terminal.go)
		defer t.restore()
		o.Terminal, o.jobs = true, t
	}
	return runEngine(o, false)
}
