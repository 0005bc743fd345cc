package sandbox

import (
	"fmt"
	"os"

	"github.com/corral-sh/corral/reaper"
	"golang.org/x/sys/unix"
)

// runInit sets up the new namespaces and runs the engine as PID 1. It
// never returns.
func runInit() {
	// First: the host passes signals on as soon as this init says ready,
	// and a process inside the namespace may send any once the runner
	// runs. The registration goes on while the namespaces are set up, and
	// is complete before the init says so.
	sigs := reaper.CatchSignals()
	var start initStart
	link, err := openStage(msgInitStart, &start)
	if err != nil {
		link.fail(err)
		os.Exit(125)
	}
	o := start.Options
	callerMask = start.Mask
	o.Stderr = os.Stderr
	o.Signals = sigs
	// The starter thread drops the runner's privileges while the
	// namespaces are set up and the signals registered.
	o.prepareStart()
	o.startCgroup() // cgroup.go: beside the mounts
	if err := setupNamespaces(&o); err != nil {
		o.removeCgroup()
		link.fail(err)
		os.Exit(125)
	}
	// "ready" once every signal is registered: the host passes signals on
	// from then. The engine sets up and execs the runner meanwhile (held
	// until the same moment, see forkHeld), and this init never exits
	// before it said ready: the host takes an init that ends without
	// saying it for a namespace that could not be made.
	said := make(chan struct{})
	if o.Terminal {
		// Terminal mode: the runner's stops go to the host side on the
		// link (terminal.go), after "ready"; it is close-on-exec, so the
		// runner does not hold it.
		o.jobs = initJobs{link: link, said: said}
	}
	go func() {
		sigs.Wait()
		if err := link.ready(); err != nil {
			fmt.Fprintf(os.Stderr, "corral: init: report ready: %v\n", err)
		}
		if !o.Terminal {
			link.Close()
		}
		close(said)
	}()
	sigs.WaitUrgent() // before the engine's first write to stderr
	status, err := runEngine(&o, true)
	<-said
	if err != nil {
		fmt.Fprintf(os.Stderr, "corral: %v\n", err)
	}
	os.Exit(status)
}

// setupNamespaces does, inside the new namespaces, what only their PID 1
// can: a /proc that shows this PID namespace, loopback, the hostname.
func setupNamespaces(o *Options) *SetupError {
	// Our mounts must not propagate back to the caller's namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return &SetupError{Step: "make mounts private in the new mount namespace", Err: err}
	}
	// A /proc for this PID namespace that keeps the caller's restrictions.
	if err := mountProc(o); err != nil {
		return err
	}
	if o.Namespaces.Net {
		if err := loopbackUp(); err != nil {
			return &SetupError{Step: "bring up loopback in the new network namespace", Err: err}
		}
	}
	if o.Namespaces.Hostname != "" {
		if err := unix.Sethostname([]byte(o.Namespaces.Hostname)); err != nil {
			return &SetupError{Step: "set hostname in the new UTS namespace", Err: err}
		}
	}
	return nil
}
