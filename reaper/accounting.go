package reaper

import (
	"github.com/corral-sh/corral/internal/proc"
)

// accounting is the engine's bookkeeping of who it adopted and reaped. It
// remembers identities only of processes that are children now, so its
// memory is bounded by the live tree, not by the history of the run.
type accounting struct {
	runner int // pid of the runner, a direct child of the engine

	// adopted maps each non-runner child seen by the last scan to its
	// start time: (pid, start time) is its identity across pid reuse.
	adopted map[int]uint64

	liveChildren   int // from the last scan: runner and adopted, zombies excluded
	liveAdopted    int
	orphanedTotal  int
	reapedTotal    int
	reapedOrphans  int
	runnerReaped   bool
	runnerExitCode int
}

func newAccounting(runner int) *accounting {
	return &accounting{runner: runner, adopted: map[int]uint64{}}
}

// observe takes one scan of the engine's direct children.
func (a *accounting) observe(children []proc.Stat) {
	current := make(map[int]uint64, len(children))
	live, liveAdopted := 0, 0
	for _, st := range children {
		if !st.Zombie() {
			live++
		}
		if st.PID == a.runner {
			continue
		}
		if !st.Zombie() {
			liveAdopted++
		}
		if start, known := a.adopted[st.PID]; !known || start != st.StartTime {
			a.orphanedTotal++
		}
		current[st.PID] = st.StartTime
	}
	a.adopted = current
	a.liveChildren, a.liveAdopted = live, liveAdopted
}

// reaped records one wait4 result.
func (a *accounting) reaped(pid, exitCode int) {
	a.reapedTotal++
	if pid == a.runner && !a.runnerReaped {
		a.runnerReaped = true
		a.runnerExitCode = exitCode
		a.liveChildren = max(a.liveChildren-1, 0)
		return
	}
	a.reapedOrphans++
	if _, known := a.adopted[pid]; known {
		delete(a.adopted, pid)
		a.liveAdopted = max(a.liveAdopted-1, 0)
		a.liveChildren = max(a.liveChildren-1, 0)
	} else {
		// Adopted and gone between two scans: still an orphan we owned.
		a.orphanedTotal++
	}
}
