package sandbox

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"

	"github.com/corral-sh/corral/reaper"
	"github.com/moby/sys/capability"
	"golang.org/x/sys/unix"
)

const initArg0 = "corral [init]"

// initCaps are what a non-root init needs across its execve inside a new
// user namespace (where a non-zero uid loses every capability at exec
// unless it is ambient): mounting /proc and setting the hostname, bringing
// up loopback, and letting the privilege drop shrink the bounding set.
var initCaps = []int{int(capability.CAP_SYS_ADMIN), int(capability.CAP_NET_ADMIN), int(capability.CAP_SETPCAP)}

// runPidns clones an init into new namespaces, forwards signals to it, and
// returns its exit status. An *unavailableError means the namespaces could
// not be made and nothing of the runner started.
func runPidns(o *Options) (int, error) {
	userns := o.Namespaces.User || !holdsCap(capability.CAP_SYS_ADMIN)
	flags := uintptr(unix.CLONE_NEWPID | unix.CLONE_NEWNS)
	if userns {
		flags |= unix.CLONE_NEWUSER
	}
	if o.Namespaces.Net {
		flags |= unix.CLONE_NEWNET
	}
	if o.Namespaces.IPC {
		flags |= unix.CLONE_NEWIPC
	}
	if o.Namespaces.UTS || o.Namespaces.Hostname != "" {
		flags |= unix.CLONE_NEWUTS
	}
	sys := &syscall.SysProcAttr{
		Cloneflags: flags,
		// The kernel kills the init, and with it the whole namespace, when
		// the thread that started it dies: that thread must be the one
		// that lives as long as corral, hence LockOSThread below.
		Pdeathsig: syscall.SIGKILL,
	}
	if userns {
		mapCallerIDs(sys, append(append([]int{}, initCaps...), o.Privileges.Keep...))
	}
	term := openTerminal(o) // terminal mode (terminal.go)
	o.Terminal = term != nil
	// Terminal mode: the init must not sit in the foreground group, or the
	// terminal's Ctrl-C would reach it as a cancel.
	sys.Setpgid = o.Terminal
	// Never unlocked: this goroutine (main) and its thread live until exit.
	runtime.LockOSThread()
	sigs := o.signals()

	o.CgroupOwner = os.Getpid() // the name an operator sees outside (cgroup.go)
	pid, link, err := spawnStage(initArg0, msgInitStart, initStart{Options: *o, Mask: callerMask}, syscall.ProcAttr{Sys: sys})
	if err != nil {
		return 125, cloneFailure(o, flags, userns, err)
	}
	ready, err := link.awaitReply()
	if term == nil || !ready {
		link.Close()
	}
	if !ready {
		status := waitInit(pid)
		return 125, explainInitFailure(o, err, status)
	}
	if userns {
		o.logf("mode pidns: new user, PID and mount namespaces, uid %d and gid %d mapped to themselves", os.Getuid(), os.Getgid())
	} else {
		o.logf("mode pidns: new PID and mount namespaces (no user namespace: corral holds CAP_SYS_ADMIN)")
	}
	if term != nil { // terminal mode: the init reports the runner's stops (terminal.go)
		go term.followInit(link, pid)
		defer term.restore()
	}
	// The init registered every signal before it said ready; what came
	// here meanwhile waited in the channel and is passed on now.
	sigs.Wait()
	return relay(pid, sigs, term), nil
}

// initFailure is why the init did not become ready: the failure it
// reported, or how it ended without one.
func initFailure(err error, status int) *SetupError {
	var setup *SetupError
	switch {
	case errors.As(err, &setup):
		return setup
	case err == nil:
		err = fmt.Errorf("exited with status %d before it was ready", status)
	}
	return &SetupError{Step: "start the pidns init", Err: err}
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
// term is terminal mode's, or nil.
func relay(init int, sigs *reaper.Signals, term *terminal) int {
	for {
		if status, done := reapUntilInit(init); done {
			return status
		}
		select {
		case <-sigs.Children():
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

// mapCallerIDs maps the caller's uid and gid to themselves in the new user
// namespace (as bwrap does, so tools that look up their passwd entry keep
// working), with setgroups denied as an unprivileged gid map requires. A
// non-zero uid loses every capability at the child's execve unless it is
// ambient, so the ones the child needs are carried that way.
func mapCallerIDs(sys *syscall.SysProcAttr, ambient []int) {
	uid, gid := os.Getuid(), os.Getgid()
	sys.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
	sys.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	sys.GidMappingsEnableSetgroups = false
	if uid != 0 {
		for _, c := range ambient {
			sys.AmbientCaps = append(sys.AmbientCaps, uintptr(c))
		}
	}
}

func cloneFlagNames(flags uintptr) string {
	var names []string
	for _, f := range []struct {
		flag uintptr
		name string
	}{
		{unix.CLONE_NEWUSER, "CLONE_NEWUSER"}, {unix.CLONE_NEWPID, "CLONE_NEWPID"}, {unix.CLONE_NEWNS, "CLONE_NEWNS"},
		{unix.CLONE_NEWNET, "CLONE_NEWNET"}, {unix.CLONE_NEWIPC, "CLONE_NEWIPC"}, {unix.CLONE_NEWUTS, "CLONE_NEWUTS"},
	} {
		if flags&f.flag != 0 {
			names = append(names, f.name)
		}
	}
	return "clone(" + strings.Join(names, "|") + ")"
}
