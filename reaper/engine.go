package reaper

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/corral-sh/corral/internal/proc"
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

	// Timeout, when positive, cancels the run that long after the runner
	// started, as if SIGTERM had arrived, and the run's status is then
	// ExitTimeout (timeout.go). Zero: no timer exists.
	Timeout time.Duration

	// State receives the engine's state Document each time it changes;
	// every Poll the engine rescans its children to refresh the counts.
	// Nil: no state is kept, and without a Timeout the engine has no
	// timer at all.
	State StateWriter

	// Signals is this process's registration (CatchSignals), made as early
	// as the process could. Nil: Run registers them itself, and removes
	// them again when it returns unless OwnsProcess.
	Signals *Signals

	// OwnsNamespace says the engine is PID 1 of a PID namespace made for
	// this run, so kill(-1) reaches exactly the runner's tree. Never set
	// it otherwise: in the caller's namespace kill(-1) reaches every
	// process of the user.
	OwnsNamespace bool

	// OwnsProcess says the process exists for this one run and exits as
	// soon as Run returns: the engine may then tune the Go runtime for its
	// job (GC target) and leaves its signal handlers registered.
	// A library caller sharing its process leaves it off.
	OwnsProcess bool

	// StartHolds says Start itself keeps the runner from running its
	// first instruction until Signals.Wait returns (sandbox execs it
	// stopped, and lets it go then), so that the slow part of a start
	// overlaps with the registration; the engine then calls Start without
	// waiting. Off, the engine waits before calling Start.
	StartHolds bool

	// KillAll, when set, kills every process of the runner's tree in one
	// step that no fork can outrun (a cgroup's cgroup.kill, through a
	// descriptor opened before the runner started). The engine calls it in
	// each SIGKILL round before its own walk, which then finds what
	// KillAll could not reach; an error is logged and the walk does the
	// work. Emptiness is still decided by wait4 (ECHILD).
	KillAll func() error

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

// Intervals of the teardown's rescans. While the grace runs, the tree is
// walked again so that a process that joined it after a walk (an orphan
// handed over while the walk read another branch, a child forked by a
// TERM trap) gets the teardown signal too: first soon, then less often,
// never less often than scanMax. SIGCHLD, the sign that an adoption may
// have happened, brings the next walk forward to scanMin after the last.
const (
	scanMin   = 5 * time.Millisecond
	scanMax   = 50 * time.Millisecond
	killEvery = 10 * time.Millisecond  // SIGKILL rounds until the tree is empty
	blindPace = 100 * time.Millisecond // rounds while /proc cannot be read
)

type procID struct {
	pid   int
	start uint64
}

