package runner

import (
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"github.com/corral-sh/corral/sandbox/internal/plan"
	"github.com/corral-sh/corral/sandbox/internal/stage"
	"golang.org/x/sys/unix"
)

// start is how the engine's process starts the runner of one run.
type start struct {
	p        *stage.Proc
	plan     *plan.Plan
	terminal bool
	thread   *starter // nil: the exec stage only
}

// Prepare makes the run's Starter and, when the run can use one, the
// starter thread, which drops the runner's privileges while the engine's
// process sets up.
func Prepare(p *stage.Proc, plan *plan.Plan, terminal bool) stage.Starter {
	s := &start{p: p, plan: plan, terminal: terminal}
	if len(plan.Privileges.Rlimits) == 0 && MayForkFromEngine(plan) {
		s.thread = newStarter(p, plan, terminal)
	}
	return s
}

// Start starts the runner: from the starter thread when there is one, else
// (or when that path cannot start it) through the exec stage. Either way
// the runner's first instruction comes after every signal is registered
// (reaper.Config.StartHolds).
func (s *start) Start(cg stage.Cgroup) (stage.Started, error) {
	if s.thread != nil {
		r := s.thread.start(cg.FD())
		if r.cgroupRefused != nil {
			cg.Refused(r.cgroupRefused)
		}
		if r.ok {
			return stage.Started{PID: r.pid, Listener: r.listener}, nil
		}
		if r.listener >= 0 {
			unix.Close(r.listener) // the exec stage makes the runner's own
		}
	}
	s.p.Signals().Wait()
	return s.execStage(cg)
}

// execStage starts the exec stage as a child of the calling process and
// waits only until the stage has either exec'd the runner (EOF on the
// stage socket) or reported why not. It never waits for the process: the
// engine reaps it.
func (s *start) execStage(cg stage.Cgroup) (stage.Started, error) {
	plan := s.plan
	msg := stage.ExecStart{Path: plan.Path, Args: plan.Args, Env: plan.Env, Privileges: plan.Privileges, Mask: s.p.Caller.Mask}
	attr := syscall.ProcAttr{Dir: plan.Dir, Sys: runnerSys(s.terminal)}
	// Into the run's cgroup from the first instruction; a refusal of that
	// is tried again outside it.
	into := attr
	fd := cg.FD()
	into.Sys = withCgroup(attr.Sys, fd)
	pid, link, err := stage.Spawn(stage.ExecArg0, stage.MsgExecStart, msg, into, s.p.Caller)
	if err != nil && fd >= 0 && refused(err) {
		refusal := err
		if pid, link, err = stage.Spawn(stage.ExecArg0, stage.MsgExecStart, msg, attr, s.p.Caller); err == nil {
			cg.Refused(refusal)
		}
	}
	if err != nil {
		if plan.Dir != "" {
			err = fmt.Errorf("in working directory %s: %w", plan.Dir, err)
		}
		return stage.Started{Listener: -1}, err
	}
	defer link.Close()
	started := stage.Started{PID: pid, Listener: -1}
	// The stage sends the runner's seccomp listener, if it made one,
	// before its execve.
	_, err = link.AwaitReplyWith(stage.StepExecReply, func(_ stage.Kind, msg any) error {
		started.Listener = msg.(*stage.Listener).FDs[0]
		return nil
	})
	return started, err
}

// starter is the OS thread the runner is forked from, straight from the
// engine: no re-exec of corral, so no second Go runtime start. It drops
// what the runner must not have as soon as it exists, while the engine
// sets up (capabilities, the bounding set and no_new_privs belong to a
// thread, and a forked child copies its thread's), then waits to fork.
// It is then parked, locked, for the life of the process: a locked
// goroutine that returned would take its thread down, and the runtime
// would have to make another later, which a runner that filled its
// cgroup's pids.max would refuse it. Rlimits belong to the whole process,
// so a run that sets them takes the exec stage instead.
type starter struct {
	fork chan int // the cgroup to fork into, or -1
	done chan starterResult
}

type starterResult struct {
	pid int
	ok  bool // false: privileges or exec failed; the exec stage starts the runner, or reports why not (125, 126, 127)
	// cgroupRefused is the kernel's refusal to start the runner into its
	// cgroup, when starting it outside worked.
	cgroupRefused error
	listener      int // the runner's seccomp listener; -1: none
}

