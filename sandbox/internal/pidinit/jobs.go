package pidinit

import (
	"syscall"

	"github.com/corral-sh/corral/sandbox/internal/stage"
	"golang.org/x/sys/unix"
)

// initJobs is the init's reaper.JobControl in terminal mode: PID 1 cannot
// be stopped from inside its namespace, and the caller's shell waits on the
// host side, so a stop of the runner is reported there (RunnerStopped),
// with whether the terminal's foreground is inside the namespace (a group
// outside reads as 0). The host side's half is package sandbox's
// terminal.go.
type initJobs struct {
	link *stage.Link
	said <-chan struct{} // closed once "ready" is on the link: the host reads that first
}

func (j initJobs) RunnerStopped(sig syscall.Signal) bool {
	<-j.said
	fg, err := unix.IoctlGetInt(0, unix.TIOCGPGRP)
	// A host side that is gone has nobody to stop: nothing to do.
	_ = j.link.Send(stage.MsgRunnerStopped, stage.RunnerStopped{Signal: int(sig), Inside: err == nil && fg > 0})
	return false
}

// Continued does nothing in the init: the host side hands the terminal back
// before it passes SIGCONT on.
func (initJobs) Continued() {}