type engine struct {
	cfg   Config
	sig   *Signals
	self  int
	acct  *accounting
	phase phase

	termSignal syscall.Signal
	escalated  bool
	noChildren bool // the last wait4 said ECHILD: the tree is empty
	events     []event

	// orphans is the engine's leader thread's children file, opened
	// before the runner started: the kernel hands every orphan to that
	// thread, and the file can be read again with no new descriptor, so
	// the engine still finds its direct children when the runner lowered
	// its RLIMIT_NOFILE. Unreaped, their pids cannot be reused: they can
	// be signalled by pid alone.
	orphans *proc.ChildrenFile
	// blindSent are the direct children the teardown signal reached
	// while /proc could not be read, until they are reaped.
	blindSent map[int]bool
	// signalled are the processes the teardown signal reached, with the
	// name of the program each ran then, so that a rescan signals each
	// newcomer once and nobody twice. Once per program: a shell's child
	// that took the signal in the shell's handler between fork and exec
	// (a TERM trap starting a helper) lost it, and the program it then
	// exec'd never saw it.
	signalled map[procID]string

	graceEnd time.Time
	nextScan time.Time // zero: no rescan pending
	scanStep time.Duration
	lastScan time.Time
	nextTick time.Time // zero: no state refresh pending
	timer    *time.Timer
	deadline deadline // Config.Timeout (timeout.go)

	nofile unix.Rlimit // RLIMIT_NOFILE before the runner started
	blind  bool        // the last walk could not see the whole tree
	warned bool        // the one line about a blind teardown was printed
	// blindTerm: kill(-1) sent the teardown signal, /proc being unreadable
	blindTerm bool

	written *Document // last document on disk, to skip identical writes

	jobs *jobControl // terminal mode; nil otherwise
	cut  bool        // a second cancel ended the grace early
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
	sig := cfg.Signals
	if sig == nil {
		sig = CatchSignals()
		if !cfg.OwnsProcess {
			defer sig.Stop()
		}
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
	e := &engine{
		cfg: cfg, sig: sig, self: os.Getpid(), phase: phaseStarting, acct: newAccounting(-1),
		blindSent: map[int]bool{}, signalled: map[procID]string{},
	}
	if cfg.JobControl != nil { // terminal mode (jobcontrol.go)
		e.jobs = &jobControl{JobControl: cfg.JobControl}
	}
	if e.self != 1 {
		// As PID 1 the kernel already hands us every orphan of the
		// namespace; elsewhere we must ask to be their reaper.
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return Result{ExitCode: 125}, &SetupError{Step: "become child subreaper (prctl PR_SET_CHILD_SUBREAPER)", Err: err}
		}
	}
	// Teardown must not need anything the runner can take away: what it
	// settles once is settled now, while descriptors are plentiful, and
	// the limit is remembered so that a runner lowering it with prlimit
	// can be undone.
	_ = unix.Getrlimit(unix.RLIMIT_NOFILE, &e.nofile)
	proc.Prepare()
	if f, err := proc.OpenChildrenFile(e.self, e.self); err == nil {
		e.orphans = f
		defer f.Close()
	}
	e.timer = time.NewTimer(time.Hour)
	e.timer.Stop()
	// Before the first write to stderr (the state writer's warning), and
	// before deciding whether the run was cancelled.
	sig.WaitUrgent()
	e.writeState()

	// Every signal must be registered before the runner exists: one it
	// sends to its parent first thing must not find the Go default.
	// And the OS threads the Go runtime will need exist by then (see
	// reserveThreads).
	if !cfg.StartHolds {
		sig.Wait()
	}
	// A signal that came before the runner exists: a cancel means it is
	// never started; anything else is passed on once it exists.
	held := sig.drain()
	for _, s := range held {
		if IsCancelling(s) {
			return e.cancelledBeforeStart(s), nil
		}
	}

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
	e.cfg.Logf("runner started as pid %d", pid)
	e.push(evStarted)
	e.startDeadline()
	defer e.stopDeadline()
	for _, s := range held {
		e.onSignal(s)
	}
	e.reap()
	e.advance()
	e.loop()
	return Result{ExitCode: e.exitCode(), TerminationSignal: e.termSignal, Escalated: e.escalated}, nil
}

// cancelledBeforeStart ends a run whose runner never started.
func (e *engine) cancelledBeforeStart(s syscall.Signal) Result {
	e.cfg.Logf("received %s before the runner started: not starting it", unix.SignalName(s))
	e.termSignal = s
	e.acct.runnerReaped, e.acct.runnerExitCode = true, 128+int(s)
	e.phase = next(e.phase, evCancel)
	e.writeState()
	return Result{ExitCode: 128 + int(s), TerminationSignal: s}
}

// loop is the engine's one wait: for SIGCHLD, for a signal, or for the
// next deadline (state refresh, end of the grace, teardown rescan). With
// no deadline pending the timer is stopped and the engine sleeps until a
// signal arrives.
func (e *engine) loop() {
	for e.phase != phaseExited {
		e.arm()
		select {
		case <-e.sig.children:
			e.reap()
			e.afterReap()
		case s := <-e.sig.incoming:
			e.onSignal(s.(syscall.Signal))
		case <-e.timer.C:
			e.onTimer(time.Now())
		case <-e.deadline.c: // nil without a timeout
			e.onDeadline()
		}
		e.advance()
	}
}

