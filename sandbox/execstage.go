package sandbox

import (
	"errors"
	"fmt"
	"github.com/corral-sh/corral/internal/proc"
	"os"
	"runtime"
	"strconv"
	"syscall"

	"github.com/corral-sh/corral/reaper"
	"github.com/moby/sys/capability"
	"golang.org/x/sys/unix"
)

const execStageArg0 = "corral [exec]"

// startRunner starts the runner: from the starter thread when there is
// one, else (or when that path cannot start it) through the exec stage.
// Either way the runner's first instruction comes after every signal is
// registered (reaper.Config.StartHolds).
func startRunner(o *Options) (int, error) {
	if o.starter != nil {
		r := o.starter.start(o.cgroupFD())
		if r.cgroupRefused != nil {
			o.dropCgroup(r.cgroupRefused) // cgroup.go
		}
		if r.ok {
			return r.pid, nil
		}
	}
	o.signals().Wait()
	return startExecStage(o)
}

// startExecStage starts the exec stage as a child of the calling process
// and waits only until the stage has either exec'd the runner (EOF on the
// stage socket) or reported why not. It never waits for the process: the
// engine reaps it.
func startExecStage(o *Options) (int, error) {
	start := execStart{Path: o.Path, Args: o.Args, Env: o.Env, Privileges: o.Privileges, Mask: callerMask}
	attr := syscall.ProcAttr{Dir: o.Dir, Sys: runnerSys(o)}
	// Into the run's cgroup from the first instruction (cgroup.go); a
	// refusal of that is tried again outside it.
	into := attr
	into.Sys = withCgroup(attr.Sys, o.cgroupFD())
	pid, link, err := spawnStage(execStageArg0, msgExecStart, start, into)
	if err != nil && o.cgroup != nil && refused(err) {
		refusal := err
		if pid, link, err = spawnStage(execStageArg0, msgExecStart, start, attr); err == nil {
			o.dropCgroup(refusal)
		}
	}
	if err != nil {
		if o.Dir != "" {
			return 0, fmt.Errorf("in working directory %s: %w", o.Dir, err)
		}
		return 0, err
	}
	defer link.Close()
	if _, err := link.awaitReply(); err != nil {
		return pid, err
	}
	return pid, nil
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
	fork chan int // the cgroup to fork into (cgroup.go), or -1
	done chan starterResult
}

type starterResult struct {
	pid int
	ok  bool // false: privileges or exec failed; the exec stage starts the runner, or reports why not (125, 126, 127)
	// cgroupRefused is the kernel's refusal to start the runner into its
	// cgroup, when starting it outside worked.
	cgroupRefused error
}

