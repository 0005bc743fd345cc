package sandbox

// The host side of pidns mode: clone the init into new namespaces, pass
// every signal on to it, and exit with its status.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"syscall"

	"github.com/corral-sh/corral/internal/exitstatus"
	"github.com/corral-sh/corral/reaper"
	"github.com/corral-sh/corral/sandbox/internal/probe"
	"github.com/corral-sh/corral/sandbox/internal/stage"
	"github.com/moby/sys/capability"
	"golang.org/x/sys/unix"
)

// initCaps are what a non-root init needs across its execve inside a new
// user namespace (where a non-zero uid loses every capability at exec
// unless it is ambient): mounting /proc and setting the hostname, bringing
// up loopback, and letting the privilege drop shrink the bounding set.
var initCaps = []int{int(capability.CAP_SYS_ADMIN), int(capability.CAP_NET_ADMIN), int(capability.CAP_SETPCAP)}

// runPidns clones an init into new namespaces, forwards signals to it, and
// returns its exit status. A *probe.UnavailableError means the namespaces
// could not be made and nothing of the runner started.
func (h *host) runPidns() (int, error) {
	derived := h.net.forPidns(h.plan) // network.go
	plan := &derived
	userns := plan.Namespaces.User || !stage.HoldsCap(capability.CAP_SYS_ADMIN)
	flags := cloneFlags(plan.Namespaces, userns)
	sys := &syscall.SysProcAttr{
		Cloneflags: flags,
		// The kernel kills the init, and with it the whole namespace, when
		// the thread that started it dies: that thread must be the one
		// that lives as long as corral, hence LockOSThread below.
		Pdeathsig: syscall.SIGKILL,
	}
	if userns {
		// Go writes the id maps through /proc: it must be this PID
		// namespace's, and writable.
		if err := probe.CheckProc(plan); err != nil {
			return exitstatus.Setup, err
		}
		stage.MapCallerIDs(sys, append(append([]int{}, initCaps...), plan.Privileges.Keep...))
	}
	term := openTerminal(h.Proc) // terminal mode (terminal.go)
	// Terminal mode: the init must not sit in the foreground group, or the
	// terminal's Ctrl-C would reach it as a cancel.
	sys.Setpgid = term != nil
	// Never unlocked: this goroutine (main) and its thread live until exit.
	runtime.LockOSThread()
	sigs := h.Signals()

	if err := h.net.listenPublished(); err != nil { // network.go
		return exitstatus.Setup, err
	}
	start := stage.InitStart{Plan: *plan, Terminal: term != nil, Mask: h.Caller.Mask,
		CgroupOwner: os.Getpid()} // the name an operator sees outside
	if userns {
		start.ModeLine = fmt.Sprintf("mode pidns: new user, PID and mount namespaces, uid %d and gid %d mapped to themselves", os.Getuid(), os.Getgid())
	} else {
		start.ModeLine = "mode pidns: new PID and mount namespaces (no user namespace: corral holds CAP_SYS_ADMIN)"
	}
	if plan.Isolated() {
		start.ModeLine += "; network: a network namespace of its own, loopback only" + proxyNote(plan.Net.ProxyAddr)
	}
	pid, link, err := stage.Spawn(stage.InitArg0, stage.MsgInitStart, start, syscall.ProcAttr{Sys: sys}, h.Caller)
	if err != nil {
		h.net.closePublished()
		return exitstatus.Setup, probe.CloneFailure(plan, h.Caller, flags, userns, err)
	}
	ready, err := link.AwaitReplyWith(stage.StepInitReply, func(_ stage.Kind, msg any) error {
		return h.net.serveInside(msg.(*stage.NetListeners))
	})
	follow := term != nil || len(plan.Net.Publish) > 0 // the link stays open after ready
	if !follow || !ready {
		link.Close()
	}
	if !ready {
		h.net.closePublished()
	}
	if !ready {
		if stage.IsProtocolError(err) {
			// The init said what it must not: no fallback, nothing of it
			// may go on.
			_ = unix.Kill(pid, unix.SIGKILL)
			waitInit(pid)
			return exitstatus.Setup, err
		}
		status := waitInit(pid)
		return exitstatus.Setup, probe.ExplainInitFailure(plan, h.Caller, err, status)
	}
	// The init has its own working directory since the clone, and the
	// runner gets it from the init: this process leaves the caller's, so
	// that the run does not pin the caller's mount. Not before ready:
	// --mode auto's fallback runs the runner from here.
	_ = unix.Chdir("/")
	var broken <-chan error
	if term != nil {
		defer term.restore()
	}
	if follow {
		h.net.forwardPublished(link)
		broken = h.followInit(link, pid, term)
	}
	// The init registered every signal before it said ready; what came
	// here meanwhile waited in the channel and is passed on now.
	sigs.Wait()
	return relay(pid, sigs, term, broken)
}