func (e *engine) push(ev event) { e.events = append(e.events, ev) }

// advance feeds the pending events to the state machine and performs
// each new phase's entry actions, which may push further events.
func (e *engine) advance() {
	for len(e.events) > 0 {
		ev := e.events[0]
		e.events = e.events[1:]
		if p := next(e.phase, ev); p != e.phase {
			e.enter(p)
		}
	}
}

func (e *engine) enter(p phase) {
	e.phase = p
	now := time.Now()
	switch p {
	case phaseRunning:
		e.scheduleTick(now)
		e.observe()
		e.writeState()
	case phaseTerminating:
		e.observe()
		e.writeState()
		e.graceEnd = now.Add(e.cfg.Grace)
		sent := e.termRound(now)
		if e.noChildren {
			e.push(evTreeEmpty)
			break
		}
		e.cfg.Logf("teardown: %s to %s, grace %v", unix.SignalName(e.teardownSignal()), processes(sent), e.cfg.Grace)
		if e.cfg.Grace <= 0 {
			e.push(evGraceOver)
		}
	case phaseKilling:
		e.nextScan = time.Time{}
		e.killRound(now)
		e.writeState()
		if e.noChildren {
			e.push(evTreeEmpty)
		}
	case phaseExited:
		e.nextScan, e.nextTick = time.Time{}, time.Time{}
		e.observe()
		e.writeState()
	}
}