func newStarter(p *stage.Proc, plan *plan.Plan, terminal bool) *starter {
	s := &starter{fork: make(chan int, 1), done: make(chan starterResult, 1)}
	privileges, sigs, mask := plan.Privileges, p.Signals(), p.Caller.Mask
	path, args, dir, env, sys := plan.Path, plan.Args, plan.Dir, plan.Env, runnerSys(terminal)
	g := runnerGate(sigs, mask)
	go func() {
		runtime.LockOSThread() // never unlocked, and this goroutine never returns
		// Privileges, then the TIOCSTI filter and a policy of TCP ports
		// (confine.go); then the caller's mask, which ForkExec gives the
		// child from the forking thread (this one forks nothing else),
		// less what this process reads from a signalfd (gate).
		restriction, err := confineRunner(privileges)
		if err == nil {
			err = stage.SetThreadMask(g.thread)
		}
		hold := !privileges.AllowNewPrivs && !restriction.traced
		if err == nil && !hold && g.unblock != nil {
			go sigs.NotifyBlocked() // what the fork without a hold needs, begun now
		}
		cg := <-s.fork
		if err == nil {
			if !restriction.filtered {
				p.Logf("--allow-new-privs without CAP_SYS_ADMIN: the kernel takes no seccomp filter, so the runner may use TIOCSTI")
			}
			r := forkHeld(path, args, dir, env, sys, cg, hold, g)
			r.listener = restriction.listener
			s.done <- r
		} else {
			s.done <- starterResult{listener: restriction.listener}
		}
		select {}
	}()
	return s
}

// gate is what the runner's first instruction waits for, and the signal
// mask it starts with.
type gate struct {
	ready func() // every signal of this process registered
	// thread is the starter thread's mask: the runner's (the caller's),
	// and the signals this process reads from a signalfd
	// (reaper.Signals.Blocked), which no thread of it may let through.
	thread unix.Sigset_t
	// runner, when not nil, is the runner's mask where it differs from
	// thread: a held runner gets it with PTRACE_SETSIGMASK before its
	// first instruction, and unblock makes it the thread's own for a fork
	// without a hold.
	runner  *unix.Sigset_t
	unblock func() error
}

func runnerGate(sigs interface {
	Wait()
	Blocked() unix.Sigset_t
	NotifyBlocked()
}, mask unix.Sigset_t) gate {
	g := gate{ready: sigs.Wait, thread: mask}
	blocked := sigs.Blocked()
	for i := range g.thread.Val {
		g.thread.Val[i] |= blocked.Val[i]
	}
	if g.thread != mask {
		g.runner = &mask
		g.unblock = func() error {
			// Registered from a goroutine of its own: from this locked
			// thread each round trip to the runtime's signal thread
			// would be a hand-off between two locked threads.
			done := make(chan struct{})
			go func() {
				sigs.NotifyBlocked()
				close(done)
			}()
			<-done
			return stage.SetThreadMask(mask)
		}
	}
	return g
}

// start forks the runner from the starter thread, into the cgroup cg
// (-1: none).
func (s *starter) start(cg int) starterResult {
	s.fork <- cg
	return <-s.done
}

// forkHeld forks and execs the runner and lets it run its first
// instruction only once ready returns. The exec (the kernel loading the
// runner) is the slow part of a start; done under ptrace (PTRACE_TRACEME,
// so the runner stops at the SIGTRAP of its execve, before any of its
// code), it overlaps with what ready waits for, and the runner goes on
// from PTRACE_DETACH without ever seeing the SIGTRAP. Only with hold,
// which the starter gives only with no_new_privs, under which a traced
// exec grants exactly what an untraced one does (a setuid bit is ignored
// either way), and only when no debugger traces the starter (under
// strace -f the child is strace's from its fork, and PTRACE_TRACEME would
// fail after a wasted fork and exec). Without it, and where ptrace is
// refused (a seccomp profile, Yama's ptrace_scope 2 or 3), the runner is
// forked once ready returned. It runs on the thread that will stay the
// tracer: the calling goroutine must be locked to it.
//
// cg (-1: none) is the run's cgroup, which the runner starts in (clone3's
// CLONE_INTO_CGROUP, in the same SysProcAttr as the ptrace request); where
// the kernel refuses that and a start outside works, the result says so.
func forkHeld(path string, args []string, dir string, env []string, sys *syscall.SysProcAttr, cg int, hold bool, g gate) starterResult {
	untraced := &syscall.SysProcAttr{}
	if sys != nil {
		*untraced = *sys
	}
	traced := *untraced
	traced.Ptrace = true
	attr := &syscall.ProcAttr{Dir: dir, Env: env, Files: []uintptr{0, 1, 2}, Sys: untraced}
	var r starterResult
	fork := func() (int, error) {
		pid, refusal, err := forkInto(path, args, attr, cg)
		if refusal != nil {
			r.cgroupRefused, cg = refusal, -1
		}
		return pid, err
	}
	if hold {
		attr.Sys = &traced
		pid, err := fork()
		if err == nil && releaseHeld(pid, g) {
			r.pid, r.ok = pid, true
			return r
		}
		if err != nil && !refused(err) {
			return r // an exec failure: the exec stage reports it
		}
		attr.Sys = untraced
	}
	if g.unblock != nil {
		if err := g.unblock(); err != nil {
			return r // the exec stage sets the mask itself
		}
	}
	g.ready()
	pid, err := fork()
	r.pid, r.ok = pid, err == nil
	if g.unblock != nil {
		_ = stage.SetThreadMask(g.thread) // parked from now on: block them again
	}
	return r
}

