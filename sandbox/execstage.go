package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/corral-sh/corral/reaper"
	"github.com/moby/sys/capability"
	"golang.org/x/sys/unix"
)

const execStageArg0 = "corral [exec]"

// execSpec is what the exec stage needs.
type execSpec struct {
	Path       string
	Args       []string
	Privileges Privileges
}

// startRunner starts the exec stage as a child of the calling process and
// waits only until the stage has either exec'd the runner (EOF on the
// report pipe) or reported why not. It never waits for the process: the
// engine reaps it.
func startRunner(o *Options) (int, error) {
	if len(o.Privileges.Rlimits) == 0 {
		if pid, ok := startRunnerDirect(o); ok {
			return pid, nil
		}
	}
	pid, report, err := spawnStage(execStageArg0,
		execSpec{Path: o.Path, Args: o.Args, Privileges: o.Privileges},
		syscall.ProcAttr{Dir: o.Dir, Env: o.Env})
	if err != nil {
		if o.Dir != "" {
			return 0, fmt.Errorf("exec stage in working directory %s: %w", o.Dir, err)
		}
		return 0, fmt.Errorf("exec stage: %w", err)
	}
	defer report.Close()
	msg, _ := io.ReadAll(report)
	if len(msg) > 0 {
		return pid, errors.New(strings.TrimSpace(string(msg)))
	}
	return pid, nil
}

// startRunnerDirect forks the runner straight from the engine, from an OS
// thread of its own that first drops what the runner must not have:
// capabilities, the bounding set and no_new_privs belong to a thread, and
// a forked child copies its thread's. No re-exec of corral, so no second
// Go runtime start. The thread is then parked, locked, for the life of the
// process: a locked goroutine that returned would take its thread down,
// and the runtime would have to make another later, which a runner that
// filled its cgroup's pids.max would refuse it. Rlimits belong to the
// whole process, so a run that sets them takes the exec stage. ok is
// false when this path cannot start the runner (privileges or exec
// failed): the exec stage then starts it, or reports why not with the
// usual status (125, 126, 127).
func startRunnerDirect(o *Options) (pid int, ok bool) {
	type result struct {
		pid int
		ok  bool
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked, and this goroutine never returns
		// Privileges and Landlock (policy.go).
		if err := confineRunner(o.Privileges); err != nil {
			done <- result{}
		} else {
			pid, err := syscall.ForkExec(o.Path, o.Args, &syscall.ProcAttr{Dir: o.Dir, Env: o.Env, Files: []uintptr{0, 1, 2}})
			done <- result{pid, err == nil}
		}
		select {}
	}()
	r := <-done
	return r.pid, r.ok
}

// IsExecStage reports whether this process is an exec stage.
func IsExecStage() bool { return isStage(execStageArg0) }

// RunExecStage turns this process into the runner. It never returns: it
// either execs or exits with 125 (setup), 126 or 127 (exec) after writing
// the reason to the report pipe.
func RunExecStage() {
	// A closed pipe behind a write must not kill the stage; execve resets
	// the handler, so the runner gets SIGPIPE's default, not SIG_IGN.
	reaper.CatchPipe()
	// Capability sets and the bounding set belong to a thread; exec runs
	// on this same thread, so what is applied here is what the runner gets.
	runtime.LockOSThread()
	var spec execSpec
	report, err := readStageSpec(&spec)
	fail := func(status int, format string, a ...any) {
		fmt.Fprintf(report, format, a...)
		os.Exit(status)
	}
	if err != nil {
		fail(125, "exec stage: %v", err)
	}
	if err := confineRunner(spec.Privileges); err != nil { // privileges and Landlock (policy.go)
		fail(125, "%v", err)
	}
	err = unix.Exec(spec.Path, spec.Args, os.Environ())
	status := 126
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		status = 127
	}
	fail(status, "runner exec failed: %s: %s", spec.Path, describeErr(err))
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
			return &SetupError{Step: "keep " + capName(c), Err: unix.EPERM,
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
		// capabilities are ignored), so the runner holds nothing more.
		if hadSetpcap || p.AllowNewPrivs {
			return &SetupError{Step: "drop the bounding set", Err: fmt.Errorf("CapBnd is %016x, want %016x", got, want),
				Hint: "without CAP_SETPCAP it cannot shrink, and --allow-new-privs would let a setuid program gain it; use pidns mode or drop --allow-new-privs"}
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

func parseStatus(text string) (map[string]uint64, error) {
	out := map[string]uint64{}
	for _, line := range strings.Split(text, "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		value = strings.TrimSpace(value)
		var err error
		switch {
		case strings.HasPrefix(key, "Cap"):
			out[key], err = strconv.ParseUint(value, 16, 64)
		case key == "NoNewPrivs":
			out[key], err = strconv.ParseUint(value, 10, 64)
		}
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", key, err)
		}
	}
	for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs"} {
		if _, ok := out[k]; !ok {
			return nil, fmt.Errorf("status has no %s", k)
		}
	}
	return out, nil
}
