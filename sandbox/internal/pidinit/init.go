// Package pidinit is PID 1 of the new PID namespace in pidns mode (argv[0]
// "corral [init]"): it makes its mounts private, mounts a /proc for the
// namespace that keeps every restriction of the caller's
// (procmount.go), brings up loopback in a new network namespace, sets the
// hostname, then runs the reaper engine as PID 1, reporting the runner's
// job stops to the host side in terminal mode (jobs.go).
package pidinit

import (
	"fmt"
	"os"

	"github.com/corral-sh/corral/internal/exitstatus"
	"github.com/corral-sh/corral/internal/setuperr"
	"github.com/corral-sh/corral/reaper"
	"github.com/corral-sh/corral/sandbox/internal/plan"
	"github.com/corral-sh/corral/sandbox/internal/stage"
	"golang.org/x/sys/unix"
)

// Main sets up the new namespaces and runs the engine (newEngine: package
// supervise's, handed in by package sandbox) as PID 1. It never returns.
func Main(newEngine stage.NewEngine) {
	// First: the host passes signals on as soon as this init says ready,
	// and a process inside the namespace may send any once the runner
	// runs. The registration goes on while the namespaces are set up, and
	// is complete before the init says so. The host cloned this init with
	// the later signals blocked: they wait in the kernel from its first
	// instruction and are read from a signalfd, with no registration.
	sigs := reaper.CatchBlockedSignals()
	link, caller, msg, err := stage.Open(stage.StepInitStart)
	if err != nil {
		link.Fail(err)
		os.Exit(exitstatus.Setup)
	}
	start := msg.(*stage.InitStart)
	caller.Mask = start.Mask // the caller's, as the host side read it
	plan := start.Plan
	p := stage.NewProc(os.Stderr, plan.Verbose, caller, sigs)
	// Prepare makes the cgroup while the starter thread drops the
	// runner's privileges; the mounts come after.
	// The host side names what the engine's checker refuses (sockcheck),
	// over the link after ready: the host reads only its reply before.
	said := make(chan struct{})
	refused := func(r stage.Refused) {
		<-said
		_ = link.Send(stage.MsgRefused, &r)
	}
	// The runner's TCP connects off loopback go to corral's relay
	// (egress.go), under --allow-net.
	rl := newRelay(link, plan.Net, said)
	var engineRelay stage.Relay
	if rl != nil {
		engineRelay = rl
	}
	engine := newEngine(p, &plan, start.CgroupOwner, refused, engineRelay)
	engine.Prepare(start.Terminal)
	if err := SetupNamespaces(p, plan.Namespaces); err != nil {
		engine.Abandon()
		link.Fail(err)
		os.Exit(exitstatus.Setup)
	}
	// The host's words, before the engine's lines.
	p.Logf("%s", start.ModeLine)
	// The proxy's and the --host-port listeners, before ready (network.go).
	if err := sendListeners(link, plan.Net, rl); err != nil {
		engine.Abandon()
		link.Fail(err)
		os.Exit(exitstatus.Setup)
	}
	var pub *publisher // --publish (network.go)
	if len(plan.Net.Publish) > 0 {
		var perr *setuperr.SetupError
		if pub, perr = openPublisher(link, plan.Net.Publish); perr != nil {
			engine.Abandon()
			link.Fail(perr)
			os.Exit(exitstatus.Setup)
		}
	}
	sayReady(link, sigs, start.Terminal || pub != nil || plan.Privileges.Checked(), said)
	if pub != nil {
		go func() {
			<-said
			pub.serve()
		}()
	} else if rl != nil {
		go func() {
			<-said
			followReplies(link) // the answers to the relay's routes
		}()
	}
	var jobs reaper.JobControl
	if start.Terminal {
		// Terminal mode: the runner's stops go to the host side on the
		// link, after "ready"; it is close-on-exec, so the runner does not
		// hold it.
		jobs = initJobs{link: link, said: said}
	}
	sigs.WaitUrgent() // before the engine's first write to stderr
	status, err := engine.Run(jobs, true)
	<-said
	if err != nil {
		fmt.Fprintf(os.Stderr, "corral: %v\n", err)
	}
	os.Exit(status)
}

// sayReady says "ready" once every signal is registered: the host passes
// signals on from then. The engine sets up and execs the runner meanwhile
// (held until the same moment, see package runner), and this init never
// exits before it said ready: the host takes an init that ends without
// saying it for a namespace that could not be made. said is closed once
// it is said.
func sayReady(link *stage.Link, sigs *reaper.Signals, keep bool, said chan<- struct{}) {
	go func() {
		sigs.Wait()
		if err := link.Ready(); err != nil {
			fmt.Fprintf(os.Stderr, "corral: init: report ready: %v\n", err)
		}
		if !keep {
			link.Close()
		}
		close(said)
	}()
}

// SetupNamespaces does, inside the new namespaces, what only their PID 1
// can: a /proc that shows this PID namespace, loopback, the hostname. p
// nil: nothing is logged (the probe child tries it).
func SetupNamespaces(p *stage.Proc, ns plan.Namespaces) *setuperr.SetupError {
	// Our mounts must not propagate back to the caller's namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return &setuperr.SetupError{Step: "make mounts private in the new mount namespace", Err: err}
	}
	// A /proc for this PID namespace that keeps the caller's restrictions.
	if err := mountProc(p); err != nil {
		return err
	}
	if ns.Net {
		if err := loopbackUp(); err != nil {
			return &setuperr.SetupError{Step: "bring up loopback in the new network namespace", Err: err}
		}
	}
	if ns.Hostname != "" {
		if err := unix.Sethostname([]byte(ns.Hostname)); err != nil {
			return &setuperr.SetupError{Step: "set hostname in the new UTS namespace", Err: err}
		}
	}
	return nil
}
