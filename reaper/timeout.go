package reaper

import (
	"time"

	"golang.org/x/sys/unix"
)

// ExitTimeout is the status of a run that Config.Timeout ended, as
// timeout(1) has it (corral's own, internal/exitstatus.Timeout: a test
// holds the two equal).
const ExitTimeout = 124

// deadline is Config.Timeout at work: a timer started with the runner,
// whose channel the loop selects on. Without a timeout there is no timer
// and the channel is nil, which a select never picks: a run without one
// costs nothing.
type deadline struct {
	timer   *time.Timer
	c       <-chan time.Time
	expired bool // the timeout ended the run: the status is ExitTimeout
}

// startDeadline starts the timeout's clock, once the runner exists.
func (e *engine) startDeadline() {
	if e.cfg.Timeout <= 0 {
		return
	}
	e.deadline.timer = time.NewTimer(e.cfg.Timeout)
	e.deadline.c = e.deadline.timer.C
}

// onDeadline cancels the run as if corral had received SIGTERM: the
// signal is recorded as termination_signal (unless a cancel came first)
// and sent to the tree, with the usual grace and SIGKILL after it. A
// runner that has already exited keeps its own status.
func (e *engine) onDeadline() {
	e.deadline.c = nil
	if e.phase != phaseRunning {
		return
	}
	e.deadline.expired = true
	e.cfg.Logf("timeout: %v passed, cancelling the run as by SIGTERM", e.cfg.Timeout)
	if e.termSignal == 0 {
		e.termSignal = unix.SIGTERM
	}
	e.push(evCancel)
}

// stopDeadline releases the timer once the run is over.
func (e *engine) stopDeadline() {
	if e.deadline.timer != nil {
		e.deadline.timer.Stop()
		e.deadline.c = nil
	}
}

// exitCode is the status corral exits with, and the state file's
// runner_exit_code: the runner's, unless the timeout ended the run.
func (e *engine) exitCode() int {
	if e.deadline.expired {
		return ExitTimeout
	}
	return e.acct.runnerExitCode
}
