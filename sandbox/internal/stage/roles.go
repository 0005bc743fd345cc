package stage

import (
	"net/netip"
	"syscall"

	"github.com/corral-sh/corral/reaper"
	"github.com/corral-sh/corral/sandbox/internal/plan"
)

// The contracts by which one role's code runs in another role's process.
// No role package imports another: package sandbox, which alone imports
// them all, hands each process the parts it runs (the engine's process
// starts the runner with package runner's Starter; the init runs package
// supervise's Engine), as rootlesskit's cmd wires its pkg/parent and
// pkg/child.

// Cgroup is the run's cgroup as the engine's process holds it, for the
// runner's start.
type Cgroup interface {
	// FD is the descriptor the runner starts into (clone3's
	// CLONE_INTO_CGROUP); -1: none.
	FD() int
	// Refused gives the cgroup up: the kernel refused to start the runner
	// into it (err), and a start outside worked.
	Refused(err error)
}

// Starter starts the runner for the engine: package runner's.
type Starter interface {
	// Start starts the runner into cg. Its first instruction comes after
	// every signal is registered (reaper.Config.StartHolds).
	Start(cg Cgroup) (Started, error)
}

// Started is the runner the Starter started.
type Started struct {
	PID int
	// Listener is the runner's seccomp listener, for the engine's checker
	// of its socket calls (plan.Privileges.Notify); -1: none.
	Listener int
}

// PrepareRunner makes the Starter of a run, as early as the engine's
// process knows it will start the runner, so that whatever it prepares
// (the starter thread drops the runner's privileges) overlaps the rest of
// the setup: package runner's Prepare.
type PrepareRunner func(p *Proc, plan *plan.Plan, terminal bool) Starter

// Engine is the reaper engine of one run with the runner's cgroup, in the
// process that calls it: package supervise's.
type Engine interface {
	// Prepare starts the runner's preparation (PrepareRunner).
	Prepare(terminal bool)
	// Run runs the engine until the tree is gone and returns the status
	// corral exits with.
	Run(jobs reaper.JobControl, ownsNamespace bool) (int, error)
	// Abandon ends a run whose setup failed before Run.
	Abandon()
}

// NewEngine makes the Engine of a run; cgroupOwner names its cgroup (0:
// this process). refused is told each socket call the engine's checker
// refuses: the host side names them (in pidns mode the init passes them
// on over its link). relay, when not nil, is where the checker sends a
// TCP connect off the sandbox's loopback (the init's, under --allow-net).
type NewEngine func(p *Proc, plan *plan.Plan, cgroupOwner int, refused func(Refused), relay Relay) Engine

// Relay is a namespace mode's way out for the runner's TCP connects that
// leave the sandbox's loopback (under --allow-net): the init's listener
// inside, which the host side serves, told each connection's destination
// before its first byte. The engine's checker (package sockcheck) uses it.
type Relay interface {
	// Addrs are the relay's listening addresses inside (IPv4, IPv6); an
	// invalid one: none of that family.
	Addrs() (v4, v6 netip.AddrPort)
	// Local reports whether a is reached inside the namespace itself
	// (loopback, the nameservers' addresses corral answers on), not
	// through the relay.
	Local(a netip.Addr) bool
	// Route asks the host side to decide a connect to dst that the
	// checker will make to the relay from src and, when it is allowed, to
	// dial dst and relay the connection that comes from src to it. It
	// reports whether the policy allows it and the dial's errno (0:
	// connected), which the runner's connect returns.
	Route(src, dst netip.AddrPort) (bool, syscall.Errno)
}
