package supervise

import (
	"net/netip"

	"github.com/corral-sh/corral/internal/seccomp"
	"github.com/corral-sh/corral/internal/setuperr"
	"github.com/corral-sh/corral/sandbox/internal/plan"
	"github.com/corral-sh/corral/sandbox/internal/sockcheck"
	"github.com/corral-sh/corral/sandbox/internal/stage"
	"golang.org/x/sys/unix"
)

// The engine's checker of the runner's socket calls (plan.Privileges.
// Notify): made before the runner exists, so that its threads do too
// (DESIGN.md, Trap 14), and handed the runner's seccomp listener once the
// runner has started. Until it has it, the runner's checked calls wait.

// openChecker makes the run's checker, failing closed: where the kernel or
// an outer seccomp profile lacks what it needs, the run stops with 125
// naming it, and the runner never starts with a policy it cannot have.
func openChecker(run *plan.Plan, refused func(stage.Refused), eg Egress) (*sockcheck.Checker, error) {
	if missing := seccomp.ProbeNotify().NotifyMissing(); missing != "" {
		return nil, &setuperr.SetupError{Step: "check the runner's socket calls", Err: setuperr.Plain("not available here: " + missing),
			Hint: "the network policy, --allow-unix, --hide, and in subreaper mode --writable and --read-only need them (a container's seccomp profile may refuse them); corral does not run the command with more than asked"}
	}
	if missing := seccomp.AddfdSendMissing(); missing != "" && run.Privileges.NotifyWrites && !run.Privileges.ReportFS {
		return nil, &setuperr.SetupError{Step: "hold the protected paths beneath --writable (the runner's writes made by corral)", Err: setuperr.Plain("not available here: " + missing),
			Hint: "in pidns mode (--mode pidns, where user namespaces are allowed) the protected paths are read-only mounts and need nothing of seccomp; or run on Linux 5.14 or later"}
	}
	if namesOnly := run.Privileges.ReportFS && !run.Privileges.Notify; !namesOnly {
		// A checker that only names what the mounts refuse loses a name
		// without it; one that decides would fail the runner's calls.
		if missing := sockcheck.Openat2Missing(); missing != "" {
			return nil, &setuperr.SetupError{Step: "check the runner's calls", Err: setuperr.Plain("not available here: " + missing),
				Hint: "corral resolves with it each path a checked call names (a Unix socket's; in subreaper mode each write's and metadata change's); a container's seccomp profile written before it may refuse it: allow openat2 there; corral does not start a run whose checked calls would all fail"}
		}
	}
	pol := checkPolicy(run, refused)
	if run.Net.TCPChecked {
		pol.Direct, pol.DNSTCP, pol.DNSUDP = eg.Direct, eg.DNSTCP, eg.DNSUDP
	}
	if eg.Relay != nil {
		pol.Relay = eg.Relay
	}
	c, err := sockcheck.New(pol)
	if err != nil {
		return nil, &setuperr.SetupError{Step: "check the runner's socket calls", Err: err}
	}
	return c, nil
}

// checkPolicy is what the checker holds the runner's calls to, from the
// plan of the mode that runs.
func checkPolicy(run *plan.Plan, refused func(stage.Refused)) sockcheck.Policy {
	pol := sockcheck.Policy{
		Net:        run.Isolated(),
		TCP:        run.Net.TCPChecked,
		HostPorts:  run.Net.HostPorts,
		Publish:    run.Net.Publish,
		AllowUnix:  run.Net.AllowUnix,
		Hide:       run.Privileges.Landlock.Hide,
		IsolateIPC: run.IsolatesAbstract(),
		Metadata:   run.Privileges.NotifyMetadata,
		Writable:   run.Privileges.Landlock.Writable,
		ReportFS:   run.Privileges.ReportFS,
		Mounts:     run.Privileges.NotifyMounts,
		// Without a capability and under no_new_privs the runner's
		// tree cannot change its credentials: read them once.
		StaticCreds: len(run.Privileges.Keep) == 0 && !run.Privileges.AllowNewPrivs,
	}
	pol.Writes = writePolicy(run) // protect.go
	if run.Privileges.ReportFS && !run.Privileges.Notify {
		// Only calls the checker names and lets run, each answered at
		// once (no socket call, none that waits): one reader serves
		// them, and a notification costs less with one thread waiting
		// on the listener than with four (40,000 mkdir and open calls
		// in a loop on a 2-CPU VM: some 30 µs a call against 45 to 80).
		pol.Workers = 1
	}
	if run.Privileges.ReportFS && !run.Privileges.Landlock.ReadOnly && len(run.Privileges.Landlock.Writable) == 0 {
		// --hide alone: everything else stays writable.
		pol.Writable = []string{"/"}
	}
	if ap, err := netip.ParseAddrPort(run.Net.ProxyAddr); err == nil && run.Net.TCPChecked {
		pol.ProxyAddr = ap
	}
	if refused != nil {
		pol.Report = func(r sockcheck.Refusal) {
			m := stage.Refused{Call: r.Call, Kind: r.Kind, Path: r.Path, Direct: r.Direct, Reason: r.Reason}
			if r.Addr.IsValid() {
				m.Addr = r.Addr.String()
			}
			refused(m)
		}
	}
	return pol
}

// serveChecker hands the runner's listener to the checker; one the run
// did not ask for is closed.
func (e *Engine) serveChecker(listener int) {
	if listener < 0 {
		return
	}
	if e.checker == nil {
		unix.Close(listener)
		return
	}
	_ = e.checker.Serve(listener)
}
