package reaper

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/corral-sh/corral/internal/proc"
	"github.com/corral-sh/corral/internal/statefile"
	"golang.org/x/sys/unix"
)

// Config is what the engine needs to run one runner.
type Config struct {
	// Start starts the runner as a child of the calling process and returns
	// its pid. It runs after the engine owns SIGCHLD, so no exit is missed,
	// and it must not wait for the child: the engine is the only waiter.
	// An error with pid > 0 means the runner process exists but will exit
	// by itself (an exec failure the exec stage reported); the error is
	// printed and the process reaped like any other. An error with pid <= 0
	// means nothing started.
	Start func() (pid int, err error)

	Grace time.Duration // from the first teardown signal to SIGKILL
	Poll  time.Duration // state refresh interval; the engine is idle otherwise

	State *statefile.Writer // nil: no state file

	// OwnsNamespace says the engine is PID 1 of a PID namespace made for
	// this run, so kill(-1) reaches exactly the runner's tree. Never set
	// it otherwise: in the caller's namespace kill(-1) reaches every
	// process of the user.
	OwnsNamespace bool

	// OwnsProcess says the process exists for this one run and exits as
	// soon as Run returns: the engine may then tune the Go runtime for its
	// job (GC target, one P once the tree is busy) and leaves its signal
	// handlers registered rather than pay a runtime round trip per signal
	// to remove them. A library caller sharing its process leaves it off.
	OwnsProcess bool

	// JobControl, when set, is terminal mode: the runner holds the
	// terminal's foreground in a process group of its own (jobcontrol.go).
	JobControl JobControl

	Stderr io.Writer                     // where the one-line runner errors go
	Logf   func(format string, a ...any) // -v diagnostics; nil: silent
}

// Result is the outcome of a run.
type Result struct {
	ExitCode          int
	TerminationSignal syscall.Signal // 0 when the runner simply exited
	Escalated         bool
}

type phase string

const (
	phaseStarting    phase = "starting"
	phaseRunning     phase = "running"
	phaseTerminating phase = "terminating"
	phaseKilling     phase = "killing" // reported as "terminating" in the state file
	phaseExited      phase = "exited"
)

// SetupError is a failure of the engine's own setup (exit status 125).
type SetupError struct {
	Step string // what the engine was doing
	Err  error
}

func (e *SetupError) Error() string {
	var errno syscall.Errno
	if errors.As(e.Err, &errno) && unix.ErrnoName(errno) != "" {
		return fmt.Sprintf("%s: %v (%s)", e.Step, e.Err, unix.ErrnoName(errno))
	}
	return e.Step + ": " + e.Err.Error()
}

func (e *SetupError) Unwrap() error { return e.Err }

type engine struct {
	cfg        Config
	self       int
	acct       *accounting
	phase      phase
	termSignal syscall.Signal
	escalated  bool
	noChildren bool // the last wait4 said ECHILD: the tree is empty
	oneP       bool // GOMAXPROCS is down to 1

	children <-chan os.Signal // SIGCHLD only; a buffer of one is enough, it is an edge
	signals  <-chan os.Signal // everything else the engine handles

	written *statefile.Document // last document on disk, to skip identical writes

	jobs *jobControl // terminal mode; nil otherwise
}

// Run starts the runner and supervises its tree until the tree is empty.
// The returned error is non-nil only when the engine itself could not work
// (a *SetupError); the runner's own failures are in Result.ExitCode.
func Run(cfg Config) (Result, error) {
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.OwnsProcess {
		// The engine's live heap is small (its accounting and one walk of
		// the tree), but walks and ticks leave garbage, and at the default
		// GOGC=100 the heap doubles before each collection; VmHWM follows.
		// GOGC=25 keeps a corral process near its working set and still
		// scales with the tree (a fixed SetMemoryLimit of a few MiB makes
		// the GC run back to back once a thousand children are live).
		debug.SetGCPercent(25)
	}
	children := make(chan os.Signal, 1)
	signals := make(chan os.Signal, 64)
	// Each signal costs the runtime a round trip to its signal thread, and
	// corral forwards some forty: register what the engine cannot miss now,
	// and the signals it merely forwards while the runner starts. Until
	// then the runtime drops those (their default for a Go program), as
	// it would before corral started at all.
	signal.Notify(children, unix.SIGCHLD)
	signal.Notify(signals, cancellingSignals()...)
	forwarding := make(chan struct{})
	go func() {
		signal.Notify(signals, forwardedSignals...)
		close(forwarding)
	}()
	defer func() {
		if cfg.OwnsProcess {
			// The process exits next: the registration may still be
			// under way (a round trip to the runtime's signal thread per
			// signal, about 1-2 ms in all), and a run that ends before it
			// must not wait for it.
			return
		}
		<-forwarding
		signal.Stop(children)
		signal.Stop(signals)
	}()

	e := &engine{cfg: cfg, self: os.Getpid(), phase: phaseStarting, children: children, signals: signals, acct: newAccounting(-1)}
	if cfg.JobControl != nil { // terminal mode (jobcontrol.go)
		e.jobs = &jobControl{JobControl: cfg.JobControl, forwarding: forwarding}
	}
	if e.self != 1 {
		// As PID 1 the kernel already hands us every orphan of the
		// namespace; elsewhere we must ask to be their reaper.
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return Result{ExitCode: 125}, &SetupError{Step: "become child subreaper (prctl PR_SET_CHILD_SUBREAPER)", Err: err}
		}
	}
	e.writeState()

	pid, err := cfg.Start()
	if pid <= 0 {
		if err == nil {
			err = errors.New("runner start returned no pid")
		}
		e.acct.runnerReaped, e.acct.runnerExitCode = true, 125
		e.phase = phaseExited
		e.writeState()
		return Result{ExitCode: 125}, &SetupError{Step: "start the runner", Err: err}
	}
	if err != nil {
		fmt.Fprintf(cfg.Stderr, "corral: %v\n", err)
	}
	e.acct.runner = pid
	e.phase = phaseRunning
	e.cfg.Logf("runner started as pid %d", pid)
	e.observe()
	e.writeState()

	e.supervise()
	e.teardown()

	e.phase = phaseExited
	e.observe()
	e.writeState()
	return Result{ExitCode: e.acct.runnerExitCode, TerminationSignal: e.termSignal, Escalated: e.escalated}, nil
}

