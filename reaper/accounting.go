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