// prepareStart makes the starter thread, when this run can use one.
func (o *Options) prepareStart() {
	if o.starter != nil || len(o.Privileges.Rlimits) > 0 || !o.mayForkFromEngine() { // policy.go
		return
	}
	s := &starter{fork: make(chan int, 1), done: make(chan starterResult, 1)}
	privileges, sigs := o.Privileges, o.signals()
	path, args, dir, env, sys := o.Path, o.Args, o.Dir, o.Env, runnerSys(o)
	go func() {
		runtime.LockOSThread() // never unlocked, and this goroutine never returns
		// Privileges, then the TIOCSTI filter (injection.go); then the
		// caller's mask, which ForkExec gives the child from the forking
		// thread (this one forks nothing else).
		filtered, err := restrictRunner(privileges)
		if err == nil {
			err = setThreadMask(callerMask)
		}
		cg := <-s.fork
		if err == nil {
			if !filtered {
				o.logf("--allow-new-privs without CAP_SYS_ADMIN: the kernel takes no seccomp filter, so the runner may use TIOCSTI")
			}
			s.done <- forkHeld(path, args, dir, env, sys, cg, !privileges.AllowNewPrivs, sigs.Wait)
		} else {
			s.done <- starterResult{}
		}
		select {}
	}()
	o.starter = s
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
// from PTRACE_DETACH without ever seeing the SIGTRAP. Only with
// no_new_privs, under which a traced exec grants exactly what an untraced
// one does (a setuid bit is ignored either way); and where ptrace is
// refused (a seccomp profile, Yama's ptrace_scope 2 or 3), the runner is
// forked once ready returned. It runs on the thread that will stay the
// tracer: the calling goroutine must be locked to it.
//
// cg (-1: none) is the run's cgroup, which the runner starts in (clone3's
// CLONE_INTO_CGROUP, in the same SysProcAttr as the ptrace request); where
// the kernel refuses that and a start outside works, the result says so.
func forkHeld(path string, args []string, dir string, env []string, sys *syscall.SysProcAttr, cg int, nnp bool, ready func()) starterResult {
	untraced := &syscall.SysProcAttr{}
	if sys != nil {
		*untraced = *sys
	}
	traced := *untraced
	traced.Ptrace = true
	attr := &syscall.ProcAttr{Dir: dir, Env: env, Files: []uintptr{0, 1, 2}, Sys: untraced}
	var r starterResult
	fork := func() (int, error) {
		pid, refusal, err := forkInto(path, args, attr, cg) // cgroup.go
		if refusal != nil {
			r.cgroupRefused, cg = refusal, -1
		}
		return pid, err
	}
	if nnp {
		attr.Sys = &traced
		pid, err := fork()
		if err == nil {
			releaseHeld(pid, ready)
			r.pid, r.ok = pid, true
			return r
		}
		if !refused(err) {
			return r // an exec failure: the exec stage reports it
		}
		attr.Sys = untraced
	}
	ready()
	pid, err := fork()
	r.pid, r.ok = pid, err == nil
	return r
}

// releaseHeld waits for the held runner's stop at its execve, then for
// ready, and detaches from it. A runner killed before it stopped is left
// as it is, unreaped, for the engine (WNOWAIT).
func releaseHeld(pid int, ready func()) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WSTOPPED|unix.WNOWAIT|unix.WALL, nil)
		if err != unix.EINTR {
			if err != nil {
				return
			}
			break
		}
	}
	ready()
	const cldTrapped = 4 // si_code of a ptrace stop (<asm-generic/siginfo.h>)
	if info.Code == cldTrapped {
		// data 0: the SIGTRAP is not delivered.
		_ = unix.PtraceDetach(pid)
	}
}

// runExecStage turns this process into the runner. It never returns: it
// either execs or exits with 125 (setup), 126 or 127 (exec) after writing
// the reason to its stage socket.
func runExecStage() {
	// A closed pipe behind a write must not kill the stage; execve resets
	// the handler, so the runner gets SIGPIPE's default, not SIG_IGN.
	reaper.CatchPipe()
	// Capability sets and the bounding set belong to a thread; exec runs
	// on this same thread, so what is applied here is what the runner gets.
	runtime.LockOSThread()
	var start execStart
	link, err := openStage(msgExecStart, &start)
	fail := func(status int, err error) {
		link.fail(err)
		os.Exit(status)
	}
	if err != nil {
		fail(125, err)
	}
	// Privileges, the TIOCSTI filter (injection.go) and Landlock (policy.go).
	if err := confineRunner(start.Privileges); err != nil {
		fail(125, err)
	}
	// Last, on the thread that execs: the Go runtime unblocked signals on
	// it at start, and the runner must get the caller's mask.
	if err := setThreadMask(start.Mask); err != nil {
		fail(125, &SetupError{Step: "restore the caller's signal mask", Err: err})
	}
	err = unix.Exec(start.Path, start.Args, start.Env)
	status := 126
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		status = 127
	}
	failed := &SetupError{Step: "runner exec failed: " + start.Path, Err: err}
	if errors.Is(err, unix.E2BIG) {
		failed.Hint = argsHint(start.Env, start.Args) // diagnose.go
	}
	fail(status, failed)
}

