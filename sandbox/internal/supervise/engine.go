// Package supervise runs the reaper engine for one run, in whichever
// process owns the runner's tree: the host side in subreaper mode, the
// init in pidns mode. It gives the engine its start of the runner (package
// runner's, handed in by package sandbox as a stage.PrepareRunner), the
// run's cgroup v2 (cgroup.go) and the state file, and moves this process
// out of the caller's working directory once the runner has it.
package supervise

import (
	"errors"
	"net/netip"
	"sync"

	"github.com/corral-sh/corral/internal/cgroup"
	"github.com/corral-sh/corral/internal/exitstatus"
	"github.com/corral-sh/corral/internal/setuperr"
	"github.com/corral-sh/corral/reaper"
	"github.com/corral-sh/corral/reaper/statefile"
	"github.com/corral-sh/corral/sandbox/internal/plan"
	"github.com/corral-sh/corral/sandbox/internal/sockcheck"
	"github.com/corral-sh/corral/sandbox/internal/stage"
	"golang.org/x/sys/unix"
)

// Engine is one run's engine, with what the engine's process holds for it.
type Engine struct {
	p       *stage.Proc
	plan    *plan.Plan
	owner   int // the pid the cgroup is named after; 0: this process
	prepare stage.PrepareRunner
	starter stage.Starter // made by Prepare
	refused func(stage.Refused)
	// egress is what the checker asks of the host side's egress policy
	// in subreaper mode (SetEgress).
	egress Egress

	// checker checks the runner's socket calls (sockcheck.go), made by
	// Prepare when the plan asks for it; checkErr is why it could not be.
	checker  *sockcheck.Checker
	checkErr error

	// cgroup is the run's cgroup v2, made by openCgroup; nil where none
	// can be used. It is read only after cgroupOnce (decideCgroup,
	// awaitCgroup).
	cgroup     *cgroup.Cgroup
	cgroupOnce sync.Once
	note       string // what -v says of it (sayCgroup); written inside cgroupOnce
	warn       bool   // note is said whatever -v says
	// refusedPath is the cgroup given up when the runner's start into
	// it was refused (Refused), for -v lines.
	refusedPath string
}

// New makes the engine of a run. cgroupOwner is the pid the cgroup is
// named after (0: this process's); refused is told each socket call the
// checker refuses.
func New(p *stage.Proc, plan *plan.Plan, cgroupOwner int, prepare stage.PrepareRunner, refused func(stage.Refused)) *Engine {
	return &Engine{p: p, plan: plan, owner: cgroupOwner, prepare: prepare, refused: refused}
}

// Egress is what the checker asks of the host side's egress policy: in
// subreaper mode, where it runs in the process that holds it, Direct and
// the DNS responder; in pidns mode the init's Relay, which asks the host
// side over the stage link.
type Egress struct {
	// Direct decides a TCP connect past the proxy: one it allows is
	// made on the runner's own socket; nil refuses every one.
	Direct func(netip.AddrPort) bool
	// DNSTCP and DNSUDP are corral's DNS responder, where the runner's
	// connects to port 53 go (zero: none).
	DNSTCP, DNSUDP netip.AddrPort
	// Relay takes the runner's TCP connects off the sandbox's loopback
	// (pidns mode under --allow-net; nil: none).
	Relay sockcheck.Relay
}

// SetEgress gives the checker, made by Prepare, eg. Call it before
// Prepare.
func (e *Engine) SetEgress(eg Egress) { e.egress = eg }

// Prepare makes the runner's Starter and then the run's cgroup: the
// starter thread drops the runner's privileges while this goroutine makes
// the cgroup, and the rest of the setup goes on after.
func (e *Engine) Prepare(terminal bool) {
	if e.starter == nil {
		e.starter = e.prepare(e.p, e.plan, terminal)
	}
	if e.plan.Privileges.Checked() && e.checker == nil && e.checkErr == nil {
		e.checker, e.checkErr = openChecker(e.plan, e.refused, e.egress) // sockcheck.go
	}
	e.decideCgroup()
}

