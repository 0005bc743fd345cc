package runner

import (
	"errors"
	"os"
	"runtime"

	"github.com/corral-sh/corral/internal/exitstatus"
	"github.com/corral-sh/corral/internal/setuperr"
	"github.com/corral-sh/corral/reaper"
	"github.com/corral-sh/corral/sandbox/internal/stage"
	"golang.org/x/sys/unix"
)

// ExecMain turns this process, the exec stage, into the runner. It never
// returns: it either execs or exits with exitstatus.Setup,
// NotExecutable or NotFound after writing the reason to its stage socket.
func ExecMain() {
	// A closed pipe behind a write must not kill the stage; execve resets
	// the handler, so the runner gets SIGPIPE's default, not SIG_IGN.
	reaper.CatchPipe()
	// Capability sets and the bounding set belong to a thread; exec runs
	// on this same thread, so what is applied here is what the runner gets.
	runtime.LockOSThread()
	link, _, msg, err := stage.Open(stage.StepExecStart)
	fail := func(status int, err error) {
		link.Fail(err)
		os.Exit(status)
	}
	if err != nil {
		fail(exitstatus.Setup, err)
	}
	start := msg.(*stage.ExecStart)
	// Namespace modes: the filesystem rules as mounts too (mounts.go),
	// while this thread still holds CAP_SYS_ADMIN and before Landlock,
	// which forbids mounting.
	if start.Privileges.Mounts {
		if err := mountRules(start.Privileges); err != nil {
			fail(exitstatus.Setup, err)
		}
	}
	// Privileges, the TIOCSTI filter and Landlock (confine.go).
	r, err := confineRunner(start.Privileges)
	if err != nil {
		fail(exitstatus.Setup, err)
	}
	if r.listener >= 0 {
		// The engine's checker answers the runner's socket calls; until it
		// has the listener they wait.
		if err := link.Send(stage.MsgExecListener, &stage.Listener{FDs: []int{r.listener}}); err != nil {
			fail(exitstatus.Setup, &setuperr.SetupError{Step: "hand the runner's seccomp listener to the engine", Err: err})
		}
		unix.Close(r.listener)
	}
	// Last, on the thread that execs: the Go runtime unblocked signals on
	// it at start, and the runner must get the caller's mask.
	if err := stage.SetThreadMask(start.Mask); err != nil {
		fail(exitstatus.Setup, &setuperr.SetupError{Step: "restore the caller's signal mask", Err: err})
	}
	err = unix.Exec(start.Path, start.Args, start.Env)
	status := exitstatus.NotExecutable
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		status = exitstatus.NotFound
	}
	failed := &setuperr.SetupError{Step: "runner exec failed: " + start.Path, Err: err}
	if errors.Is(err, unix.E2BIG) {
		failed.Hint = stage.ArgsHint(start.Env, start.Args)
	}
	fail(status, failed)
}