// applyPrivileges applies p to the calling thread in the one order that
// works: rlimits (need CAP_SYS_RESOURCE to raise, so before the drop), the
// bounding set (needs CAP_SETPCAP, which the capset drops), the permitted,
// effective and inheritable sets, the ambient set (needs its caps in
// permitted and inheritable), then no_new_privs; then it reads the result
// back and refuses to go on with more than was asked.
func applyPrivileges(p Privileges) error {
	for _, rl := range p.Rlimits {
		// syscall.Setrlimit, not unix.Prlimit: Go restores the RLIMIT_NOFILE
		// it saw at start-up across exec unless told through this call.
		lim := syscall.Rlimit{Cur: rl.Soft, Max: rl.Hard}
		if err := syscall.Setrlimit(rl.Resource, &lim); err != nil {
			return &SetupError{Step: "set " + rl.String(), Err: err,
				Hint: "raising a hard limit needs CAP_SYS_RESOURCE; keep HARD at or below the current one"}
		}
	}

	caps, err := capability.NewPid2(0)
	if err != nil {
		return &SetupError{Step: "read capabilities", Err: err}
	}
	if err := caps.Load(); err != nil {
		return &SetupError{Step: "read capabilities", Err: err}
	}
	hadSetpcap := caps.Get(capability.EFFECTIVE, capability.CAP_SETPCAP)
	keep := make([]capability.Cap, 0, len(p.Keep))
	for _, c := range p.Keep {
		keep = append(keep, capability.Cap(c))
		if !caps.Get(capability.PERMITTED, capability.Cap(c)) {
			return &SetupError{Step: "keep " + CapName(c), Err: unix.EPERM,
				Hint: "corral does not hold it; run corral as root, or in pidns mode where it owns a user namespace"}
		}
	}
	all := capability.CAPS | capability.BOUNDS | capability.AMBS
	caps.Clear(all)
	caps.Set(all, keep...)
	// Without CAP_SETPCAP the bounding set cannot shrink; the library then
	// leaves it as it is, and the check below decides whether that is safe.
	for _, kind := range []capability.CapType{capability.BOUNDS, capability.CAPS, capability.AMBS} {
		if err := caps.Apply(kind); err != nil {
			return &SetupError{Step: "drop capabilities (" + kind.String() + ")", Err: err}
		}
	}
	if !p.AllowNewPrivs {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return &SetupError{Step: "set no_new_privs", Err: err}
		}
	}
	return verifyPrivileges(p, hadSetpcap)
}

// verifyPrivileges reads the thread's sets back from the kernel.
func verifyPrivileges(p Privileges, hadSetpcap bool) error {
	status, err := readThreadStatus()
	if err != nil {
		return &SetupError{Step: "verify privileges", Err: err}
	}
	var want uint64
	for _, c := range p.Keep {
		want |= 1 << uint(c)
	}
	for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapAmb"} {
		if got := status[set]; got != want {
			return &SetupError{Step: "verify privileges", Err: fmt.Errorf("%s is %016x, want %016x", set, got, want)}
		}
	}
	if got := status["CapBnd"]; got&^want != 0 {
		// An unprivileged caller cannot shrink the bounding set. With
		// no_new_privs no execve can gain from it (setuid bits and file
		// capabilities are ignored), so the runner holds nothing more:
		// also when --allow-new-privs was asked but no_new_privs was
		// inherited, since it can never be cleared.
		switch {
		case hadSetpcap:
			return &SetupError{Step: "drop the bounding set", Err: fmt.Errorf("CapBnd is %016x, want %016x", got, want)}
		case p.AllowNewPrivs && status["NoNewPrivs"] != 1:
			return &SetupError{Step: "drop the bounding set", Err: fmt.Errorf("CapBnd is %016x, want %016x", got, want),
				Hint: "corral lacks CAP_SETPCAP, so it cannot shrink the bounding set, and with --allow-new-privs a setuid or file-capability program could gain what is left in it; drop --allow-new-privs"}
		}
	}
	// With --allow-new-privs, NoNewPrivs may still be 1 when corral itself
	// inherited it: it cannot be cleared, and it only takes privilege away.
	if nnp := status["NoNewPrivs"]; !p.AllowNewPrivs && nnp != 1 {
		return &SetupError{Step: "verify privileges", Err: fmt.Errorf("NoNewPrivs is %d", nnp)}
	}
	return nil
}

// readThreadStatus returns the Cap* sets (hex) and NoNewPrivs of this thread.
func readThreadStatus() (map[string]uint64, error) {
	data, err := os.ReadFile("/proc/thread-self/status")
	if err != nil {
		return nil, err
	}
	return parseStatus(string(data))
}

// parseStatus takes the numbers verifyPrivileges checks out of a status
// file: the Cap* sets (hex) and NoNewPrivs, each required.
func parseStatus(text string) (map[string]uint64, error) {
	fields := proc.ParseStatus(text)
	out := map[string]uint64{}
	for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs"} {
		value, ok := fields[k]
		if !ok {
			return nil, fmt.Errorf("status has no %s", k)
		}
		base := 16
		if k == "NoNewPrivs" {
			base = 10
		}
		v, err := strconv.ParseUint(value, base, 64)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", k, err)
		}
		out[k] = v
	}
	return out, nil
}