// Abandon removes the cgroup of a run whose setup failed before Run,
// quietly: -v never said it was made (sayCgroup), and after auto's
// fallback the engine that runs says its own.
func (e *Engine) Abandon() {
	e.awaitCgroup()
	if c := e.cgroup; c != nil {
		e.cgroup = nil
		if err := c.Remove(); err != nil {
			e.p.Warnf("cgroup: %v", err)
		}
	}
}

// Run runs the reaper engine in this process until the tree is gone.
// Prepare must have been called.
func (e *Engine) Run(jobs reaper.JobControl, ownsNamespace bool) (int, error) {
	defer e.removeCgroup() // whatever ends the run: setup failure, cancel, teardown
	if err := guardFromRunner(); err != nil {
		return exitstatus.Setup, err
	}
	if e.checkErr != nil {
		return exitstatus.Setup, e.checkErr
	}
	var state *statefile.Writer
	if e.plan.StatePath != "" {
		state = statefile.Open(e.plan.StatePath, e.p.Stderr)
		defer state.Close()
	}
	res, err := reaper.Run(reaper.Config{
		Start:         e.start,
		Grace:         e.plan.Grace,
		Poll:          e.plan.Poll,
		Timeout:       e.plan.Timeout,
		State:         stateWriter(state),
		Signals:       e.p.Signals(),
		StartHolds:    true,
		OwnsNamespace: ownsNamespace,
		OwnsProcess:   true,
		KillAll:       e.killAll(),
		Members:       e.members(),
		JobControl:    jobs,
		Stderr:        e.p.Stderr,
		Logf:          e.p.Log(),
	})
	if err != nil {
		// Out of descriptors while starting the runner (its fork's
		// pipe, the exec stage's socket): the same fix as anywhere.
		var se *setuperr.SetupError
		if errors.As(err, &se) && se.Hint == "" && errors.Is(se.Err, unix.EMFILE) {
			se.Hint = stage.NoFileHint()
		}
		return exitstatus.Setup, err
	}
	return res.ExitCode, nil
}

// start is the engine's Config.Start. Once the runner has its working
// directory, this process leaves the caller's: a run must not pin the
// caller's mount (a tmpfs the caller was in can be unmounted once the
// runner has left it). Nothing of the engine's resolves a path relative
// to it afterwards; the state file's directory is held open from Run's
// start.
func (e *Engine) start() (int, error) {
	e.sayCgroup() // cgroup.go
	started, err := e.starter.Start(e)
	e.serveChecker(started.Listener) // sockcheck.go
	_ = unix.Chdir("/")
	return started.PID, err
}

// guardFromRunner makes this process non-dumpable before the runner
// exists, so that the runner cannot attach to it, open its memory or read
// it (ptrace, /proc/PID/mem, process_vm_readv) without CAP_SYS_PTRACE,
// which it never has. The kernel would otherwise allow all three to a
// process with the same uid whose target thread holds no capability the
// runner lacks, and this process always has such a thread: the starter
// (package runner) dropped every capability to fork the runner, and
// stays; as an unprivileged user, every thread is one. Through it, the
// runner could write into the memory every other thread runs from, and
// so act with corral's privileges and outside its own seccomp filter and
// Landlock domain. The flag belongs to the address space, which the
// runner's execve replaces: the runner itself is dumpable as usual. Its
// cost: this process's /proc files belong to root, as those of a setuid
// program do, and a debugger needs CAP_SYS_PTRACE to attach to corral.
func guardFromRunner() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return &setuperr.SetupError{Step: "keep the runner from tracing corral (prctl PR_SET_DUMPABLE 0)", Err: err}
	}
	return nil
}

// stateWriter is w as the engine's StateWriter: nil when there is no state
// file, so that the engine, seeing no writer, keeps no timer.
func stateWriter(w *statefile.Writer) reaper.StateWriter {
	if w == nil {
		return nil
	}
	return w
}