// onSignal acts on one signal: a cancel is an event for the state
// machine; anything else goes to the runner alone.
func (e *engine) onSignal(s syscall.Signal) {
	if IsCancelling(s) {
		if e.termSignal == 0 {
			e.termSignal = s
		}
		e.cfg.Logf("received %s", unix.SignalName(s))
		if e.phase == phaseTerminating {
			e.cut = true
		}
		e.push(evCancel)
		return
	}
	if e.jobs != nil && e.jobSignal(s) { // terminal mode (jobcontrol.go)
		return
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
}

func (e *engine) onTimer(now time.Time) {
	if !e.nextTick.IsZero() && !now.Before(e.nextTick) {
		e.observe()
		e.writeState()
		e.scheduleTick(now)
	}
	if e.phase == phaseTerminating && !now.Before(e.graceEnd) {
		e.push(evGraceOver)
		return
	}
	if !e.nextScan.IsZero() && !now.Before(e.nextScan) {
		switch e.phase {
		case phaseTerminating:
			e.termRound(now)
		case phaseKilling:
			e.killRound(now)
		}
	}
}

// afterReap brings the next teardown round forward: the exit just reaped
// may have handed its children to the engine.
func (e *engine) afterReap() {
	if e.noChildren {
		return
	}
	switch e.phase {
	case phaseTerminating:
		e.scanStep = scanMin
		if soon := e.lastScan.Add(scanMin); e.nextScan.IsZero() || soon.Before(e.nextScan) {
			e.nextScan = soon
		}
	case phaseKilling:
		// The exits just reaped handed their children to the engine.
		e.nextScan = time.Now()
	}
}

// arm points the timer at the earliest pending deadline, or stops it.
func (e *engine) arm() {
	var at time.Time
	for _, t := range []time.Time{e.nextTick, e.nextScan} {
		if !t.IsZero() && (at.IsZero() || t.Before(at)) {
			at = t
		}
	}
	if e.phase == phaseTerminating && (at.IsZero() || e.graceEnd.Before(at)) {
		at = e.graceEnd
	}
	if at.IsZero() {
		e.timer.Stop()
		return
	}
	e.timer.Reset(max(time.Until(at), 0))
}

func (e *engine) scheduleTick(now time.Time) {
	if e.cfg.State == nil || e.cfg.Poll <= 0 {
		return // nothing to refresh: no timer at all
	}
	e.nextTick = now.Add(e.cfg.Poll)
}

func (e *engine) teardownSignal() syscall.Signal {
	if e.termSignal != 0 {
		return e.termSignal
	}
	return unix.SIGTERM
}

// termRound sends the teardown signal to every live process of the tree
// it has not reached yet, then reaps, and schedules the next rescan. It
// returns how many processes it signalled.
func (e *engine) termRound(now time.Time) (sent int) {
	sig := e.teardownSignal()
	e.reap()
	if e.noChildren {
		return 0
	}
	reached := make(map[procID]string, len(e.signalled))
	_, err := e.walk(sig, func(st proc.Stat) bool {
		id := procID{st.PID, st.StartTime}
		reached[id] = st.Comm
		if comm, done := e.signalled[id]; done && comm == st.Comm {
			return false
		}
		sent++
		return true
	})
	if err == nil {
		e.signalled = reached // forget who has gone: memory follows the live tree
	} else {
		for id, comm := range reached {
			e.signalled[id] = comm
		}
		e.blindRound(sig, err)
	}
	if sent > 0 && !e.lastScan.IsZero() {
		e.cfg.Logf("teardown: %s to %s that joined the tree", unix.SignalName(sig), processes(sent))
	}
	e.lastScan = now
	if e.scanStep == 0 {
		e.scanStep = scanMin
	}
	e.nextScan = now.Add(e.scanStep)
	if e.blind {
		e.nextScan = now.Add(blindPace)
	}
	e.scanStep = min(2*e.scanStep, scanMax)
	e.reap()
	return sent
}

// killRound sends SIGKILL to whatever is left, and schedules the next
// round: processes forked after a round escape it.
func (e *engine) killRound(now time.Time) {
	e.reap()
	if e.noChildren {
		return
	}
	counted := 0
	if e.cfg.KillAll != nil {
		if !e.escalated {
			// KillAll leaves the walk after it little or nothing alive to
			// count, and escalated (and the -v line) must say whether
			// SIGKILL found anyone: count first, signalling nobody.
			counted, _ = proc.SignalTree(e.self, unix.SIGKILL, func(proc.Stat) bool { return false })
		}
		if err := e.cfg.KillAll(); err != nil {
			e.cfg.Logf("kill the runner's tree in one step: %v; walking it instead", err)
		}
	}
	n, err := e.walk(unix.SIGKILL, nil)
	if err != nil {
		e.blindRound(unix.SIGKILL, err)
	}
	n = max(n, counted)
	if !e.escalated && (n > 0 || err != nil) {
		e.escalated = true
		why := "grace over"
		if e.cut {
			why = "second cancelling signal, grace cut short"
		}
		e.cfg.Logf("%s: SIGKILL to %s", why, processes(n))
	}
	e.lastScan = now
	e.nextScan = now.Add(killEvery)
	if e.blind {
		e.nextScan = now.Add(blindPace)
	}
	e.reap()
}

// walk signals the tree. As PID 1 of its own namespace the engine's
// SIGKILL is kill(-1): one syscall, under the kernel's task list lock, so
// nothing forked in the namespace slips past it, and it needs no
// descriptor, whatever limit the runner set; the walk before it only
// counts, for escalated.
func (e *engine) walk(sig syscall.Signal, want func(proc.Stat) bool) (int, error) {
	killAll := e.cfg.OwnsNamespace && sig == unix.SIGKILL
	visit := func(st proc.Stat) bool {
		return !killAll && (want == nil || want(st))
	}
	n, err := proc.SignalTree(e.self, sig, visit)
	if err != nil && e.restoreNOFILE() {
		n, err = proc.SignalTree(e.self, sig, visit)
	}
	e.blind = err != nil
	if killAll {
		// After the count, and whatever it found.
		if kerr := unix.Kill(-1, sig); kerr != nil && !errors.Is(kerr, unix.ESRCH) {
			e.cfg.Logf("kill(-1, %s): %v; signalling one by one", unix.SignalName(sig), kerr)
			n, err = proc.SignalTree(e.self, sig, want)
		}
	}
	return n, err
}

// blindRound is the teardown's round when /proc could not be read
// (err): the runner lowered corral's RLIMIT_NOFILE, and corral could not
// raise it back. The engine signals its direct children, read from the
// children file it holds open, and the runner; a process deeper in the
// tree becomes a direct child when its parent dies, and is reached on a
// later round. As PID 1 of its namespace, kill(-1) reaches everyone at
// once: for SIGKILL every round (walk did it), for the teardown signal
// once, and then the direct children that are new. It says so once: a
// teardown that cannot see its tree must not be a silent hang.
func (e *engine) blindRound(sig syscall.Signal, err error) {
	if !e.warned {
		e.warned = true
		fmt.Fprintf(e.cfg.Stderr, "corral: cannot read /proc: %v (the runner lowered corral's RLIMIT_NOFILE, which corral cannot raise without CAP_SYS_RESOURCE); signalling the processes of the tree as they become its direct children\n", err)
	}
	kids := []int{}
	if e.orphans != nil {
		kids, _ = e.orphans.Read()
	}
	if !e.acct.runnerReaped {
		kids = append(kids, e.acct.runner)
	}
	if e.cfg.OwnsNamespace && sig != unix.SIGKILL && !e.blindTerm {
		e.blindTerm = true
		_ = unix.Kill(-1, sig)
		_ = unix.Kill(-1, unix.SIGCONT)
		for _, pid := range kids {
			e.blindSent[pid] = true
		}
		return
	}
	for _, pid := range kids {
		if sig != unix.SIGKILL && e.blindSent[pid] {
			continue
		}
		e.blindSent[pid] = true
		_ = unix.Kill(pid, sig)
		if sig != unix.SIGKILL {
			_ = unix.Kill(pid, unix.SIGCONT)
		}
	}
}

// restoreNOFILE raises RLIMIT_NOFILE back to what it was before the
// runner started, when the runner lowered it (prlimit needs only its
// uid) and corral holds CAP_SYS_RESOURCE. It reports whether it did.
func (e *engine) restoreNOFILE() bool {
	var now unix.Rlimit
	if e.nofile.Cur == 0 || unix.Getrlimit(unix.RLIMIT_NOFILE, &now) != nil {
		return false
	}
	if now.Cur >= e.nofile.Cur && now.Max >= e.nofile.Max {
		return false
	}
	if err := unix.Prlimit(0, unix.RLIMIT_NOFILE, &e.nofile, nil); err != nil {
		return false
	}
	e.cfg.Logf("RLIMIT_NOFILE was lowered to %d:%d; restored %d:%d", now.Cur, now.Max, e.nofile.Cur, e.nofile.Max)
	return true
}

// reap collects every child that has exited. SIGCHLD is an edge, not a
// count: one signal may stand for many exits, so loop until wait4 has
// nothing more. __WALL includes children that do not signal their exit.
// It needs no descriptor and no memory beyond the accounting.
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
			if !e.noChildren {
				e.noChildren = true
				e.push(evTreeEmpty)
			}
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
		delete(e.blindSent, pid) // the pid may now be reused
		if pid == e.acct.runner && !e.acct.runnerReaped {
			e.cfg.Logf("runner exited: status %d", code)
			e.push(evRunnerExited)
		}
		e.acct.reaped(pid, code)
	}
}

func (e *engine) observe() {
	if e.cfg.State == nil {
		return
	}
	kids, err := proc.ChildrenOf(e.self)
	if err != nil && e.restoreNOFILE() {
		kids, err = proc.ChildrenOf(e.self)
	}
	if err != nil {
		e.cfg.Logf("scan children: %v", err)
		return
	}
	e.acct.observe(kids)
}

func (e *engine) document() Document {
	a := e.acct
	doc := Document{
		ActiveChildren:        a.liveChildren,
		AdoptedChildren:       a.liveAdopted,
		Escalated:             e.escalated,
		OrphanedChildrenTotal: a.orphanedTotal,
		Phase:                 e.phase.name(),
		ReapedChildrenTotal:   a.reapedTotal,
		ReapedOrphansTotal:    a.reapedOrphans,
	}
	if a.runnerReaped {
		code := e.exitCode()
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

func sameDocument(a, b Document) bool {
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
