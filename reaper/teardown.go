package reaper

import (
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/corral-sh/corral/internal/proc"
	"golang.org/x/sys/unix"
)

// The teardown: the cancelling (or SIGTERM) signal to every process of the
// tree, rescans while the grace runs, then SIGKILL rounds until wait4 says
// the tree is empty; and, when the runner took /proc away from the engine
// by lowering RLIMIT_NOFILE, the blind rounds that work without it.

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
	// Grace 0: no rescan follows, so nobody needs to be remembered, and
	// one step may reach the whole tree; the SIGKILL round comes next.
	once := e.cfg.Grace <= 0 && e.lastScan.IsZero()
	if once && e.cfg.OwnsNamespace {
		// As PID 1 of the run's namespace kill(-1) reaches every process
		// of the tree in one call (SIGCONT after it, so that a stopped
		// one acts on it). Not counted: unix.Kill's reach is the
		// namespace.
		if err := unix.Kill(-1, sig); err == nil || errors.Is(err, unix.ESRCH) {
			_ = unix.Kill(-1, unix.SIGCONT)
			e.lastScan, e.liveSeen = now, uncounted
			e.reap()
			return uncounted
		}
	}
	var spared []int
	if once && e.cfg.Members != nil {
		var whole bool
		if spared, whole = e.signalMembers(sig); whole {
			e.lastScan, e.liveSeen = now, len(spared)
			e.reap()
			return len(spared)
		}
	}
	sent = len(spared) + e.walkRound(sig, spared)
	if !e.lastScan.IsZero() {
		e.joined += sent // said once, when the grace ends (sayJoined)
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

// walkRound walks the tree with the teardown signal for whoever it has
// not reached yet: neither a process an earlier round signalled running
// the same program, nor one of spared (sorted pids), which Members
// reached this round. It returns how many it signalled.
func (e *engine) walkRound(sig syscall.Signal, spared []int) (sent int) {
	reached := make(map[procID]string, len(e.signalled))
	_, err := e.walk(sig, func(st proc.Stat) bool {
		id := procID{st.PID, st.StartTime}
		reached[id] = st.Comm
		if comm, done := e.signalled[id]; done && comm == st.Comm {
			return false
		}
		if _, done := slices.BinarySearch(spared, st.PID); done {
			return false
		}
		sent++
		return true
	})
	if err == nil {
		e.signalled = reached // forget who has gone: memory follows the live tree
		e.liveSeen = len(reached)
		return sent
	}
	for id, comm := range reached {
		e.signalled[id] = comm
	}
	for _, pid := range spared {
		e.blindSent[pid] = true
	}
	e.blindRound(sig, err)
	return sent
}

// sayJoined says, once the grace is over, how many processes that joined
// the tree during it got the teardown signal: one line for the grace, not
// one per rescan (a runner's loop that forks a sleep ten times a second
// would otherwise make ten lines a second).
func (e *engine) sayJoined() {
	if e.joined > 0 {
		e.cfg.Logf("teardown: %s to %s that joined the tree during the grace", unix.SignalName(e.teardownSignal()), processes(e.joined))
		e.joined = 0
	}
}

// killRound sends SIGKILL to whatever is left, and schedules the next
// round: processes forked after a round escape it.
//
// The first round needs no walk where one step reaches the tree: as PID 1
// of its namespace kill(-1) does (walk), and KillAll (cgroup.kill)
// reaches what is in the runner's cgroup; the later rounds walk for what
// it could not. The tree is not empty (reap found a child it could not
// reap: a live one), so SIGKILL is needed: escalated. The -v line counts
// the live processes the last teardown walk found.
func (e *engine) killRound(now time.Time) {
	e.reap()
	if e.noChildren {
		return
	}
	first := !e.escalated
	oneStep := false
	if e.cfg.KillAll != nil {
		switch err := e.cfg.KillAll(); {
		case err == nil:
			oneStep = true
		case errors.Is(err, ErrNoMembers):
			// No group after all: the walk, as without KillAll. Taken
			// for a kill, it left the first round without a walk and
			// the tree's SIGKILL a round (killEvery) late.
		default:
			e.cfg.Logf("kill the runner's tree in one step: %v; walking it instead", err)
		}
	}
	n := 0
	if !oneStep || !first || e.cfg.OwnsNamespace {
		var err error
		n, err = e.walk(unix.SIGKILL, nil)
		if err != nil {
			e.blindRound(unix.SIGKILL, err)
		}
	}
	if first {
		e.escalated = true
		why := "grace over"
		if e.cut {
			why = "second cancelling signal, grace cut short"
		}
		if e.liveSeen == uncounted && n == 0 {
			n = uncounted
		} else {
			n = max(n, e.liveSeen, 1)
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
//
// kill(-1) needs no walk: none is made (the count is 0).
func (e *engine) walk(sig syscall.Signal, want func(proc.Stat) bool) (int, error) {
	if e.cfg.OwnsNamespace && sig == unix.SIGKILL {
		kerr := unix.Kill(-1, sig)
		if kerr == nil || errors.Is(kerr, unix.ESRCH) {
			e.blind = false
			return 0, nil
		}
		e.cfg.Logf("kill(-1, %s): %v; signalling one by one", unix.SignalName(sig), kerr)
	}
	n, err := proc.SignalTree(e.self, sig, want)
	if err != nil && e.restoreNOFILE() {
		n, err = proc.SignalTree(e.self, sig, want)
	}
	e.blind = err != nil
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
	// The children are signalled by pid: the watcher must not reap one
	// (freeing its pid for reuse) between the read and the signal.
	e.watch.mu.Lock()
	defer e.watch.mu.Unlock()
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

// uncounted stands for a count of processes that kill(-1) signalled.
const uncounted = -1

// processes is "1 process" or "N processes", for -v lines.
func processes(n int) string {
	if n == uncounted {
		return "every process of the namespace"
	}
	if n == 1 {
		return "1 process"
	}
	return fmt.Sprintf("%d processes", n)
}
