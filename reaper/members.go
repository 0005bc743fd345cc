package reaper

import (
	"errors"
	"fmt"
	"slices"
	"syscall"

	"github.com/corral-sh/corral/internal/proc"
	"golang.org/x/sys/unix"
)

// The teardown signal at grace 0 through Config.Members: the runner's
// cgroup lists its tree, so no /proc walk (per process a pidfd, a stat
// file and a children file opened, read and closed) is needed to find it.

// ErrNoMembers is what Members.List and Config.KillAll return when the
// run turned out to have no group: the engine walks /proc, and says
// nothing of it.
var ErrNoMembers = errors.New("no group")

var (
	errGone      = errors.New("gone")
	errNotMember = errors.New("no longer a member")
)

// signalMembers sends sig, then SIGCONT (a stopped process acts on sig
// only once continued), to every member, and returns the pids it
// signalled, sorted, and whether they are the whole tree. When they may
// not be, the caller walks /proc for the rest, and -v says why.
//
// The tree may reach beyond the group: a runner with root's rights can
// move a process out of its cgroup (short of that, nothing can leave).
// A child of the engine's outside the group — the runner itself moved
// out, or an orphan of such a process — is seen here (the engine's own
// children files, read in place), and then the walk runs. A deeper
// process moved out while its parent stays inside is not seen: finding
// it is the walk this round exists to avoid. It gets no teardown
// signal, only SIGKILL from the walk of the next SIGKILL round
// (cgroup.kill cannot reach it either), a few milliseconds later. What
// it loses is the chance to act on the signal in those milliseconds,
// which grace 0 never promised; a run with a grace walks /proc
// throughout, and such a process gets its signal there.
func (e *engine) signalMembers(sig syscall.Signal) (reached []int, whole bool) {
	m := e.cfg.Members
	fail := func(err error) ([]int, bool) {
		e.cfg.Logf("teardown: %s through %v: %v; walking /proc", unix.SignalName(sig), m, err)
		slices.Sort(reached)
		return reached, false
	}
	members, err := m.List(nil)
	if errors.Is(err, ErrNoMembers) {
		return nil, false // no group after all: the walk, as without Members
	}
	if err != nil {
		return fail(err)
	}
	slices.Sort(members)
	// The engine's children are signalled by pid: the watcher must not
	// reap one (freeing its pid for reuse) between the read and the
	// signal.
	e.watch.mu.Lock()
	defer e.watch.mu.Unlock()
	kids, err := e.childPIDs()
	if err != nil {
		return fail(fmt.Errorf("list corral's children: %w", err))
	}
	if err := outsideChild(kids, members); err != nil {
		return fail(err)
	}
	refused := 0
	for _, pid := range members {
		if pid == e.self {
			continue // a library caller's engine inside its own group
		}
		_, direct := slices.BinarySearch(kids, pid)
		switch err := e.signalMember(m, pid, direct, sig); {
		case err == nil:
			reached = append(reached, pid)
		case errors.Is(err, errGone):
		case errors.Is(err, errNotMember):
			refused++ // its pid was reused, or it moved out: the walk tells
		default:
			return fail(fmt.Errorf("pid %d: %w", pid, err))
		}
	}
	if refused > 0 {
		return fail(fmt.Errorf("%s not a member by the time it was signalled", processes(refused)))
	}
	e.cfg.Logf("teardown: %s through %v", unix.SignalName(sig), m)
	return reached, true
}

// signalMember sends sig, then SIGCONT, to one listed pid: by pid alone
// when it is an unreaped child of the engine's (direct), whose pid
// cannot have been reused (the caller holds the watcher's lock, so it
// stays unreaped); otherwise through a pidfd, once Members
// confirmed that the process behind it is a member. Errors of the sends
// are not the round's: a process the engine may not signal is left to
// the SIGKILL rounds, as the walk leaves it.
func (e *engine) signalMember(m Members, pid int, direct bool, sig syscall.Signal) error {
	if direct {
		_ = unix.Kill(pid, sig)
		if sig != unix.SIGKILL {
			_ = unix.Kill(pid, unix.SIGCONT)
		}
		return nil
	}
	fd, err := unix.PidfdOpen(pid, 0)
	switch {
	case errors.Is(err, unix.ESRCH):
		return errGone
	case err != nil:
		return fmt.Errorf("pidfd_open: %w", err)
	}
	defer unix.Close(fd)
	switch member, err := m.Holds(fd); {
	case err != nil:
		return err
	case !member:
		return errNotMember
	}
	_ = unix.PidfdSendSignal(fd, sig, nil, 0)
	if sig != unix.SIGKILL {
		_ = unix.PidfdSendSignal(fd, unix.SIGCONT, nil, 0)
	}
	return nil
}

// outsideChild finds a live child of the engine's that is not among the
// members (sorted). A zombie is not one: it has left its cgroup's list,
// and needs no signal.
func outsideChild(kids, members []int) error {
	for _, pid := range kids {
		if _, in := slices.BinarySearch(members, pid); in {
			continue
		}
		st, err := proc.ReadStat(pid)
		switch {
		case err == nil && !st.Zombie():
			return fmt.Errorf("pid %d, a child of corral's, is outside it", pid)
		case err != nil && proc.Blinding(err):
			return err
		}
	}
	return nil
}

// childPIDs lists the engine's direct children, sorted. In a process
// that exists for the run they are the orphans the kernel hands the
// leader thread, in its children file (held open: read in place), and
// the runner, which the starter thread forked: nothing else forks there.
// Elsewhere a library caller may fork from any thread, and every
// thread's file is read.
func (e *engine) childPIDs() ([]int, error) {
	var kids []int
	var err error
	if e.cfg.OwnsProcess && e.orphans != nil {
		kids, err = e.orphans.Read()
		if e.acct.runner > 0 && !e.acct.runnerReaped {
			kids = append(kids, e.acct.runner)
		}
	} else {
		kids, err = proc.System().Children(e.self)
	}
	slices.Sort(kids)
	return slices.Compact(kids), err
}
