package reaper

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// cancelling signals end the run: the first is recorded, forwarded to the
// whole tree, and starts the teardown.
var cancelling = map[syscall.Signal]bool{
	unix.SIGTERM: true, unix.SIGINT: true, unix.SIGHUP: true, unix.SIGQUIT: true,
}

// forwardedSignals go to the runner alone. Left out on purpose: SIGCHLD
// (the engine's own wake-up), SIGPIPE (about corral's own writes), SIGURG
// (Go's preemption signal), SIGPROF (Go's profiler), the synchronous faults
// (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT) that concern
// corral's own code, and SIGKILL/SIGSTOP, which cannot be caught.
var forwardedSignals = func() []os.Signal {
	sigs := []os.Signal{
		unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH, unix.SIGCONT, unix.SIGALRM,
		unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU, unix.SIGVTALRM, unix.SIGPWR,
		unix.SIGIO, unix.SIGXCPU, unix.SIGXFSZ, unix.SIGSTKFLT,
	}
	// Real-time signals; 32 and 33 are reserved by the C library's threads.
	for s := 34; s <= 64; s++ {
		sigs = append(sigs, syscall.Signal(s))
	}
	return sigs
}()

func cancellingSignals() []os.Signal {
	out := make([]os.Signal, 0, len(cancelling))
	for s := range cancelling {
		out = append(out, s)
	}
	return out
}

// HandledSignals are every signal the engine acts on: what a process in
// front of the engine (the pidns host side) should catch and pass on.
func HandledSignals() []os.Signal {
	return append(cancellingSignals(), forwardedSignals...)
}
