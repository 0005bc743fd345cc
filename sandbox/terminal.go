package sandbox

// Terminal mode (docs/terminal.md). When stdin is corral's controlling
// terminal and corral's process group holds its foreground, the runner is
// started in a process group of its own that takes the foreground before
// its first instruction (Setpgid + Foreground in the child, so the runner's
// tcsetpgrp needs no SIGTTOU dance). The terminal's Ctrl-C, Ctrl-\, Ctrl-Z
// and SIGWINCH then reach the runner's group alone, once.
//
// Job control, in the process the caller's shell waits on (the subreaper
// engine's process, or the pidns host side):
//
//	Ctrl-Z ─▶ runner's group stops ─▶ engine's wait4(WUNTRACED) sees it
//	  subreaper: the engine stops corral's group (reaper.StopJob)
//	  pidns:     the init (PID 1, which cannot stop) sends RunnerStopped
//	             on its stage link (package pidinit, jobs.go); the host
//	             side stops its group
//	shell's fg ─▶ SIGCONT to corral ─▶ corral's group holds the foreground?
//	             hand it to the runner's group ─▶ continue that group
//	             (pidns: the host hands it over, then SIGCONT to the init,
//	             which continues the group inside the namespace)
//
// At exit the process the shell waits on gives the foreground back to the
// group it found, unless a live group outside the tree (the shell) took it
// meanwhile. Inside a new PID namespace that group reads as 0, which is why
// the host side, not the init, remembers and restores it.

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"

	"github.com/corral-sh/corral/internal/proc"
	"github.com/corral-sh/corral/reaper"
	"github.com/corral-sh/corral/sandbox/internal/stage"
	"golang.org/x/sys/unix"
)

// terminal is the caller's terminal as corral found it, held by the process
// the caller's shell waits on.
type terminal struct {
	fd    int // stdin: the controlling terminal
	found int // the foreground process group at start: corral's own
	logf  func(format string, a ...any)

	mu sync.Mutex
	// target is the group to hand the foreground back to: the one inside
	// corral's tree that held it when the runner last stopped (the
	// runner's own group, or a job a runner shell gave it to); 0 until a
	// stop says.
	target int
}

// openTerminal returns the caller's terminal when corral runs in terminal
// mode, else nil. TIOCGPGRP fails unless fd 0 is the caller's controlling
// terminal. A stdout that is a pipe means corral is the first stage of a
// pipeline (`corral -- make | less`): its other stages share corral's group
// and read the terminal too, and taking the foreground from that group
// would stop them, so corral keeps today's behaviour there.
func openTerminal(p *stage.Proc) *terminal {
	fg, err := tcgetpgrp(0)
	if err != nil || fg != unix.Getpgrp() {
		return nil
	}
	var st unix.Stat_t
	if unix.Fstat(1, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO {
		p.Logf("terminal: stdout is a pipe, so the runner stays in corral's process group")
		return nil
	}
	p.Logf("terminal: the runner gets a process group of its own and the foreground of the terminal on stdin")
	return &terminal{fd: 0, found: fg, logf: p.Logf}
}

// noteStop records, when the runner has just stopped, which group to hand
// the terminal back to: the current foreground, when it is inside corral's
// tree (inside), else the one recorded before (the runner stopped in the
// background, e.g. by SIGTTIN after the shell's bg).
func (t *terminal) noteStop(inside bool) {
	if !inside {
		return
	}
	fg, err := tcgetpgrp(t.fd)
	if err != nil || fg <= 0 || fg == t.found {
		return
	}
	t.mu.Lock()
	t.target = fg
	t.mu.Unlock()
}

// handBack gives the foreground back to the runner's side when corral's own
// group holds it: the shell's fg made it so before continuing corral. In
// the background (bg) the runner goes on without it, as any job does.
func (t *terminal) handBack() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.target == 0 {
		return
	}
	fg, err := tcgetpgrp(t.fd)
	if err != nil || fg != t.found {
		return
	}
	if err := tcsetpgrp(t.fd, t.target); err != nil {
		t.logf("terminal: hand the foreground back to process group %d: %v", t.target, err)
	}
}

// restore runs when the tree is gone: the foreground goes back to the group
// corral found, unless a live group took it meanwhile (the caller's shell,
// after bg). A group of the tree is dead by now (kill(-pgrp, 0) says
// ESRCH), and one that nobody holds reads as 0.
func (t *terminal) restore() {
	fg, err := tcgetpgrp(t.fd)
	if err != nil || fg == t.found {
		return
	}
	if fg > 0 && !errors.Is(unix.Kill(-fg, 0), unix.ESRCH) {
		return
	}
	if err := tcsetpgrp(t.fd, t.found); err != nil {
		t.logf("terminal: give the foreground back to process group %d: %v", t.found, err)
	}
}

// RunnerStopped and Continued make the subreaper engine's process a
// reaper.JobControl: it is the process the caller's shell waits on.
func (t *terminal) RunnerStopped(syscall.Signal) bool {
	fg, err := tcgetpgrp(t.fd)
	t.noteStop(err == nil && fg > 0 && descends(fg, os.Getpid()))
	return true
}

func (t *terminal) Continued() { t.handBack() }

// descends reports whether pid is a descendant of root.
func descends(pid, root int) bool {
	// A chain longer than this is no tree corral walks in practice, and a
	// loop in a racing /proc must not hang the engine.
	for i := 0; i < 4096 && pid > 1; i++ {
		st, err := proc.ReadStat(pid)
		if err != nil {
			return false
		}
		if st.PPID == root {
			return true
		}
		pid = st.PPID
	}
	return false
}

// passSignal passes a signal the pidns host side caught on to the init: a
// SIGCONT first hands the terminal back (the shell's fg), so the init
// continues the runner's group in the foreground; the job-stop signals
// are passed on without stopping the host, whose stop follows the
// runner's (followInit).
func (t *terminal) passSignal(init int, sig syscall.Signal) {
	if sig == unix.SIGCONT {
		t.handBack()
	}
	// The init is our unreaped child: its pid cannot be reused.
	_ = unix.Kill(init, sig)
}

// followStop follows one stop of the runner's group the init reported:
// it stops the host side's group, then continues the init (which
// continues the runner's group) once the shell continued the host side.
func (t *terminal) followStop(stop *stage.RunnerStopped, init int) {
	t.noteStop(stop.Inside)
	reaper.StopJob(syscall.Signal(stop.Signal))
	t.handBack()
	_ = unix.Kill(init, unix.SIGCONT)
}

func tcgetpgrp(fd int) (int, error) {
	return unix.IoctlGetInt(fd, unix.TIOCGPGRP)
}

// tcsetpgrp sets the terminal's foreground group with SIGTTOU blocked on
// the calling thread: from a background group the kernel would otherwise
// send SIGTTOU to corral's group and fail the call, and corral catches
// SIGTTOU to forward it.
func tcsetpgrp(fd, pgrp int) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var block, old unix.Sigset_t
	n := uint(unix.SIGTTOU) - 1
	block.Val[n/64] |= 1 << (n % 64)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &block, &old); err != nil {
		return fmt.Errorf("block SIGTTOU: %w", err)
	}
	defer unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	return unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, pgrp)
}
