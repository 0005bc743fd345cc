package reaper

import (
	"errors"

	"github.com/corral-sh/corral/internal/proc"
	"golang.org/x/sys/unix"
)

// accounting is the engine's bookkeeping of who it adopted and reaped. It
// remembers identities only of processes that are children now, so its
// memory is bounded by the live tree, not by the history of the run.
type accounting struct {
	runner int // pid of the runner, a direct child of the engine

	// adopted maps each non-runner child seen by the last scan to its
	// identity and to whether that scan counted it live.
	adopted map[int]child

	runnerLive     bool // the last scan counted the runner live
	liveChildren   int  // from the last scan: runner and adopted, zombies excluded
	liveAdopted    int
	orphanedTotal  int
	reapedTotal    int
	reapedOrphans  int
	runnerReaped   bool
	runnerExitCode int
}

// child is one adopted process as the last scan saw it: (pid, start time)
// is its identity across pid reuse; live is false for a zombie, which the
// live counts already leave out.
type child struct {
	start uint64
	live  bool
}

func newAccounting(runner int) *accounting {
	return &accounting{runner: runner, adopted: map[int]child{}}
}

// observe takes one scan of the engine's direct children.
func (a *accounting) observe(children []proc.Stat) {
	current := make(map[int]child, len(children))
	live, liveAdopted := 0, 0
	a.runnerLive = false
	for _, st := range children {
		alive := !st.Zombie()
		if alive {
			live++
		}
		if st.PID == a.runner {
			a.runnerLive = alive
			continue
		}
		if alive {
			liveAdopted++
		}
		if known, ok := a.adopted[st.PID]; !ok || known.start != st.StartTime {
			a.orphanedTotal++
		}
		current[st.PID] = child{start: st.StartTime, live: alive}
	}
	a.adopted = current
	a.liveChildren, a.liveAdopted = live, liveAdopted
}

// reaped records one wait4 result. A process leaves the live counts only
// if the last scan counted it there: a zombie that scan saw was already
// left out, and decrementing again would undercount the living.
func (a *accounting) reaped(pid, exitCode int) {
	a.reapedTotal++
	if pid == a.runner && !a.runnerReaped {
		a.runnerReaped = true
		a.runnerExitCode = exitCode
		if a.runnerLive {
			a.runnerLive = false
			a.liveChildren--
		}
		return
	}
	a.reapedOrphans++
	known, ok := a.adopted[pid]
	if !ok {
		// Adopted and gone between two scans: still an orphan we owned.
		a.orphanedTotal++
		return
	}
	delete(a.adopted, pid)
	if known.live {
		a.liveAdopted--
		a.liveChildren--
	}
}

// reap collects every child that has exited: first what the watcher
// reaped (watch.go), then its own wait4 until nothing more. SIGCHLD is an
// edge, not a count: one signal may stand for many exits. __WALL includes
// children that do not signal their exit. It needs no descriptor and no
// memory beyond the accounting.
func (e *engine) reap() { e.reapThen(nil) }

// reapThen is reap, with during run while the watcher's lock is still
// held, after the last wait4 and before the exits are accounted: nothing
// is reaped meanwhile.
func (e *engine) reapThen(during func()) {
	flags := unix.WNOHANG | unix.WALL
	if e.jobs != nil {
		flags |= unix.WUNTRACED // terminal mode: the runner's stops (jobcontrol.go)
	}
	e.watch.mu.Lock()
	exits := e.watch.take(e.exits[:0])
	empty := false
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, flags, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		empty = errors.Is(err, unix.ECHILD)
		if err != nil || pid <= 0 {
			break
		}
		exits = append(exits, exit{pid, ws})
	}
	if during != nil {
		during()
	}
	e.watch.mu.Unlock()
	for _, x := range exits {
		e.account(x.pid, x.status)
	}
	clear(exits)
	e.exits = exits[:0]
	if empty && !e.noChildren {
		e.noChildren = true
		e.push(evTreeEmpty)
	}
}

