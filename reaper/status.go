package reaper

import (
	"github.com/corral-sh/corral/internal/exitstatus"
	"golang.org/x/sys/unix"
)

// ExitCode maps a wait status to the status corral exits with: the exit
// code, 128+signal for a killed process (as shells do), and 1 for anything
// else (a stopped or continued status never reaches here in practice, but
// must not be mistaken for success).
func ExitCode(ws unix.WaitStatus) int {
	switch {
	case ws.Exited():
		return ws.ExitStatus()
	case ws.Signaled():
		return exitstatus.SignalBase + int(ws.Signal())
	default:
		return exitstatus.UnknownWait
	}
}
