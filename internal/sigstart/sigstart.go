// Package sigstart is the first step of a corral process's signal
// registration: the signals whose Go default is fatal (a goroutine dump
// for SIGQUIT, death for SIGTERM), then SIGPIPE (death at a write to a
// closed stdout or stderr). It imports nothing that
// registering does not need (os/signal, os, syscall), so that the package
// that starts it at a run's start (cmd/corral/internal/early) is
// initialised as soon as os/signal is: the Go runtime initialises packages
// in import-path order once their imports are done, and a package that
// needed more (golang.org/x/sys/unix, the OCI types, encoding/json…) would
// wait for all of them and every package that sorts before it. The rest of
// the registration, and everything that uses it, is package reaper's
// (reaper.CatchSignals, which takes the registration over: Take).
package sigstart

import (
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// Fatal are the signals whose Go default is fatal, SIGQUIT first (its
// default is the goroutine dump, exit 2, which must never be corral's
// answer). The faults past SIGABRT cost no round trip to the runtime's
// signal thread (they are not "notify" signals in its table).
var Fatal = []syscall.Signal{
	syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGABRT,
	syscall.SIGSEGV, syscall.SIGBUS, syscall.SIGFPE, syscall.SIGILL, syscall.SIGTRAP, syscall.SIGSYS, syscall.SIGSTKFLT,
}

// KeptIgnored are the signals whose inherited SIG_IGN survives the Go
// runtime's start: it installs its own handler for every other one
// before any package is initialised, and asking the kernel about those
// would only show it.
var KeptIgnored = []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGCONT, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU}

// Start is a registration's first step.
type Start struct {
	// Incoming receives the fatal signals, and later (package reaper)
	// every other cancelling and forwarded one.
	Incoming chan os.Signal
	// Pipe receives SIGPIPE, caught so that a closed stderr cannot kill
	// the process; never read.
	Pipe chan os.Signal
	// Ignored are the signals ignored when the process started: neither
	// registered, nor acted on, nor forwarded.
	Ignored [65]bool

	done chan struct{} // closed once Fatal and SIGPIPE are registered
}

// Begin records which signals the process inherited as ignored, then
// registers the fatal signals that were not, now, and SIGPIPE in the
// background. A signal is caught from the moment its own registration
// begins (the runtime marks it wanted, then makes a round trip to its
// signal thread), so SIGQUIT is caught once Begin is under way, and every
// fatal signal once it returns: five round trips and the making of that
// thread, which any registration needs (0.1 to 0.2 ms on an idle machine,
// about 1 ms with five runnable threads per CPU). Not in
// the background: a goroutine may wait for a CPU, under load, while the
// process goes on to start its runner (issue 26: a SIGTERM, sent once the
// run's state file existed, killed corral).
func Begin() *Start {
	s := &Start{
		Incoming: make(chan os.Signal, 128),
		Pipe:     make(chan os.Signal, 1),
		done:     make(chan struct{}),
	}
	for _, sig := range KeptIgnored {
		s.Ignored[sig] = IgnoredNow(sig)
	}
	signal.Notify(s.Incoming, s.Wanted(Fatal)...)
	go func() {
		signal.Notify(s.Pipe, syscall.SIGPIPE) // only corral's own writes raise it
		close(s.done)
	}()
	return s
}

// held is the registration a process's start began (BeginHeld) until the
// code that finishes it takes it (Take): package reaper's CatchSignals,
// whose exported API then needs no type of this internal package.
var held atomic.Pointer[Start]

// BeginHeld is Begin at a process's start (cmd/corral/internal/early,
// before main): the registration is held for Take.
func BeginHeld() { held.Store(Begin()) }

// Held reports whether a registration begun at the start waits for Take.
func Held() bool { return held.Load() != nil }

// Take returns the registration BeginHeld began, once: nil when none was
// begun or it was already taken.
func Take() *Start { return held.Swap(nil) }

// Wait returns once the fatal signals and SIGPIPE are registered.
func (s *Start) Wait() { <-s.done }

// Wanted returns those of sigs the process did not inherit as ignored.
func (s *Start) Wanted(sigs []syscall.Signal) []os.Signal {
	out := make([]os.Signal, 0, len(sigs))
	for _, sig := range sigs {
		if !s.Ignored[sig] {
			out = append(out, sig)
		}
	}
	return out
}

// IgnoredNow asks the kernel whether sig's disposition is SIG_IGN.
// signal.Ignored knows only SIGHUP and SIGINT; rt_sigaction with no new
// action changes nothing and also answers for the job-control signals,
// which the Go runtime leaves as it found them.
func IgnoredNow(sig syscall.Signal) bool {
	if sig == syscall.SIGKILL || sig == syscall.SIGSTOP {
		return false
	}
	// struct kernel_sigaction begins with the handler on every Linux
	// architecture Go supports but mips, whose flags come first.
	var old [4]uint64
	_, _, errno := syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), 0, uintptr(unsafe.Pointer(&old[0])), 8, 0, 0)
	return errno == 0 && old[0] == 1 // SIG_IGN
}
