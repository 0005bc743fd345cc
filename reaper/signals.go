package reaper

import (
	"encoding/binary"
	"errors"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"sync"
	"syscall"

	"github.com/corral-sh/corral/internal/sigstart"
	"golang.org/x/sys/unix"
)

// The signal table (docs/signals-and-teardown.md).
//
// Cancelling signals end the run: the first is recorded, sent to the
// whole tree, and starts the teardown. SIGHUP is not one of them: it is
// the reload signal of nginx, haproxy and sshd, and `docker kill -s HUP`
// must not tear a service down. IsCancelling reports whether s ends the
// run.
func IsCancelling(s syscall.Signal) bool {
	return s == unix.SIGTERM || s == unix.SIGINT || s == unix.SIGQUIT
}

// Every other catchable signal is forwarded to the runner alone, the
// synchronous faults too: corral's own faults never reach a handler (the
// Go runtime turns them into a panic), so a SIGSEGV or SIGABRT that
// arrives here was sent with kill(2) (a systemd watchdog's SIGABRT) and
// is meant for the service, not for corral.
//
// corral's own, never forwarded: SIGCHLD (the engine's wake-up), SIGPIPE
// (about corral's own writes), SIGURG (Go's preemption signal), SIGPROF
// (Go's profiler), 32 and 33 (the C library's threads), and SIGKILL and
// SIGSTOP, which cannot be caught.

// The signals whose Go default is fatal, and SIGPIPE, are registered
// first, before anything else at start (package sigstart, which a run's
// package early starts before main).

// laterSignals are the forwarded signals whose Go default is to drop
// them (or, for the job-control ones, the kernel's default, to stop).
// Each costs a round trip to the runtime's signal thread (about 10 µs),
// so they are registered in the background, and the engine waits for
// that to finish before the runner starts.
// The real-time signals are 35 to 64: the Go runtime keeps 32-34 for the C
// libraries. The list is written out, not built in a loop, so that the
// package's initialisation, which every corral process runs, does nothing.
var laterSignals = [...]syscall.Signal{
	unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH, unix.SIGCONT, unix.SIGALRM,
	unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU, unix.SIGVTALRM, unix.SIGPWR,
	unix.SIGIO, unix.SIGXCPU, unix.SIGXFSZ,
	35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49,
	50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64,
}

// Signals is one process's registration of every signal corral handles.
// Signals are process-wide, so a process makes one, as early as it can.
type Signals struct {
	children chan os.Signal // SIGCHLD: an edge, a buffer of one is enough
	incoming chan os.Signal // cancelling and forwarded signals
	first    *sigstart.Start
	done     chan struct{} // closed once every signal is registered

	// blocked are the later signals this process started with blocked
	// and reads from a signalfd (CatchBlockedSignals); every thread must
	// keep them blocked until notifyBlocked hands them to os/signal.
	blocked     unix.Sigset_t
	blockedOnce sync.Once
}

// LaterSignals is the set of the forwarded signals os/signal registers
// one round trip each: a process started with them blocked
// (CatchBlockedSignals) reads them from a signalfd instead. The pidns
// host clones its init with them blocked.
func LaterSignals() unix.Sigset_t {
	var set unix.Sigset_t
	for _, sig := range laterSignals {
		addSig(&set, sig)
	}
	return set
}

func addSig(set *unix.Sigset_t, sig syscall.Signal) {
	set.Val[(sig-1)/64] |= 1 << ((sig - 1) % 64)
}

func hasSig(set *unix.Sigset_t, sig syscall.Signal) bool {
	return set.Val[(sig-1)/64]&(1<<((sig-1)%64)) != 0
}

// CatchSignals registers every signal corral handles, in this process, in
// three steps: the signals whose Go default is fatal (a goroutine dump, or
// death), before it returns; SIGPIPE; and the rest, in the background.
// Call it at the process's start, once. WaitUrgent
// returns after the second step: a process must not write to its stdout
// or stderr before it (a closed pipe would kill it), nor decide whether it
// was cancelled. Wait returns after the third: nothing may let the runner
// run before it.
//
// Only the first step is on the launch's path (it also
// makes the Go runtime's signal thread): a fatal signal must be caught
// before the process does anything a caller can see. Each of the
// rest costs a round trip to that thread (about 10 µs), while the process
// goes on parsing its options and starting its init or runner.
//
// A signal the caller left ignored (nohup, a non-interactive shell's &)
// stays ignored: registering it would un-ignore it, for corral and, as
// execve resets caught signals, for the runner. The Go runtime keeps an
// inherited SIG_IGN only for SIGHUP, SIGINT and the job-control signals
// (it installs its own handler for the others before any of corral's
// code runs, golang/go#22497), so those are the ones corral can keep.
//
// Where corral's own start already began the first two steps (the corral
// command begins them before main, cmd/corral/internal/early),
// CatchSignals takes that registration over and does only the rest.
func CatchSignals() *Signals {
	first := sigstart.Take()
	if first == nil {
		first = sigstart.Begin()
	}
	s := newSignals(first)
	s.finish()
	return s
}

