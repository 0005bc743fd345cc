package supervise

// The run's cgroup v2 (internal/cgroup): where a writable one exists, the
// runner starts inside a cgroup of its own (clone3 with
// CLONE_INTO_CGROUP), so that teardown's SIGKILL round is one write to
// cgroup.kill that no fork can outrun, its SIGTERM at grace 0 goes to the
// members cgroup.procs lists without a /proc walk, and the cgroup is
// removed when the run is over.
//
// The engine's process makes it: corral itself in subreaper mode, the init
// in pidns mode. The init is then outside the cgroup, so its SIGKILL round
// is cgroup.kill and kill(-1) both, with one code path for both modes, and
// the process that made the cgroup is the one that removes it, after its
// own engine saw the tree empty: nothing has to pass between host and
// init. (Starting the init itself into the cgroup from the host would put
// the engine inside what cgroup.kill kills, leaving the init with kill(-1)
// alone and the host with a cgroup to clean up behind a process it does
// not supervise.)

import (
	"errors"
	"fmt"

	"github.com/corral-sh/corral/internal/cgroup"
	"github.com/corral-sh/corral/reaper"
	"golang.org/x/sys/unix"
)

// minNOFILE is the lowest RLIMIT_NOFILE at which a run takes a cgroup.
const minNOFILE = 64

// openCgroup makes the run's cgroup, before the runner starts, while
// descriptors are plentiful. Where none can be used, the /proc walk
// stays: the usual reasons (rootless without delegation, a container's
// read-only mount) are said under -v, anything unexpected on stderr, by
// sayCgroup as the runner starts: a pidns init whose namespaces then fail
// says nothing, so after auto's fallback the line is said once, by the
// engine that runs.
func (e *Engine) openCgroup() {
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil && rl.Cur < minNOFILE {
		// The cgroup holds five descriptors for the whole run: under a
		// limit this low they would be the ones the start then lacks,
		// and a run that works without the cgroup must not fail with it.
		e.note = fmt.Sprintf("cgroup: not used: RLIMIT_NOFILE %d leaves no room for its descriptors (%d or more does); teardown walks /proc", rl.Cur, minNOFILE)
		return
	}
	p, err := cgroup.Find()
	if err == nil {
		p.Owner = e.owner
		e.cgroup, err = p.New()
	}
	switch {
	case err == nil:
		e.note = fmt.Sprintf("cgroup: the runner's tree goes into %s; teardown's SIGKILL is its cgroup.kill", e.cgroup.Path())
	case errors.Is(err, cgroup.ErrUnavailable):
		e.note = fmt.Sprintf("cgroup: not used: %v; teardown walks /proc", err)
	default:
		e.note, e.warn = fmt.Sprintf("cgroup: %v; teardown walks /proc instead", err), true
	}
}

// sayCgroup says what openCgroup decided, once the engine starts the
// runner.
func (e *Engine) sayCgroup() {
	e.awaitCgroup()
	switch {
	case e.warn:
		e.p.Warnf("%s", e.note)
	case e.note != "":
		e.p.Logf("%s", e.note)
	}
}

// decideCgroup makes the run's cgroup (openCgroup) on the calling
// goroutine, once: Prepare calls it right after it started the starter
// thread, whose privilege drop runs meanwhile. Made in a goroutine of its
// own, the cgroup was what the runner's fork waited for: on two CPUs that
// goroutine got one only after the signal registration's hand-offs
// between threads (about 1 ms, test/bench/README.md). Everything that
// reads e.cgroup decides it first; a run abandoned before Prepare decides
// that there is none.
func (e *Engine) decideCgroup() { e.cgroupOnce.Do(e.openCgroup) }

// awaitCgroup returns once the cgroup is decided.
func (e *Engine) awaitCgroup() { e.cgroupOnce.Do(func() {}) }

// FD is the descriptor the runner is started into, or -1: the
// stage.Cgroup of the runner's start.
func (e *Engine) FD() int {
	e.awaitCgroup()
	if e.cgroup == nil {
		return -1
	}
	return e.cgroup.FD()
}