// releaseHeld waits for the held runner's stop at its execve, then for
// ready, gives it its mask (g.runner) and detaches from it. A runner
// killed before it stopped is left as it is, unreaped, for the engine
// (WNOWAIT). It reports false when the mask could not be set: the runner
// was killed and reaped before its first instruction, and the caller
// starts it again without a hold.
func releaseHeld(pid int, g gate) bool {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WSTOPPED|unix.WNOWAIT|unix.WALL, nil)
		if err != unix.EINTR {
			if err != nil {
				return true
			}
			break
		}
	}
	g.ready()
	const cldTrapped = 4 // si_code of a ptrace stop (<asm-generic/siginfo.h>)
	if info.Code != cldTrapped {
		return true
	}
	if g.runner != nil {
		// sizeof(sigset_t) is the kernel's 8 bytes.
		_, _, errno := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SETSIGMASK, uintptr(pid), 8, uintptr(unsafe.Pointer(g.runner)), 0, 0)
		if errno != 0 {
			_ = unix.Kill(pid, unix.SIGKILL)
			var ws unix.WaitStatus
			for {
				if _, err := unix.Wait4(pid, &ws, unix.WALL, nil); err != unix.EINTR {
					return false
				}
			}
		}
	}
	// data 0: the SIGTRAP is not delivered.
	_ = unix.PtraceDetach(pid)
	return true
}

// runnerSys is what the runner's process needs in terminal mode: its own
// process group, made the terminal's foreground in the child before execve
// (all signals are blocked there, so the background group's tcsetpgrp
// raises no SIGTTOU).
func runnerSys(terminal bool) *syscall.SysProcAttr {
	if !terminal {
		return nil
	}
	return &syscall.SysProcAttr{Setpgid: true, Foreground: true, Ctty: 0}
}

// withCgroup returns a copy of sys (nil: none) that starts the process
// into the cgroup fd; fd < 0: sys itself.
func withCgroup(sys *syscall.SysProcAttr, fd int) *syscall.SysProcAttr {
	if fd < 0 {
		return sys
	}
	out := &syscall.SysProcAttr{}
	if sys != nil {
		*out = *sys
	}
	out.UseCgroupFD, out.CgroupFD = true, fd
	return out
}

// refused reports an error with which the kernel (or a seccomp filter)
// refuses a start rather than the runner failing its exec: clone3 filtered
// (ENOSYS), CLONE_INTO_CGROUP denied (EPERM, EACCES), ptrace denied.
func refused(err error) bool {
	return errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENOSYS)
}

// forkInto is syscall.ForkExec into the cgroup fd (fd < 0: none). A
// refusal with the cgroup is tried again without it; when that second try
// is what worked, the cgroup was the cause: refusal is the first try's
// error, and the caller gives the cgroup up.
func forkInto(path string, args []string, attr *syscall.ProcAttr, fd int) (pid int, refusal, err error) {
	if fd >= 0 {
		into := *attr
		into.Sys = withCgroup(attr.Sys, fd)
		pid, err = syscall.ForkExec(path, args, &into)
		if err == nil || !refused(err) {
			return pid, nil, err
		}
		refusal = err
	}
	pid, err = syscall.ForkExec(path, args, attr)
	if err != nil {
		refusal = nil
	}
	return pid, refusal, err
}