func newSignals(first *sigstart.Start) *Signals {
	return &Signals{
		children: make(chan os.Signal, 1),
		incoming: first.Incoming,
		first:    first,
		done:     make(chan struct{}),
	}
}

// finish registers the rest in the background, once first's are done.
func (s *Signals) finish() {
	go func() {
		s.first.Wait()
		s.background()
	}()
}

// CatchBlockedSignals is CatchSignals for a process whose starter cloned
// it with the later signals blocked (the pidns init: LaterSignals): those
// of them still blocked on the calling thread, and not ignored, are read
// from a signalfd instead of registered with os/signal. The Go runtime
// keeps a signal the process started with blocked blocked on every thread
// it makes (only os/signal's own thread unblocks what it is asked to
// deliver), so such a signal waits in the kernel, never lost, from the
// process's first instruction, and its registration costs no round trip
// to the runtime's signal thread (44 of them, about 220 system calls, on
// the path to the init's ready). Real-time signals are queued one by one,
// not coalesced as os/signal does.
//
// Whoever sets a thread's mask must keep Blocked in it: a signal a thread
// of this process lets through meets the Go runtime's handler, which
// drops a signal os/signal was not asked for. A thread that must unblock
// them (to fork a child with its caller's mask) calls NotifyBlocked
// first.
func CatchBlockedSignals() *Signals {
	s := newSignals(sigstart.Begin())
	var mask unix.Sigset_t
	_ = unix.PthreadSigmask(unix.SIG_BLOCK, nil, &mask)
	for _, sig := range laterSignals {
		if hasSig(&mask, sig) && !s.first.Ignored[sig] {
			addSig(&s.blocked, sig)
		}
	}
	if s.blocked != (unix.Sigset_t{}) {
		if err := s.readBlocked(); err != nil {
			// No signalfd (a seccomp profile without it): os/signal, as
			// for any process.
			s.notifyBlocked()
		}
	}
	s.finish() // after blocked is set: background reads it
	return s
}

// readBlocked reads s.blocked from a signalfd, through the runtime's
// poller (no thread of its own), and passes each on to incoming.
func (s *Signals) readBlocked() error {
	fd, err := unix.Signalfd(-1, &s.blocked, unix.SFD_NONBLOCK|unix.SFD_CLOEXEC)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), "signalfd")
	go func() {
		// struct signalfd_siginfo is 128 bytes, ssi_signo first.
		var buf [16 * 128]byte
		for {
			n, err := f.Read(buf[:])
			if err != nil {
				return // closed with the process
			}
			for i := 0; i+128 <= n; i += 128 {
				sig := syscall.Signal(binary.NativeEndian.Uint32(buf[i:]))
				s.incoming <- sig // blocks rather than drops: the kernel holds the rest
			}
		}
	}()
	return nil
}

// Blocked is the set of signals this process reads from a signalfd
// (CatchBlockedSignals), which every thread's mask must keep until
// NotifyBlocked: empty for any other registration.
func (s *Signals) Blocked() unix.Sigset_t { return s.blocked }

// NotifyBlocked registers Blocked with os/signal too, so that a thread
// may unblock them (its signals then reach os/signal's channel; the
// signalfd still takes what waits in the kernel). It returns once they
// are registered.
func (s *Signals) NotifyBlocked() { s.notifyBlocked() }

func (s *Signals) notifyBlocked() {
	s.blockedOnce.Do(func() {
		var sigs []os.Signal
		for _, sig := range laterSignals {
			if hasSig(&s.blocked, sig) {
				sigs = append(sigs, sig)
			}
		}
		if len(sigs) > 0 { // Notify with no signal registers every one
			signal.Notify(s.incoming, sigs...)
		}
	})
}

// WaitUrgent returns once SIGPIPE and the signals whose Go default is
// fatal are registered.
func (s *Signals) WaitUrgent() { s.first.Wait() }

// background registers the rest (SIGCHLD among them: whoever waits reaps
// once after Wait, so an exit before it is not missed) and reserves the
// threads, then marks the registration done.
func (s *Signals) background() {
	var wg sync.WaitGroup
	wg.Go(func() {
		signal.Notify(s.children, unix.SIGCHLD)
		later := s.first.Wanted(laterSignals[:])
		later = slices.DeleteFunc(later, func(sig os.Signal) bool { return hasSig(&s.blocked, sig.(syscall.Signal)) })
		if len(later) > 0 { // Notify with no signal registers every one
			signal.Notify(s.incoming, later...)
		}
	})
	wg.Go(func() { reserveThreads(spareThreads) })
	go func() {
		wg.Wait()
		close(s.done)
	}()
}

