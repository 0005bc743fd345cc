package reaper

import (
	"io"
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
	// work. ErrNoMembers says there is no group (quietly walked, like an
	// error). Emptiness is still decided by wait4 (ECHILD).
	KillAll func() error

	// Members, when set, lists the processes the kernel keeps together
	// for the runner's tree (its cgroup), so that the teardown signal at
	// grace 0 reaches them without a /proc walk: the engine signals each
	// member, with SIGCONT after, once Members confirmed it through a
	// pidfd (or, its own unreaped child, by pid). Should anything fail —
	// the list, a check, a direct child of the engine found outside the
	// group — the engine walks /proc as it would without it, sparing
	// the processes already signalled. With grace, the walk is used
	// throughout: its rescans need each process's start time.
	Members Members

	// JobControl, when set, is terminal mode: the runner holds the
	// terminal's foreground in a process group of its own (jobcontrol.go).
	JobControl JobControl

	Stderr io.Writer                     // where the one-line runner errors go
	Logf   func(format string, a ...any) // -v diagnostics; nil: silent
}

// Members is a kernel-kept list of the processes of the runner's tree
// (Config.Members): a cgroup the runner was started into.
type Members interface {
	// List appends the pids of the members to buf and returns it. An
	// error means the list may not be whole (the group has groups
	// beneath it, or cannot be read); ErrNoMembers, that there is no
	// group (it is decided while the engine starts, so Config.Members
	// can be set before it is known).
	List(buf []int) ([]int, error)
	// Holds reports whether the process behind pidfd is a member now: a
	// listed pid may have been reused by another process since. An
	// error means it cannot tell (errors.ErrUnsupported: the kernel
	// cannot say).
	Holds(pidfd int) (bool, error)
	// String names the list in -v lines.
	String() string
}

// Result is the outcome of a run.
type Result struct {
	ExitCode          int
	TerminationSignal syscall.Signal // 0 when the runner simply exited
	Escalated         bool
}

// engine is one run, touched by Run's goroutine only. Its work is spread
// by concern: start.go (Run, step by step, up to the runner's start),
// loop.go (the one wait, and each phase's entry actions), signals.go
// (registration, and what a received signal does), teardown.go (the
// teardown signal, the rescans, the SIGKILL rounds), accounting.go (wait4
// and the adoption counts), state.go (the state Document), timeout.go
// (Config.Timeout) and jobcontrol.go (terminal mode).
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
	// forker is the children file of the thread that started the runner,
	// found at the first scan after the start (forkerKnown), held open;
	// nil when that thread is the leader. pids is the scans' buffer.
	forker      *proc.ChildrenFile
	forkerKnown bool
	pids        []int
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
	// liveSeen is how many live processes the last teardown walk found
	// (uncounted: kill(-1) signalled them), for the SIGKILL round's line.
	liveSeen int
	// joined counts the processes a rescan signalled during the grace,
	// said in one line when it ends.
	joined int

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

	watch    *watcher // reaps at the kernel's pace and wakes the loop (watch.go)
	exits    []exit   // reap's buffer
	watching bool     // the watcher runs: an orphan was reaped (watchOrphans)

	jobs *jobControl // terminal mode; nil otherwise
	cut  bool        // a second cancel ended the grace early
}
