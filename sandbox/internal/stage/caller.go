package stage

import (
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// Caller is what corral inherited from its caller and hands on to the
// runner as it came (docs/signals-and-teardown.md, "What the runner
// inherits"): every file descriptor at
// its number, and the blocked signal mask.
type Caller struct {
	// FDs are the descriptors from 3 up that the process was started with,
	// in increasing order. Every descriptor corral and the Go runtime open
	// is close-on-exec, so one without FD_CLOEXEC is one the caller passed
	// (or, in a re-executed stage, the stage's own socket, which Open takes
	// out). Across a fork+exec the kernel keeps exactly those, so the
	// runner gets them at their numbers on every start path as long as
	// nothing corral places in a child lands on one: see Files.
	FDs []int
	// Mask is the signal mask the runner starts with. A Go program cannot
	// see the whole mask it was started with: before any of its code runs,
	// the runtime unblocks, on every thread, the signals it needs (SIGHUP,
	// SIGINT, SIGQUIT, SIGTERM, SIGCHLD, SIGPROF, SIGURG and the
	// synchronous faults) and keeps the original only privately. So this is
	// the caller's mask less those, read on the thread package
	// initialisation runs on. The init takes the one the host side
	// recorded (InitStart.Mask), and whoever starts the runner puts it on
	// the forking or exec'ing thread first, so the runner's mask does not
	// depend on which of corral's threads happens to start it.
	Mask unix.Sigset_t
}

// atStart is read once, while the package initialises, before any of
// corral's own code runs, and never written after; Inherited hands out
// copies.
var atStart = Caller{FDs: scanInheritedFDs(), Mask: currentMask()}

// Inherited returns what this process was started with.
func Inherited() Caller {
	return Caller{FDs: slices.Clone(atStart.FDs), Mask: atStart.Mask}
}

// without returns c less the descriptor fd.
func (c Caller) without(fd int) Caller {
	c.FDs = slices.DeleteFunc(slices.Clone(c.FDs), func(n int) bool { return n == fd })
	return c
}

func scanInheritedFDs() []int {
	var fds []int
	keep := func(fd int) {
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err == nil && flags&unix.FD_CLOEXEC == 0 {
			fds = append(fds, fd)
		}
	}
	names, err := listFDs()
	if err != nil {
		// No /proc (the engine needs it later anyway): try the numbers a
		// caller plausibly uses, up to select(2)'s FD_SETSIZE.
		for fd := 3; fd < 1024; fd++ {
			keep(fd)
		}
		return fds
	}
	for _, name := range names {
		// The directory's own descriptor is listed too; it is
		// close-on-exec, and already closed, so keep drops it.
		if fd, err := strconv.Atoi(name); err == nil && fd > 2 {
			keep(fd)
		}
	}
	slices.Sort(fds)
	return fds
}

// listFDs lists /proc/self/fd with open, getdents64 and close alone. It
// runs in every corral process's initialisation, where os.ReadDir's
// directory object, its pooled buffer and its DirEntry values were the
// most expensive thing corral's own packages did (test/bench/README.md).
func listFDs() ([]string, error) {
	dir, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dir)
	var buf [4096]byte
	names := make([]string, 0, 16)
	for {
		n, err := unix.Getdents(dir, buf[:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

func currentMask() unix.Sigset_t {
	var set unix.Sigset_t
	// With a nil set, rt_sigprocmask only reports the thread's mask.
	_ = unix.PthreadSigmask(unix.SIG_BLOCK, nil, &set)
	return set
}

// SetThreadMask makes mask the calling thread's signal mask. The caller
// must hold its OS thread (runtime.LockOSThread) and not give it back to
// the runtime's pool afterwards.
func SetThreadMask(mask unix.Sigset_t) error {
	return unix.PthreadSigmask(unix.SIG_SETMASK, &mask, nil)
}