// spareThreads is how many OS threads a corral process makes for the Go
// runtime beyond those it needed so far. A corral process has three
// goroutines that can sit in a system call (the engine's or the relay's
// own, the os/signal watcher's, and the engine's child watcher, blocked
// in waitid for the whole run: watch.go), and two Ps, so five threads
// without a lock to a goroutine can be busy at once; four made here, with
// the ones the start already made, cover that with room to spare (the
// fork bomb test in test/containment_test.go crashed corral in 3 of 12
// runs with none). The runtime never frees an idle thread: made now, they
// last the process's life.
const spareThreads = 4

// reserveThreads makes the Go runtime own n more OS threads than it
// needed so far, now, while the runner cannot yet have filled a pids.max
// it shares with corral: afterwards the runtime finds an idle thread
// whenever it needs one (a P handed off from a long system call) instead
// of failing to create one, which is fatal (issue 8: "fatal error:
// newosproc"). n goroutines lock a thread each and hold it until all n
// are locked, so n threads exist at once; then each unlocks and returns,
// leaving its thread idle (only a goroutine that returns while locked
// takes its thread down).
func reserveThreads(n int) {
	var locked, release sync.WaitGroup
	locked.Add(n)
	release.Add(1)
	var done sync.WaitGroup
	for range n {
		done.Go(func() {
			runtime.LockOSThread()
			locked.Done()
			release.Wait()
			runtime.UnlockOSThread()
		})
	}
	locked.Wait()
	release.Done()
	done.Wait()
}

// CatchPipe makes a write to a closed pipe return EPIPE in this process
// instead of killing it, which is all a short-lived stage needs.
func CatchPipe() {
	signal.Notify(make(chan os.Signal, 1), unix.SIGPIPE)
}

// drain returns the signals already received, without waiting.
func (s *Signals) drain() []syscall.Signal {
	var out []syscall.Signal
	for {
		select {
		case sig := <-s.incoming:
			out = append(out, sig.(syscall.Signal))
		default:
			return out
		}
	}
}

// Wait returns once every signal is registered.
func (s *Signals) Wait() { <-s.done }

// Children delivers SIGCHLD.
func (s *Signals) Children() <-chan os.Signal { return s.children }

// Incoming delivers every cancelling and forwarded signal.
func (s *Signals) Incoming() <-chan os.Signal { return s.incoming }

// Stop undoes the registration, for a library caller that shares its
// process; a process that exits after the run does not bother.
func (s *Signals) Stop() {
	s.Wait()
	signal.Stop(s.children)
	signal.Stop(s.incoming)
	signal.Stop(s.first.Pipe)
}

// jobStop are the signals a terminal sends to stop a job (Ctrl-Z, and a
// background job touching the terminal). Caught, they would leave corral
// running and the shell waiting on a job that never stops; so whoever
// catches one passes it on and then stops itself, as the shell expects
// (SIGCONT from the shell's fg resumes both).
func jobStop(s syscall.Signal) bool {
	return s == unix.SIGTSTP || s == unix.SIGTTIN || s == unix.SIGTTOU
}

// StopSelfAfter reports whether, having passed on s, a corral process that
// a shell may be waiting on should stop itself. PID 1 never does: its own
// namespace cannot stop it, and nothing waits on it as a job.
func StopSelfAfter(s syscall.Signal) bool { return jobStop(s) && os.Getpid() != 1 }

// onSignal acts on one signal: a cancel is an event for the state
// machine; anything else goes to the runner alone.
func (e *engine) onSignal(s syscall.Signal) {
	if IsCancelling(s) {
		if e.termSignal == 0 {
			e.termSignal = s
		}
		e.cfg.Logf("received %s", unix.SignalName(s))
		if e.phase == phaseTerminating {
			e.cut = true
		}
		e.push(evCancel)
		return
	}
	if e.jobs != nil && e.jobSignal(s) { // terminal mode (jobcontrol.go)
		return
	}
	if !e.acct.runnerReaped {
		// The runner is our unreaped child, so its pid cannot have been
		// reused: a plain kill is exact.
		if err := unix.Kill(e.acct.runner, s); err != nil && !errors.Is(err, unix.ESRCH) {
			e.cfg.Logf("forward %s to runner: %v", unix.SignalName(s), err)
		}
	}
	if StopSelfAfter(s) {
		_ = unix.Kill(e.self, unix.SIGSTOP)
	}
}
