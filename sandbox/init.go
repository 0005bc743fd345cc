package sandbox

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// IsInit reports whether this process is a pidns init.
func IsInit() bool { return isStage(initArg0) }

// RunInit sets up the new namespaces and runs the engine as PID 1. It
// never returns.
func RunInit() {
	var start initStart
	link, err := openStage(msgInitStart, &start)
	if err != nil {
		link.fail(err)
		os.Exit(125)
	}
	o := start.Options
	callerMask = start.Mask
	o.Stderr = os.Stderr
	if err := setupNamespaces(&o); err != nil {
		link.fail(err)
		os.Exit(125)
	}
	// Closed before the engine starts anything: the runner must not hold it.
	if err := link.ready(); err != nil {
		fmt.Fprintf(os.Stderr, "corral: init: report ready: %v\n", err)
		os.Exit(125)
	}
	if o.Terminal {
		// Terminal mode: the runner's stops go to the host side on the
		// link (terminal.go); it is close-on-exec, so the runner does
		// not hold it either.
		o.jobs = initJobs{link: link}
	} else {
		link.Close()
	}
	status, err := runEngine(&o, true)
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
