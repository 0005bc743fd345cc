package sandbox

import (
	"os"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// What corral inherited from its caller and hands on to the runner as it
// came (SPEC.md "Transparency"): every file descriptor at its number, and
// the blocked signal mask. Both are read once, when the process starts,
// before any of corral's own code runs.

// inheritedFDs are the descriptors from 3 up that this process was started
// with, in increasing order. Every descriptor corral and the Go runtime open
// is close-on-exec, so one without FD_CLOEXEC is one the caller passed (or,
// in a re-executed stage, the stage's own protocol socket, which the stage
// takes out of this list before anything reads it). Across a fork+exec the
// kernel keeps exactly those descriptors, so the runner gets them at their
// numbers on every start path as long as nothing corral places in a child
// lands on one: see stageFiles.
var inheritedFDs = scanInheritedFDs()

func scanInheritedFDs() []int {
	var fds []int
	keep := func(fd int) {
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err == nil && flags&unix.FD_CLOEXEC == 0 {
			fds = append(fds, fd)
		}
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		// No /proc (the engine needs it later anyway): try the numbers a
		// caller plausibly uses, up to select(2)'s FD_SETSIZE.
		for fd := 3; fd < 1024; fd++ {
			keep(fd)
		}
		return fds
	}
	for _, ent := range entries {
		// The directory's own descriptor is listed too; it is
		// close-on-exec, and already closed, so keep drops it.
		if fd, err := strconv.Atoi(ent.Name()); err == nil && fd > 2 {
			keep(fd)
		}
	}
	slices.Sort(fds)
	return fds
}

// callerMask is the signal mask the runner starts with. A Go program cannot
// see the whole mask it was started with: before any of its code runs, the
// runtime unblocks, on every thread, the signals it needs (SIGHUP, SIGINT,
// SIGQUIT, SIGTERM, SIGCHLD, SIGPROF, SIGURG and the synchronous faults) and
// keeps the original only privately. So this is the caller's mask less
// those, read from the thread package initialisation runs on. A stage
// replaces it with the one its parent recorded, and whoever starts the
// runner puts it on the forking or exec'ing thread first, so the runner's
// mask does not depend on which of corral's threads happens to start it.
var callerMask = currentMask()

func currentMask() unix.Sigset_t {
	var set unix.Sigset_t
	// With a nil set, rt_sigprocmask only reports the thread's mask.
	_ = unix.PthreadSigmask(unix.SIG_BLOCK, nil, &set)
	return set
}

// setThreadMask makes mask the calling thread's signal mask. The caller
// must hold its OS thread (runtime.LockOSThread) and not give it back to
// the runtime's pool afterwards.
func setThreadMask(mask unix.Sigset_t) error {
	return unix.PthreadSigmask(unix.SIG_SETMASK, &mask, nil)
}
