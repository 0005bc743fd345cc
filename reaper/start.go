package reaper

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/corral-sh/corral/internal/exitstatus"
	"github.com/corral-sh/corral/internal/proc"
	"golang.org/x/sys/unix"
)

// Run starts the runner and supervises its tree until the tree is empty.
// The returned error is non-nil only when the engine itself could not work
// (a *SetupError); the runner's own failures are in Result.ExitCode.
func Run(cfg Config) (Result, error) {
	cfg = withDefaults(cfg)
	sig, release := registration(cfg)
	defer release()
	if cfg.OwnsProcess {
		tuneRuntime()
	}
	e := newEngine(cfg, sig)
	defer e.watch.end()
	if err := e.becomeSubreaper(); err != nil {
		return Result{ExitCode: exitstatus.Setup}, err
	}
	e.settleTeardown()
	defer e.closeOrphans()
	e.announceStarting()
	held := e.awaitRegistration()
	if s, ok := firstCancel(held); ok {
		return e.cancelledBeforeStart(s), nil
	}
	if err := e.startRunner(); err != nil {
		return Result{ExitCode: exitstatus.Setup}, err
	}
	defer e.stopDeadline()
	e.supervise(held)
	return e.result(), nil
}

// withDefaults fills what a caller may leave out.
func withDefaults(cfg Config) Config {
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	return cfg
}

// registration is the caller's signal registration, or one Run makes
// itself; release undoes the latter when Run returns unless OwnsProcess.
func registration(cfg Config) (sig *Signals, release func()) {
	if cfg.Signals != nil {
		return cfg.Signals, func() {}
	}
	sig = CatchSignals()
	if cfg.OwnsProcess {
		return sig, func() {}
	}
	return sig, sig.Stop
}

// tuneRuntime sets the GC target of a process that exists for this run.
// The engine's live heap is small (its accounting and one walk of the
// tree), but walks and ticks leave garbage, and at the default GOGC=100
// the heap doubles before each collection; VmHWM follows. GOGC=25 keeps a
// corral process near its working set and still scales with the tree (a
// fixed SetMemoryLimit of a few MiB makes the GC run back to back once a
// thousand children are live).
func tuneRuntime() {
	debug.SetGCPercent(25)
}

func newEngine(cfg Config, sig *Signals) *engine {
	e := &engine{
		cfg: cfg, sig: sig, self: os.Getpid(), phase: phaseStarting, acct: newAccounting(-1),
		blindSent: map[int]bool{}, signalled: map[procID]string{},
	}
	if cfg.JobControl != nil { // terminal mode (jobcontrol.go)
		e.jobs = &jobControl{JobControl: cfg.JobControl}
	}
	e.watch = newWatcher(cfg.JobControl != nil)
	e.timer = time.NewTimer(time.Hour)
	e.timer.Stop()
	return e
}

// becomeSubreaper makes orphans of the tree come back to the engine. As
// PID 1 the kernel already hands it every orphan of the namespace;
// elsewhere it must ask to be their reaper.
func (e *engine) becomeSubreaper() error {
	if e.self == 1 {
		return nil
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return &SetupError{Step: "become child subreaper (prctl PR_SET_CHILD_SUBREAPER)", Err: err}
	}
	return nil
}

// settleTeardown readies, before the runner exists, what the teardown
// must not need to ask the runner for: what it settles once is settled
// now, while descriptors are plentiful (the /proc reader, the children
// file of the leader thread), and the RLIMIT_NOFILE is remembered so that
// a runner lowering it with prlimit can be undone.
func (e *engine) settleTeardown() {
	_ = unix.Getrlimit(unix.RLIMIT_NOFILE, &e.nofile)
	proc.Prepare()
	if f, err := proc.OpenChildrenFile(e.self, e.self); err == nil {
		e.orphans = f
	}
}

func (e *engine) closeOrphans() {
	if e.orphans != nil {
		e.orphans.Close()
	}
	if e.forker != nil {
		e.forker.Close()
	}
}

// announceStarting writes the first state document. It waits for the
// urgent signals first: before the first write to stderr (the state
// writer's warning), and before deciding whether the run was cancelled.
func (e *engine) announceStarting() {
	e.sig.WaitUrgent()
	e.writeState()
}

// awaitRegistration waits until every signal is registered, and returns
// the signals that came before the runner exists. Every signal must be
// registered before the runner exists: one it sends to its parent first
// thing must not find the Go default. And the OS threads the Go runtime
// will need exist by then (see reserveThreads). With StartHolds, Start
// itself waits, overlapping the slow part of a start with it.
func (e *engine) awaitRegistration() []syscall.Signal {
	if !e.cfg.StartHolds {
		e.sig.Wait()
	}
	return e.sig.drain()
}

// firstCancel finds a cancel among the signals held before the start: it
// means the runner is never started; anything else is passed on once it
// exists.
func firstCancel(held []syscall.Signal) (syscall.Signal, bool) {
	for _, s := range held {
		if IsCancelling(s) {
			return s, true
		}
	}
	return 0, false
}

// cancelledBeforeStart ends a run whose runner never started.
func (e *engine) cancelledBeforeStart(s syscall.Signal) Result {
	e.cfg.Logf("received %s before the runner started: not starting it", unix.SignalName(s))
	e.termSignal = s
	e.acct.runnerReaped, e.acct.runnerExitCode = true, exitstatus.SignalBase+int(s)
	e.phase = next(e.phase, evCancel)
	e.writeState()
	return Result{ExitCode: exitstatus.SignalBase + int(s), TerminationSignal: s}
}

// startRunner calls Config.Start and records the runner, and starts the
// timeout's clock. An error is a *SetupError: nothing started, and the
// run is over.
func (e *engine) startRunner() error {
	pid, err := e.cfg.Start()
	if pid <= 0 {
		if err == nil {
			err = errors.New("runner start returned no pid")
		}
		e.acct.runnerReaped, e.acct.runnerExitCode = true, exitstatus.Setup
		e.phase = phaseExited
		e.writeState()
		return &SetupError{Step: "start the runner", Err: err}
	}
	if err != nil {
		// The runner exists but will exit by itself (Config.Start).
		fmt.Fprintf(e.cfg.Stderr, "corral: %v\n", err)
	}
	e.acct.runner = pid
	e.cfg.Logf("runner started as pid %d", pid)
	e.push(evStarted)
	e.startDeadline()
	return nil
}

// supervise passes on the signals held back during the start, catches
// up with any exit that came before, and runs the loop (loop.go) until
// the tree is empty.
func (e *engine) supervise(held []syscall.Signal) {
	for _, s := range held {
		e.onSignal(s)
	}
	e.reap()
	e.advance()
	e.loop()
}

func (e *engine) result() Result {
	return Result{ExitCode: e.exitCode(), TerminationSignal: e.termSignal, Escalated: e.escalated}
}
