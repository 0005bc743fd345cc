package reaper

import (
	"errors"
	"github.com/corral-sh/corral/internal/proc"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// JobControl puts the engine in terminal mode (docs/terminal.md): the runner
// was started in a process group of its own that holds the terminal's
// foreground, so the terminal's Ctrl-Z stops that group and never reaches
// corral. The engine then follows the runner's stops (wait4 WUNTRACED) and
// lets whoever the caller's shell waits on stop as the job; the caller of
// Run says who that is and owns the terminal itself.
type JobControl interface {
	// RunnerStopped is called when wait4 reports the runner stopped by
	// sig, before anything else happens. stopCorral true: this process is
	// the one the caller's shell waits on, and the engine stops it now
	// (StopJob), then calls Continued and continues the runner's group.
	// false: the stop is passed on some other way (a pidns init reports
	// it to the host side, which stops itself), and the engine continues
	// the runner's group at the next SIGCONT it receives.
	RunnerStopped(sig syscall.Signal) (stopCorral bool)
	// Continued runs whenever corral was continued (after its own stop, and
	// on every SIGCONT it receives), before the runner's group is
	// continued: the moment to hand the terminal back to that group when
	// corral's own group holds the foreground (the shell's fg).
	Continued()
}

// jobControl is the engine's side of terminal mode.
type jobControl struct {
	JobControl
	pending bool // the runner's group waits for corral's next SIGCONT
}

// runnerStopped acts on wait4's report that the runner stopped by sig.
func (e *engine) runnerStopped(sig syscall.Signal) {
	j := e.jobs
	if e.phase != phaseRunning && e.phase != phaseStarting {
		// Starting: the runner exists (wait4 reported it) and the phase
		// moves to running once its start is processed. Teardown signals the tree, SIGCONT included: stopping the job
		// now would only hold the teardown up.
		return
	}
	e.cfg.Logf("runner stopped by %s", unix.SignalName(sig))
	if !j.RunnerStopped(sig) {
		j.pending = true
		return
	}
	StopJob(sig)
	j.Continued()
	e.continueRunner()
}

// jobSignal handles, in terminal mode, the signals whose meaning changes
// there; it reports whether s needs nothing more.
func (e *engine) jobSignal(s syscall.Signal) bool {
	j := e.jobs
	switch {
	case s == unix.SIGCONT:
		j.Continued()
		if j.pending {
			j.pending = false
			e.continueRunner()
			return true
		}
	case jobStop(s):
		// Sent with kill(2): the runner gets it, and when it stops, its
		// stop stops corral as a Ctrl-Z would (runnerStopped). Stopping
		// corral here too would stop it a second time once continued.
		if !e.acct.runnerReaped {
			_ = unix.Kill(e.acct.runner, s)
		}
		return true
	}
	return false
}

// continueRunner continues the runner's process group: corral made it for
// the runner (its pgid is the runner's pid), and a stopped job is
// continued as a group, as a shell does.
func (e *engine) continueRunner() {
	if e.acct.runnerReaped {
		return
	}
	if err := unix.Kill(-e.acct.runner, unix.SIGCONT); err != nil && !errors.Is(err, unix.ESRCH) {
		e.cfg.Logf("continue the runner's process group: %v", err)
	}
}

// StopJob stops corral's process group with sig, as the terminal would
// have had the runner's group not held the foreground, and returns once
// corral has been continued. Ctrl-Z is a signal to the foreground group;
// passing it on to one's own group with the default action is what less
// and vim do too (kill(0, SIGTSTP)), and it stops a caller without job
// control (bash -c, make) along with corral, so the shell above sees its
// job stop. A stop the kernel discards (an orphaned process group, which
// no shell would continue) returns at once. Any signal but SIGTSTP,
// SIGTTIN and SIGTTOU stops as SIGTSTP: only those are discarded then.
// PID 1 is never stopped, nothing waits on it as a job; nor is a corral
// that inherited sig ignored.
//
// A process that catches sig must have registered it (signal.Notify)
// before StopJob runs.
func StopJob(sig syscall.Signal) {
	if !jobStop(sig) {
		sig = unix.SIGTSTP
	}
	if os.Getpid() == 1 || signal.Ignored(sig) {
		return
	}
	// A caught stop signal stops nothing, and the Go runtime keeps its
	// handler installed even after signal.Reset: give sig its default
	// action for the moment it takes, then put the runtime's handler
	// back exactly as it was.
	var dfl, old sigaction
	if err := rtSigaction(sig, &dfl, &old); err != nil {
		return
	}
	defer rtSigaction(sig, &old, nil)
	if err := unix.Kill(0, sig); err != nil {
		return
	}
	// kill(2) queued sig for this process before returning. It stays
	// pending until a thread takes it: then either the process stops
	// until SIGCONT (which also flushes any stop signal still pending), or
	// the kernel discards it. Either way, once it is no longer pending
	// corral runs again, and the runner's group may go on.
	for pendingSignal(sig) {
		time.Sleep(time.Millisecond)
	}
}

// sigaction is the kernel's struct sigaction on amd64 and arm64 (both have
// sa_restorer), with the 64-bit mask rt_sigaction takes.
type sigaction struct {
	handler  uintptr // 0: SIG_DFL
	flags    uint64
	restorer uintptr
	mask     uint64
}

func rtSigaction(sig syscall.Signal, act, old *sigaction) error {
	_, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig),
		uintptr(unsafe.Pointer(act)), uintptr(unsafe.Pointer(old)), unsafe.Sizeof(act.mask), 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// pendingSignal reports whether sig is pending for the whole process, as
// /proc/self/status's ShdPnd says. An unreadable status reads as not
// pending: StopJob must never wait for ever.
func pendingSignal(sig syscall.Signal) bool {
	status, err := proc.ReadStatus("/proc/self/status")
	if err != nil {
		return false
	}
	mask, err := strconv.ParseUint(status["ShdPnd"], 16, 64)
	return err == nil && mask&(1<<(uint(sig)-1)) != 0
}