// supervise runs until the runner has exited or a cancelling signal came.
func (e *engine) supervise() {
	tick := e.stateTicker()
	defer tick.Stop()
	e.reap()
	for !e.acct.runnerReaped && e.termSignal == 0 {
		select {
		case <-e.children:
			e.reap()
		case s := <-e.signals:
			e.handleSignal(s.(syscall.Signal))
		case <-tick.C:
			e.observe()
			e.writeState()
		}
	}
}

// handleSignal records and reports whether s was a cancelling signal;
// any other signal is forwarded to the runner alone.
func (e *engine) handleSignal(s syscall.Signal) bool {
	if cancelling[s] {
		if e.termSignal == 0 {
			e.termSignal = s
		}
		e.cfg.Logf("received %s", unix.SignalName(s))
		return true
	}
	if e.jobs != nil && e.jobSignal(s) { // terminal mode (jobcontrol.go)
		return false
	}
	if !e.acct.runnerReaped {
		// The runner is our unreaped child, so its pid cannot have been
		// reused: a plain kill is exact.
		if err := unix.Kill(e.acct.runner, s); err != nil && !errors.Is(err, unix.ESRCH) {
			e.cfg.Logf("forward %s to runner: %v", unix.SignalName(s), err)
		}
	}
	if StopSelfAfter(s) {
		_ = unix.Kill(e.self, unix.SIGSTOP)
	}
	return false
}

// teardown signals every remaining process, waits up to the grace period
// for the tree to empty, then kills until nothing is left.
func (e *engine) teardown() {
	e.phase = phaseTerminating
	e.observe()
	e.writeState()
	sig := e.termSignal
	if sig == 0 {
		sig = unix.SIGTERM
	}
	e.reap()
	if !e.noChildren {
		e.singleP()
	}
	n := e.signalTree(sig)
	e.cfg.Logf("teardown: %s to %s, grace %v", unix.SignalName(sig), processes(n), e.cfg.Grace)
	e.reap()

	tick := e.stateTicker()
	defer tick.Stop()
	grace := time.NewTimer(e.cfg.Grace)
	defer grace.Stop()
	waiting, cut := true, false
	for waiting && !e.noChildren {
		select {
		case <-e.children:
			e.reap()
		case s := <-e.signals:
			if e.handleSignal(s.(syscall.Signal)) {
				// Another cancel while we wait: the caller wants it over.
				waiting, cut = false, true
			}
		case <-grace.C:
			waiting = false
		case <-tick.C:
			e.observe()
			e.writeState()
		}
	}
	if e.noChildren {
		return
	}

	e.phase = phaseKilling
	e.writeState()
	// Processes forked after a round escape it, so kill, reap and scan
	// again until wait4 reports that nothing is left below us.
	rescan := time.NewTicker(10 * time.Millisecond)
	defer rescan.Stop()
	for !e.noChildren {
		if n := e.signalTree(unix.SIGKILL); n > 0 {
			if !e.escalated {
				why := "grace over"
				if cut {
					why = "second cancelling signal, grace cut short"
				}
				e.cfg.Logf("%s: SIGKILL to %s", why, processes(n))
			}
			e.escalated = true
		}
		e.reap()
		if e.noChildren {
			break
		}
		select {
		case <-e.children:
			e.reap()
		case s := <-e.signals:
			e.handleSignal(s.(syscall.Signal))
		case <-rescan.C:
		}
	}
}

