package sandbox

// The host side of pidns mode: clone the init into new namespaces, pass
// every signal on to it, and exit with its status.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"syscall"

	"github.com/corral-sh/corral/internal/exitstatus"
	"github.com/corral-sh/corral/internal/setuperr"
	"github.com/corral-sh/corral/reaper"
	"github.com/corral-sh/corral/sandbox/internal/explain"
	"github.com/corral-sh/corral/sandbox/internal/plan"
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
// returns its exit status. A *explain.UnavailableError means the
// namespaces could not be made and nothing of the runner started.
func runPidns(p *stage.Proc, n *network) (int, error) {
	run, err := n.forPidns() // network.go
	if err != nil {
		return exitstatus.Setup, err
	}
	defer n.abandon() // what the init did not take over (network.go)
	sys, userns, err := initAttr(&run)
	if err != nil {
		return exitstatus.Setup, err
	}
	term := openTerminal(p) // terminal mode (terminal.go)
	// Terminal mode: the init must not sit in the foreground group, or the
	// terminal's Ctrl-C would reach it as a cancel.
	sys.Setpgid = term != nil
	// Never unlocked: this goroutine (main) and its thread live until exit.
	runtime.LockOSThread()
	sigs := p.Signals()
	start := stage.InitStart{Plan: run, Terminal: term != nil, Mask: p.Caller.Mask,
		CgroupOwner: os.Getpid(), // the name an operator sees outside
		ModeLine:    modeLine(&run, userns)}
	pid, link, err := spawnInit(start, sys, p.Caller)
	if err != nil {
		return exitstatus.Setup, explain.CloneFailure(&run, p.Caller, sys.Cloneflags, userns, err)
	}
	if ready, err := link.AwaitReplyWith(stage.StepInitReply, n.fromInit); !ready {
		link.Close()
		return exitstatus.Setup, initFailed(&run, p.Caller, pid, err)
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
	if n.attach(link, &run) || term != nil { // the link stays open after ready
		broken = followInit(link, pid, term, n)
	} else {
		link.Close()
	}
	// The init registered every signal before it said ready; what came
	// here meanwhile waited in the channel and is passed on now.
	sigs.Wait()
	return relaySignals(pid, sigs, term, broken)
}

// spawnInit clones the init from this thread (runPidns locked it) with
// the later signals blocked, besides what the caller blocked: the child
// of a Go fork starts with its forking thread's mask, and the init reads
// them from a signalfd (reaper.CatchBlockedSignals) instead of
// registering each with os/signal, a round trip to the Go runtime's
// signal thread apiece. The runner still gets the caller's mask
// (InitStart.Mask). This thread's mask is its own again after the clone.
func spawnInit(start stage.InitStart, sys *syscall.SysProcAttr, caller stage.Caller) (int, *stage.Link, error) {
	later, old := reaper.LaterSignals(), unix.Sigset_t{}
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &later, &old); err == nil {
		defer unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	}
	return stage.Spawn(stage.InitArg0, stage.MsgInitStart, start, syscall.ProcAttr{Sys: sys}, caller)
}

// initAttr is how the init is cloned: its namespaces, and, in a new user
// namespace, the caller's ids mapped to themselves.
func initAttr(run *plan.Plan) (*syscall.SysProcAttr, bool, error) {
	userns := run.Namespaces.User || !stage.HoldsCap(capability.CAP_SYS_ADMIN)
	sys := &syscall.SysProcAttr{
		Cloneflags: cloneFlags(run.Namespaces, userns),
		// The kernel kills the init, and with it the whole namespace, when
		// the thread that started it dies: that thread must be the one
		// that lives as long as corral (runPidns locks it).
		Pdeathsig: syscall.SIGKILL,
	}
	if userns {
		// Go writes the id maps through /proc: it must be this PID
		// namespace's, and writable.
		if err := explain.CheckProc(run); err != nil {
			return nil, false, err
		}
		caps := append(append([]int{}, initCaps...), run.Privileges.Keep...)
		if len(run.Net.Nameservers) > 0 {
			// corral's DNS responder listens on port 53 inside.
			caps = append(caps, int(capability.CAP_NET_BIND_SERVICE))
		}
		if len(run.Privileges.Overlays) > 0 {
			// overlayfs makes its work folder mode 000 and checks it
			// with the mounter's credentials: the exec stage needs
			// these to mount the layer (only the caller's own files are
			// mapped, and the runner drops them as every other).
			caps = append(caps, int(capability.CAP_DAC_OVERRIDE), int(capability.CAP_FOWNER))
		}
		stage.MapCallerIDs(sys, caps)
	}
	return sys, userns, nil
}