// Refused gives the cgroup up when the kernel refused to start the
// runner into it (and started it outside): the runner is not inside, so
// it is removed now, and teardown walks /proc.
func (e *Engine) Refused(err error) {
	e.awaitCgroup()
	c := e.cgroup
	if c == nil {
		return
	}
	e.cgroup, e.refusedPath = nil, c.Path()
	e.p.Logf("cgroup: starting the runner into %s was refused (%v); started it outside, teardown walks /proc", c.Path(), err)
	if rerr := c.Remove(); rerr != nil {
		e.p.Warnf("cgroup: %v", rerr)
	}
}

// killAll is the engine's Config.KillAll: cgroup.kill, one write through
// the descriptor opened before the runner started. Without a cgroup (none
// was made, or it was given up at the start) it says so with
// reaper.ErrNoMembers, and the engine walks: nil would claim a kill.
func (e *Engine) killAll() func() error {
	said := false
	return func() error {
		e.awaitCgroup()
		c := e.cgroup
		if c == nil {
			return reaper.ErrNoMembers
		}
		if err := c.Kill(); err != nil {
			return err
		}
		if !said {
			said = true
			e.p.Logf("teardown: SIGKILL through %s/cgroup.kill", c.Path())
		}
		return nil
	}
}

// members is the engine's Config.Members: the run's cgroup, through the
// descriptors opened before the runner started. Like killAll it waits
// for the cgroup's decision only when used: Run must not wait for it,
// the registration and the runner's start run beside its making.
func (e *Engine) members() reaper.Members { return cgroupMembers{e} }

type cgroupMembers struct{ e *Engine }

var errRefused = errors.New("the runner was started outside the cgroup")

// cgroup is the run's cgroup, or why there is none to list.
func (m cgroupMembers) cgroup() (*cgroup.Cgroup, error) {
	m.e.awaitCgroup()
	switch {
	case m.e.cgroup != nil:
		return m.e.cgroup, nil
	case m.e.refusedPath != "":
		return nil, errRefused
	}
	return nil, reaper.ErrNoMembers
}

func (m cgroupMembers) List(buf []int) ([]int, error) {
	c, err := m.cgroup()
	if err != nil {
		return buf, err
	}
	return c.Procs(buf)
}

func (m cgroupMembers) Holds(pidfd int) (bool, error) {
	c, err := m.cgroup()
	if err != nil {
		return false, err
	}
	return c.Holds(pidfd)
}

// String names the list in -v lines, the cgroup given up at the start
// (Refused) included.
func (m cgroupMembers) String() string {
	if c, _ := m.cgroup(); c != nil {
		return c.Path() + "/cgroup.procs"
	}
	if m.e.refusedPath != "" {
		return m.e.refusedPath + "/cgroup.procs"
	}
	return "the run's cgroup"
}

// removeCgroup ends the run's cgroup, whatever ended the run (the tree
// emptied, a cancel before the start, a failed setup). The engine decided
// the tree was empty from wait4's ECHILD; cgroup.events confirms it, and
// Remove kills anything that is still inside (a process moved in by
// someone else) before it removes the directory.
func (e *Engine) removeCgroup() {
	e.awaitCgroup()
	c := e.cgroup
	if c == nil {
		return
	}
	e.cgroup = nil
	populated, err := c.Populated()
	switch {
	case err != nil:
		e.p.Logf("cgroup: %v", err)
	case populated:
		e.p.Logf("cgroup: %s is still populated after the tree was reaped; killing what is left", c.Path())
	}
	if err := c.Remove(); err != nil {
		e.p.Warnf("cgroup: %v", err)
		return
	}
	if err == nil && !populated {
		e.p.Logf("cgroup: %s empty (populated 0), removed", c.Path())
	} else {
		e.p.Logf("cgroup: %s removed", c.Path())
	}
}