func proxyNote(addr string) string {
	if addr == "" {
		return ""
	}
	return "; egress proxy at " + addr + " inside"
}

// followInit reads the init's reports after ready until its link closes:
// the runner's stops in terminal mode (terminal.go), the connections the
// init made for --publish (network.go). A message the protocol does not
// have there comes out of the returned channel: the run ends with status
// 125 (relay).
func (h *host) followInit(link *stage.Link, init int, term *terminal) <-chan error {
	broken := make(chan error, 1)
	go func() {
		defer link.Close()
		for {
			_, msg, err := link.Receive(stage.StepInitReports)
			if err != nil {
				if err != io.EOF { // EOF: the init exited
					broken <- err
				}
				return
			}
			switch m := msg.(type) {
			case *stage.RunnerStopped:
				if term == nil {
					broken <- &SetupError{Step: "stage protocol: " + stage.StepInitReports.String(),
						Err: &stage.ProtocolError{Kind: stage.MsgRunnerStopped, Want: []stage.Kind{stage.MsgPublishConn}}}
					return
				}
				term.followStop(m, init)
			case *stage.PublishConn:
				h.net.answered(m)
			}
		}
	}()
	return broken
}

// cloneFlags are the namespaces the init is cloned into.
func cloneFlags(ns stage.Namespaces, userns bool) uintptr {
	flags := uintptr(unix.CLONE_NEWPID | unix.CLONE_NEWNS)
	if userns {
		flags |= unix.CLONE_NEWUSER
	}
	if ns.Net {
		flags |= unix.CLONE_NEWNET
	}
	if ns.IPC {
		flags |= unix.CLONE_NEWIPC
	}
	if ns.UTS || ns.Hostname != "" {
		flags |= unix.CLONE_NEWUTS
	}
	return flags
}

// waitInit waits for an init that failed before it was ready.
func waitInit(pid int) int {
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, 0, nil)
		if !errors.Is(err, unix.EINTR) {
			return reaper.ExitCode(ws)
		}
	}
}

// relay passes every signal on to the init until the init exits, and
// returns its status. It waits with wait4(-1) on SIGCHLD rather than for
// the init alone: as PID 1 (corral --mode pidns as a container's
// entrypoint) the kernel hands this process every orphan of its
// namespace (a `docker exec … &` whose parent left), and they must be
// reaped, not left as zombies. No goroutine blocks in a syscall here.
// term is terminal mode's, or nil; broken says the init's link carried a
// message out of the protocol, which ends the run with status 125.
func relay(init int, sigs *reaper.Signals, term *terminal, broken <-chan error) (int, error) {
	for {
		if status, done := reapUntilInit(init); done {
			return status, nil
		}
		select {
		case <-sigs.Children():
		case err := <-broken:
			_ = unix.Kill(init, unix.SIGKILL) // our unreaped child: its pid cannot be reused
			for {
				if _, done := reapUntilInit(init); done {
					return exitstatus.Setup, err
				}
				<-sigs.Children()
			}
		case s := <-sigs.Incoming():
			if term != nil { // terminal mode (terminal.go)
				term.relay(init, s.(syscall.Signal))
				continue
			}
			// The init is our unreaped child: its pid cannot be reused.
			_ = unix.Kill(init, s.(syscall.Signal))
			if reaper.StopSelfAfter(s.(syscall.Signal)) {
				_ = unix.Kill(os.Getpid(), unix.SIGSTOP)
			}
		}
	}
}

// reapUntilInit reaps every child that has exited and reports the init's
// status once it is among them.
func reapUntilInit(init int) (int, bool) {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG|unix.WALL, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ECHILD):
			// Only this loop reaps, so the init cannot have gone unseen;
			// never wait forever on a child that is not there.
			return 1, true
		case err != nil || pid <= 0:
			return 0, false
		case pid == init:
			return reaper.ExitCode(ws), true
		}
	}
}
