package reaper

import (
	"errors"
	"fmt"
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

// processes is "1 process" or "N processes", for -v lines.
func processes(n int) string {
	if n == 1 {
		return "1 process"
	}
	return fmt.Sprintf("%d processes", n)
}