// modeLine is -v's line naming the mode, which the init says once its
// namespaces are set up.
func modeLine(run *plan.Plan, userns bool) string {
	line := "mode pidns: new PID and mount namespaces (no user namespace: corral holds CAP_SYS_ADMIN)"
	if userns {
		line = fmt.Sprintf("mode pidns: new user, PID and mount namespaces, uid %d and gid %d mapped to themselves", os.Getuid(), os.Getgid())
	}
	if run.Isolated() {
		line += "; network: a network namespace of its own, loopback only"
		if run.Net.ProxyAddr != "" {
			line += "; egress proxy at " + run.Net.ProxyAddr + " inside"
		}
		if len(run.Net.Nameservers) > 0 {
			line += "; DNS answered by corral at " + strings.Join(run.Net.Nameservers, ", ") + " port 53 inside, TCP connects off loopback through corral's relay"
		}
	}
	return line
}

// initFailed reaps an init that did not get ready and says why.
func initFailed(run *plan.Plan, caller stage.Caller, pid int, err error) error {
	if stage.IsProtocolError(err) {
		// The init said what it must not: no fallback, nothing of it may
		// go on.
		_ = unix.Kill(pid, unix.SIGKILL)
		waitInit(pid)
		return err
	}
	return explain.ExplainInitFailure(run, caller, err, waitInit(pid))
}

// followInit reads the init's reports after ready until its link closes:
// the runner's stops in terminal mode (terminal.go), the socket calls its
// checker refused (network.go), whether a --publish port's server listens
// (publish.go); the answers to the
// host side's requests go to whoever asked (stage.Link.Call). A message
// the protocol does not have there comes out of the returned channel: the
// run ends with status 125 (relaySignals).
func followInit(link *stage.Link, init int, term *terminal, n *network) <-chan error {
	broken := make(chan error, 1)
	followed := make(chan struct{})
	n.followed = followed
	go func() {
		defer close(followed) // every report read: the summary may go (summary.go)
		defer link.Close()
		for {
			_, msg, err := link.Receive(stage.StepInitReports)
			if err != nil {
				if err != io.EOF { // EOF: the init exited
					broken <- err
				}
				return
			}
			if r, ok := msg.(*stage.Refused); ok {
				n.onRefused(*r)
				continue
			}
			if r, ok := msg.(*stage.RelayRoute); ok {
				go n.relayRoute(link, r) // network.go: it dials
				continue
			}
			if s, ok := msg.(*stage.PublishState); ok {
				n.publishState(*s) // publish.go
				continue
			}
			stop := msg.(*stage.RunnerStopped)
			if term == nil {
				broken <- &setuperr.SetupError{Step: "stage protocol: " + stage.StepInitReports.String(),
					Err: &stage.ProtocolError{Kind: stage.MsgRunnerStopped, Want: []stage.Kind{stage.MsgPublishConn}}}
				return
			}
			term.followStop(stop, init)
		}
	}()
	return broken
}

// cloneFlags are the namespaces the init is cloned into.
func cloneFlags(ns plan.Namespaces, userns bool) uintptr {
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

// relaySignals passes every signal on to the init until the init exits, and
// returns its status. It waits with wait4(-1) on SIGCHLD rather than for
// the init alone: as PID 1 (corral --mode pidns as a container's
// entrypoint) the kernel hands this process every orphan of its
// namespace (a `docker exec … &` whose parent left), and they must be
// reaped, not left as zombies. No goroutine blocks in a syscall here.
// term is terminal mode's, or nil; broken says the init's link carried a
// message out of the protocol, which ends the run with status 125.
func relaySignals(init int, sigs *reaper.Signals, term *terminal, broken <-chan error) (int, error) {
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
				term.passSignal(init, s.(syscall.Signal))
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