// signalTree sends sig to every live process below the engine, with
// SIGCONT to stopped ones so they can act on it. It returns how many
// processes it found alive.
func (e *engine) signalTree(sig syscall.Signal) int {
	if e.cfg.OwnsNamespace && sig == unix.SIGKILL {
		var live []proc.Stat
		for _, st := range proc.Descendants(proc.System(), e.self) {
			if !st.Zombie() {
				live = append(live, st)
			}
		}
		if len(live) == 0 {
			return 0
		}
		// One syscall under the kernel's task list lock: nothing forked
		// in the namespace can slip between scan and kill.
		err := unix.Kill(-1, sig)
		if err == nil || errors.Is(err, unix.ESRCH) {
			return len(live)
		}
		e.cfg.Logf("kill(-1, %s): %v; signalling one by one", unix.SignalName(sig), err)
	}
	return proc.SignalDescendants(e.self, sig)
}

// singleP drops GOMAXPROCS to 1 once the tree is busy (an orphan reaped,
// or a teardown with processes left): the engine is then one goroutine
// answering SIGCHLD, and a second P only makes the runtime wake a
// spinning thread for each one, and run the GC beside the kernel's own
// work. Not before: a plain run (runner only) would pay the
// stop-the-world and the serialised start-up for nothing.
func (e *engine) singleP() {
	if e.cfg.OwnsProcess && !e.oneP {
		runtime.GOMAXPROCS(1)
		e.oneP = true
	}
}

// reap collects every child that has exited. SIGCHLD is an edge, not a
// count: one signal may stand for many exits, so loop until wait4 has
// nothing more. __WALL includes children that do not signal their exit.
func (e *engine) reap() {
	flags := unix.WNOHANG | unix.WALL
	if e.jobs != nil {
		flags |= unix.WUNTRACED // terminal mode: the runner's stops (jobcontrol.go)
	}
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, flags, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.ECHILD) {
			e.noChildren = true
			return
		}
		if err != nil || pid <= 0 {
			return
		}
		if ws.Stopped() { // only with WUNTRACED, in terminal mode
			if pid == e.acct.runner && !e.acct.runnerReaped {
				e.runnerStopped(ws.StopSignal())
			}
			continue
		}
		code := ExitCode(ws)
		if pid == e.acct.runner {
			e.cfg.Logf("runner exited: status %d", code)
		} else {
			e.singleP()
		}
		e.acct.reaped(pid, code)
	}
}

func (e *engine) observe() {
	if e.cfg.State == nil {
		return
	}
	kids, err := proc.ChildrenOf(e.self)
	if err != nil {
		e.cfg.Logf("scan children: %v", err)
		return
	}
	e.acct.observe(kids)
}

// stateTicker paces state refreshes. Without a state file nothing needs
// refreshing, and the engine sleeps until a signal arrives.
func (e *engine) stateTicker() *time.Ticker {
	if e.cfg.State == nil || e.cfg.Poll <= 0 {
		t := time.NewTicker(time.Hour)
		t.Stop()
		return t
	}
	return time.NewTicker(e.cfg.Poll)
}

func (e *engine) document() statefile.Document {
	a := e.acct
	doc := statefile.Document{
		ActiveChildren:        a.liveChildren,
		AdoptedChildren:       a.liveAdopted,
		Escalated:             e.escalated,
		OrphanedChildrenTotal: a.orphanedTotal,
		Phase:                 string(e.phase),
		ReapedChildrenTotal:   a.reapedTotal,
		ReapedOrphansTotal:    a.reapedOrphans,
	}
	if e.phase == phaseKilling {
		doc.Phase = string(phaseTerminating)
	}
	if a.runnerReaped {
		code := a.runnerExitCode
		doc.RunnerExitCode = &code
	}
	if e.termSignal != 0 {
		s := int(e.termSignal)
		doc.TerminationSignal = &s
	}
	return doc
}

// writeState writes the document when it differs from the last one written.
func (e *engine) writeState() {
	if e.cfg.State == nil {
		return
	}
	doc := e.document()
	if e.written != nil && sameDocument(*e.written, doc) {
		return
	}
	_ = e.cfg.State.Write(doc) // the writer reports its own failure, once
	e.written = &doc
}

func sameDocument(a, b statefile.Document) bool {
	sameInt := func(x, y *int) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	if !sameInt(a.RunnerExitCode, b.RunnerExitCode) || !sameInt(a.TerminationSignal, b.TerminationSignal) {
		return false
	}
	a.RunnerExitCode, b.RunnerExitCode = nil, nil
	a.TerminationSignal, b.TerminationSignal = nil, nil
	return a == b
}

// processes is "1 process" or "N processes", for -v lines.
func processes(n int) string {
	if n == 1 {
		return "1 process"
	}
	return fmt.Sprintf("%d processes", n)
}
