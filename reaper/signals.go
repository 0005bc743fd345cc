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

// jobStop are the signals a terminal sends to stop a job (Ctrl-Z, and a
// background job touching the terminal). Caught, they would leave corral
// running and the shell waiting on a job that never stops; so whoever
// catches one passes it on and then stops itself, as the shell expects
// (SIGCONT from the shell's fg resumes both).
var jobStop = map[syscall.Signal]bool{unix.SIGTSTP: true, unix.SIGTTIN: true, unix.SIGTTOU: true}

// StopSelfAfter reports whether, having passed on s, a corral process that
// a shell may be waiting on should stop itself. PID 1 never does: its own
// namespace cannot stop it, and nothing waits on it as a job.
func StopSelfAfter(s syscall.Signal) bool { return jobStop[s] && os.Getpid() != 1 }