// account takes one wait4 result, the engine's or the watcher's.
func (e *engine) account(pid int, ws unix.WaitStatus) {
	if ws.Stopped() { // only with WUNTRACED, in terminal mode
		if pid == e.acct.runner && !e.acct.runnerReaped {
			e.runnerStopped(ws.StopSignal())
		}
		return
	}
	code := ExitCode(ws)
	delete(e.blindSent, pid) // the pid may now be reused
	if pid == e.acct.runner && !e.acct.runnerReaped {
		e.cfg.Logf("runner exited: status %d", code)
		e.push(evRunnerExited)
	} else {
		e.watchOrphans()
	}
	e.acct.reaped(pid, code)
}

func (e *engine) observe() {
	if e.cfg.State == nil {
		return
	}
	var kids []proc.Stat
	var err error
	scan := func() {
		kids, err = e.children()
		if err != nil && e.restoreNOFILE() {
			kids, err = e.children()
		}
	}
	if e.watching {
		// The exits the watcher queued without waking the engine, and the
		// scan, under one hold of its lock: a child the watcher reaped
		// between the two would be missing from the scan with its exit
		// not yet accounted, and counted a second time as an orphan
		// adopted and gone between two scans (a CI run saw 301 of 300).
		e.reapThen(scan)
	} else {
		scan()
	}
	if err != nil {
		e.cfg.Logf("scan children: %v", err)
		return
	}
	e.acct.observe(kids)
}

// children lists the engine's direct children for the state's counts.
// A child is listed in the children file of the thread that forked it,
// and an orphan in the leader's, where the kernel hands it; reading every
// thread's file (a dozen for a Go process, each an open, a read and a
// close) made most of an idle tick's cost. In a process that exists for
// the run, only one thread forks, the one that started the runner: the
// engine reads the leader's file and that thread's, both held open.
// Elsewhere (a library caller may fork from any thread) it reads them all.
func (e *engine) children() ([]proc.Stat, error) {
	if !e.cfg.OwnsProcess || e.orphans == nil || e.acct.runner <= 0 {
		return proc.ChildrenOf(e.self)
	}
	if !e.forkerKnown {
		e.forkerKnown = true
		if tid, ok := proc.ForkingThread(e.self, e.acct.runner); ok && tid != e.self {
			if f, err := proc.OpenChildrenFile(e.self, tid); err == nil {
				e.forker = f
			} else {
				e.forkerKnown = false // once a descriptor can be had
				return proc.ChildrenOf(e.self)
			}
		}
	}
	pids, err := e.orphans.AppendTo(e.pids[:0])
	if err == nil && e.forker != nil {
		pids, err = e.forker.AppendTo(pids)
	}
	if err != nil {
		return proc.ChildrenOf(e.self)
	}
	e.pids = pids
	return e.acct.known(e.self, pids)
}

// known turns the pids of the engine's children into the stat records
// observe counts, reading the stat only of those the last scan did not
// know: an unreaped child's pid cannot be reused, so a pid the last scan
// saw, still listed and not reaped since, is the same process. What its
// stat would add is whether it has become a zombie meanwhile, and the
// watcher has the engine reap a zombie as soon as it is one (reaped then
// takes it out of the counts). The runner's identity is its pid.
func (a *accounting) known(self int, pids []int) ([]proc.Stat, error) {
	out := make([]proc.Stat, 0, len(pids))
	var fresh []int
	for _, pid := range pids {
		switch c, ok := a.adopted[pid]; {
		case pid == a.runner && !a.runnerReaped:
			out = append(out, proc.Stat{PID: pid, PPID: self, State: 'S'})
		case ok:
			st := proc.Stat{PID: pid, PPID: self, StartTime: c.start, State: 'S'}
			if !c.live {
				st.State = 'Z'
			}
			out = append(out, st)
		default:
			fresh = append(fresh, pid)
		}
	}
	return proc.StatsOf(self, fresh, out)
}

// watchOrphans hands the engine's wake-ups to the child watcher
// (watch.go) from the first orphan on: a tree that leaves orphans may
// leave thousands, and the watcher reaps them at the kernel's pace. A run
// whose runner leaves none keeps SIGCHLD's path, which costs a plain
// launch nothing (the watcher's start measured about 2 ms of a 20 ms
// launch). The watcher's goroutine blocks in waitid on one of the OS
// threads reserved before the runner started (spareThreads).
func (e *engine) watchOrphans() {
	if e.watching {
		return
	}
	e.watching = true
	e.watch.begin(e.acct.runner)
	if e.cfg.OwnsProcess {
		defaultChildSignal(e.sig)
	}
}
