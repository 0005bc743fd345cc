// Package explain is the host side's account of a failed pidns setup:
// which step failed and why, from what corral can see (its uid and
// capabilities, its seccomp and no_new_privs state, the sysctls of this
// kernel, the namespace limits), and whether --mode auto may fall back.
// The host side calls it when the init's clone or setup fails; the probe
// calls it to say why user namespaces would fail. It starts nothing.
package explain

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/corral-sh/corral/internal/container"
	"github.com/corral-sh/corral/internal/proc"
	"github.com/corral-sh/corral/internal/setuperr"
	"github.com/corral-sh/corral/sandbox/internal/plan"
	"github.com/corral-sh/corral/sandbox/internal/stage"
	"github.com/moby/sys/capability"
	"golang.org/x/sys/unix"
)

// When pidns mode cannot be set up, corral says which step failed and why,
// from what it can see: its uid and capabilities, its seccomp and
// no_new_privs state, the sysctls this kernel has, the namespace limits.
// A refusal (the kernel or a policy says no) lets --mode auto fall back to
// subreaper; a resource shortage never does: running with weaker
// containment because a limit was hit for a moment would be a silent
// downgrade.

// isRefusal says whether errno is the kernel or a policy refusing a
// namespace step, as opposed to a resource running out.
func isRefusal(err error) bool {
	for _, e := range []unix.Errno{unix.EPERM, unix.EACCES, unix.ENOSPC, unix.EINVAL, unix.ENOSYS} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func isResource(err error) bool {
	for _, e := range []unix.Errno{unix.EAGAIN, unix.EMFILE, unix.ENFILE, unix.ENOMEM, unix.E2BIG} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// UnavailableError says pidns mode could not be set up and nothing of the
// runner has started, so falling back to subreaper mode loses nothing.
type UnavailableError struct{ *setuperr.SetupError }

// Unwrap makes the SetupError itself, not only its cause, visible to
// errors.As.
func (u *UnavailableError) Unwrap() error { return u.SetupError }

// CloneFailure explains why the init (or a probe child) could not be
// started. A refusal is an *UnavailableError (auto may fall back); anything
// else is a plain *SetupError (status 125, no fallback). plan is the run's
// (nil for a probe child): the init carries its environment.
func CloneFailure(plan *plan.Plan, caller stage.Caller, flags uintptr, userns bool, err error) error {
	s := &setuperr.SetupError{Step: cloneFlagNames(flags), Err: err}
	if !isRefusal(err) {
		s.Hint = resourceHint(err, envOf(plan), []string{stage.InitArg0}, caller)
		switch {
		case errors.Is(err, unix.E2BIG):
			s.Step = "exec the init (corral [init]) with the runner's environment"
		case errors.Is(err, unix.EMFILE), errors.Is(err, unix.ENFILE), errors.Is(err, unix.EBADF):
			s.Step = "start the init (corral [init])"
		}
		return s
	}
	if userns {
		// Go's ForkExec writes the id maps itself and returns only an
		// errno: try each step alone to say which one the kernel refused.
		if step, stepErr := DiagnoseUserns(); step != "" {
			s.Step, s.Err = step, stepErr
		}
	}
	s.Hint = RefusalHint(ReadFacts(), s.Step, s.Err, flags, userns)
	return &UnavailableError{withModeAdvice(plan, s)}
}

func envOf(plan *plan.Plan) []string {
	if plan == nil {
		return nil
	}
	return plan.Env
}

// ExplainInitFailure turns what the init reported (err: its *SetupError,
// a broken link, or nil when it died without a word, with its exit status)
// into the error corral prints.
func ExplainInitFailure(plan *plan.Plan, caller stage.Caller, err error, status int) error {
	s := InitFailure(err, status)
	if isResource(s.Err) {
		if s.Hint == "" {
			s.Hint = resourceHint(s.Err, envOf(plan), nil, caller)
		}
		return s
	}
	if strings.HasPrefix(s.Step, "mount proc on /proc") && errors.Is(s.Err, unix.EPERM) {
		s.Hint = procMountHint(ReadFacts())
	}
	return &UnavailableError{withModeAdvice(plan, s)}
}

// InitFailure is why the init did not become ready: the failure it
// reported, or how it ended without one.
func InitFailure(err error, status int) *setuperr.SetupError {
	var setup *setuperr.SetupError
	switch {
	case errors.As(err, &setup):
		return setup
	case err == nil:
		err = fmt.Errorf("exited with status %d before it was ready", status)
	}
	return &setuperr.SetupError{Step: "start the pidns init", Err: err}
}

// withModeAdvice adds the way out that only an explicit --mode pidns
// needs: auto falls back by itself, and in the probe it is no advice.
func withModeAdvice(run *plan.Plan, s *setuperr.SetupError) *setuperr.SetupError {
	if run != nil && run.Mode == plan.ModePidns && !run.Namespaces.Any() {
		if s.Hint != "" {
			s.Hint += "; "
		}
		s.Hint += "or use --mode subreaper (or auto, which falls back to it)"
	}
	return s
}

// DiagnoseUserns creates a user namespace the way pidns mode does, one
// step at a time, in a throwaway child that holds still while this
// process writes its id maps, and names the first step that fails. It
// returns "" when every step works.
func DiagnoseUserns() (string, error) {
	// Before any write: through another namespace's /proc, the child's
	// pid names some other process.
	if err := procForIDMaps("/proc"); err != nil {
		return IDMapsStep, err
	}
	sys := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, Pdeathsig: syscall.SIGKILL}
	pid, link, err := stage.Spawn(stage.ProbeArg0, stage.MsgProbeStart, stage.ProbeStart{Step: "hold"}, syscall.ProcAttr{Sys: sys, Env: []string{}}, stage.Inherited())
	if err != nil {
		return "clone(CLONE_NEWUSER)", err
	}
	defer func() {
		link.Close()
		// Our own unreaped child: its pid cannot have been reused.
		_ = unix.Kill(pid, unix.SIGKILL)
		var ws unix.WaitStatus
		for {
			if _, err := unix.Wait4(pid, &ws, 0, nil); !errors.Is(err, unix.EINTR) {
				break
			}
		}
	}()
	if ready, err := link.AwaitReply(stage.StepProbeReply); !ready {
		if err == nil {
			err = errors.New("it exited before it was ready")
		}
		return "start a probe child in a new user namespace", err
	}
	uid, gid := os.Getuid(), os.Getgid()
	// The order of Go's ForkExec, so the step named is the one that broke.
	for _, w := range []struct{ file, text, step string }{
		{"uid_map", fmt.Sprintf("%d %d 1", uid, uid), fmt.Sprintf("map uid %d to itself (write \"%d %d 1\" to /proc/PID/uid_map)", uid, uid, uid)},
		{"setgroups", "deny", "deny setgroups (write \"deny\" to /proc/PID/setgroups)"},
		{"gid_map", fmt.Sprintf("%d %d 1", gid, gid), fmt.Sprintf("map gid %d to itself (write \"%d %d 1\" to /proc/PID/gid_map)", gid, gid, gid)},
	} {
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/%s", pid, w.file), []byte(w.text), 0); err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return w.step, err
		}
	}
	return "", nil
}

// IDMapsStep is the step a /proc unfit for id maps fails.
const IDMapsStep = "write a new user namespace's id maps through /proc"

// unfitProc is why /proc cannot carry a child's id maps, and the fix.
type unfitProc struct{ why, fix string }

func (u *unfitProc) Error() string { return u.why }

// procForIDMaps checks, before a clone with CLONE_NEWUSER, that this
// process can write the child's id maps through /proc: Go's ForkExec, like
// DiagnoseUserns, writes /proc/PID/uid_map with the child's pid as this
// process knows it. A /proc of another PID namespace (unshare --pid --fork
// without --mount-proc) shows some other process under that pid, or none;
// a read-only one (bwrap's --ro-bind / / after its --proc /proc) refuses
// the write with EROFS. Either is the environment refusing a user
// namespace, as a security policy would: a *unfitProc, else nil. dir is
// where /proc is (a test passes another directory).
func procForIDMaps(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil || st.Type != unix.PROC_SUPER_MAGIC {
		return &unfitProc{"no proc filesystem is mounted at /proc", "mount one (mount -t proc proc /proc; bwrap --proc /proc)"}
	}
	var whys []string
	if st.Flags&unix.ST_RDONLY != 0 {
		whys = append(whys, "/proc is mounted read-only here")
	}
	foreign := false
	switch self, err := os.Readlink(filepath.Join(dir, "self")); {
	case err != nil:
		foreign = true
		whys = append(whys, "/proc belongs to another PID namespace, one where corral does not appear (/proc/self: "+setuperr.Describe(err)+")")
	case self != strconv.Itoa(os.Getpid()):
		foreign = true
		whys = append(whys, fmt.Sprintf("/proc belongs to another PID namespace (it shows corral as pid %s, corral is pid %d in its own)", self, os.Getpid()))
	}
	if len(whys) == 0 {
		return nil
	}
	fix := "mount a writable proc, e.g. bwrap's --proc /proc after --ro-bind / /, not before it"
	if foreign {
		fix = "mount a /proc of corral's own PID namespace (unshare --pid --fork --mount-proc; bwrap --proc /proc after --ro-bind / /)"
	}
	return &unfitProc{strings.Join(whys, ", and "), fix}
}

// CheckProc is procForIDMaps for a launch: nil, or why pidns mode cannot
// make a user namespace here, as an *UnavailableError (auto falls back;
// an explicit --mode pidns is a 125 that names it).
func CheckProc(plan *plan.Plan) error {
	err := procForIDMaps("/proc")
	if err == nil {
		return nil
	}
	return &UnavailableError{withModeAdvice(plan, &setuperr.SetupError{Step: IDMapsStep, Err: err, Hint: RefusalHint(Facts{}, IDMapsStep, err, 0, true)})}
}

// Facts is what corral can see about its own situation.
// Facts are what corral can see of itself and the kernel.
type Facts struct {
	UID        int
	caps       uint64 // effective
	Seccomp    string // "Seccomp:" of /proc/self/status: 0 none, 1 strict, 2 filter; "" unknown
	NoNewPrivs string // "NoNewPrivs:"
	sysctls    map[string]string
	engine     container.Engine // whose words a fix is given in
}

// sysctls whose existence and value explain a refusal; only the ones this
// kernel has are named.
var explainingSysctls = []string{
	"kernel.unprivileged_userns_clone",             // Debian and Ubuntu kernels
	"kernel.apparmor_restrict_unprivileged_userns", // Ubuntu 23.10+
	"user.max_user_namespaces", "user.max_pid_namespaces", "user.max_mnt_namespaces",
	"user.max_net_namespaces", "user.max_ipc_namespaces", "user.max_uts_namespaces",
}

func ReadFacts() Facts {
	f := Facts{UID: os.Getuid(), sysctls: map[string]string{}, engine: container.Here()}
	f.caps, _ = stage.EffectiveCaps()
	if status, err := proc.ReadStatus("/proc/self/status"); err == nil {
		f.Seccomp, f.NoNewPrivs = status["Seccomp"], status["NoNewPrivs"]
	}
	for _, name := range explainingSysctls {
		if v, ok := readSysctl(name); ok {
			f.sysctls[name] = v
		}
	}
	return f
}

func readSysctl(name string) (string, bool) {
	data, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(name, ".", "/"))
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(data)), true
}

func (f Facts) Has(c capability.Cap) bool { return f.caps&(1<<uint(c)) != 0 }

// nsSysctls maps clone flags to the sysctl that counts that namespace.
var nsSysctls = []struct {
	flag uintptr
	name string
}{
	{unix.CLONE_NEWUSER, "user.max_user_namespaces"}, {unix.CLONE_NEWPID, "user.max_pid_namespaces"},
	{unix.CLONE_NEWNS, "user.max_mnt_namespaces"}, {unix.CLONE_NEWNET, "user.max_net_namespaces"},
	{unix.CLONE_NEWIPC, "user.max_ipc_namespaces"}, {unix.CLONE_NEWUTS, "user.max_uts_namespaces"},
}

// refusalHint explains a refused namespace step.
func RefusalHint(f Facts, step string, err error, flags uintptr, userns bool) string {
	var unfit *unfitProc
	switch {
	case errors.As(err, &unfit):
		return unfit.fix
	case strings.Contains(step, "/proc/PID/") && errors.Is(err, unix.EROFS):
		// What procForIDMaps did not see: a read-only mount beneath /proc.
		return "/proc is read-only where corral writes the id maps; mount a writable proc, e.g. bwrap's --proc /proc after --ro-bind / /"
	case strings.Contains(step, "uid_map") && errors.Is(err, unix.EPERM):
		if f.UID == 0 && !f.Has(capability.CAP_SETFCAP) {
			return "uid 0 without CAP_SETFCAP cannot map itself into a user namespace (Linux 5.12+), and corral needs one because it lacks CAP_SYS_ADMIN: " +
				"add CAP_SETFCAP (" + f.engine.CapAdd("SETFCAP") + ") or CAP_SYS_ADMIN, or run corral as a non-zero uid (" + f.engine.User() + ")"
		}
		return fmt.Sprintf("the kernel refused to map uid %d to itself: a security module (AppArmor, SELinux) may forbid it", f.UID)
	case strings.Contains(step, "setgroups"), strings.Contains(step, "gid_map"):
		return "the kernel refused the gid map: a security module (AppArmor, SELinux) may forbid it"
	case errors.Is(err, unix.ENOSPC):
		var zero, all []string
		for _, ns := range nsSysctls {
			if flags&ns.flag == 0 {
				continue
			}
			if v, ok := f.sysctls[ns.name]; ok {
				all = append(all, ns.name+"="+v)
				if v == "0" {
					zero = append(zero, ns.name)
				}
			}
		}
		if len(zero) > 0 {
			return "namespaces of this kind are disabled here: " + strings.Join(zero, " and ") + " is 0 (in this user namespace); raise it (sysctl -w " + zero[0] + "=N)"
		}
		return "a namespace limit is used up: " + strings.Join(all, ", ") + " count per user across the machine, and user namespaces nest at most 32 deep"
	case errors.Is(err, unix.EINVAL):
		return "this kernel lacks one of these namespace types (CONFIG_USER_NS, CONFIG_PID_NS, ...)"
	case errors.Is(err, unix.ENOSYS):
		return "the kernel, or a seccomp filter answering ENOSYS, does not offer this system call"
	}
	// EPERM or EACCES from the clone itself.
	var causes, fixes []string
	if f.Seccomp == "2" {
		cause := "corral runs under a seccomp filter (Seccomp: 2 in /proc/self/status) that refuses new namespaces"
		if !f.Has(capability.CAP_SYS_ADMIN) {
			cause += ", as the default profiles of Docker, containerd and Kubernetes (RuntimeDefault) do for a process without CAP_SYS_ADMIN"
		}
		causes = append(causes, cause)
		fixes = append(fixes, "a profile that allows them ("+f.engine.SeccompUnconfined()+")")
	}
	if userns {
		if f.sysctls["kernel.unprivileged_userns_clone"] == "0" && f.UID != 0 {
			causes = append(causes, "kernel.unprivileged_userns_clone is 0")
			fixes = append(fixes, "sysctl -w kernel.unprivileged_userns_clone=1")
		}
		if f.sysctls["kernel.apparmor_restrict_unprivileged_userns"] == "1" {
			causes = append(causes, "kernel.apparmor_restrict_unprivileged_userns is 1")
			fixes = append(fixes, "an AppArmor profile for corral that allows userns, or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0")
		}
		if f.UID == 0 && !f.Has(capability.CAP_SYS_ADMIN) {
			fixes = append(fixes, "give corral CAP_SYS_ADMIN so it needs no user namespace ("+f.engine.CapAdd("SYS_ADMIN")+")")
		}
	} else if !f.Has(capability.CAP_SYS_ADMIN) {
		causes = append(causes, "creating namespaces without a user namespace needs CAP_SYS_ADMIN, which corral lacks")
	}
	if len(causes) == 0 {
		what := "new namespaces are"
		if userns {
			what = "user namespaces are"
		}
		return what + " refused, and none of the usual causes is visible here (no seccomp filter, no sysctl that forbids them): a security module (AppArmor, SELinux) or the policy of an enclosing container may refuse them; the kernel's audit log (dmesg) names a security module's denial"
	}
	msg := strings.Join(causes, "; ")
	if len(fixes) > 0 {
		msg += "; fix: " + strings.Join(fixes, ", or ")
	}
	return msg
}

// procMountHint explains a refused fresh proc mount.
func procMountHint(f Facts) string {
	msg := "parts of /proc are overmounted (container runtimes mask /proc/kcore, /proc/sys and friends), and the kernel then refuses a fresh proc mount to a user namespace"
	fix := "unmask /proc (" + f.engine.Unmask() + ")"
	switch {
	case f.UID == 0 && !f.Has(capability.CAP_SYS_ADMIN):
		msg += "; corral is uid 0 but lacks CAP_SYS_ADMIN, so it needed one"
		fix = "add CAP_SYS_ADMIN (" + f.engine.CapAdd("SYS_ADMIN") + "), or " + fix
	case f.UID != 0:
		fix += ", or run corral as root with CAP_SYS_ADMIN"
	}
	return msg + "; fix: " + fix
}

// resourceHint names the resource an errno says ran out, and its limit.
// env and argv are what the failed execve carried, for E2BIG; caller is
// what corral inherited.
func resourceHint(err error, env, argv []string, caller stage.Caller) string {
	switch {
	case errors.Is(err, unix.EMFILE):
		return stage.NoFileHint()
	case errors.Is(err, unix.EBADF) && len(caller.FDs) > 0:
		// stage.Files puts a stage's socket above the caller's highest
		// descriptor, which must stay below the limit.
		var rl unix.Rlimit
		_ = unix.Getrlimit(unix.RLIMIT_NOFILE, &rl)
		high := caller.FDs[len(caller.FDs)-1]
		return fmt.Sprintf("corral passes its stages a descriptor above the highest one it inherited (%d), and RLIMIT_NOFILE %s does not reach that far: raise the limit above %d, or start corral with fewer descriptors open", high, plan.RlimitValue(rl.Cur), high+1)
	case errors.Is(err, unix.ENFILE):
		max, _ := readSysctl("fs.file-max")
		return "the machine's open-file limit is reached (fs.file-max " + max + "): raise it, or close files elsewhere"
	case errors.Is(err, unix.EAGAIN):
		return "a process limit is reached: " + processLimits() + "; raise it or wait for processes to exit"
	case errors.Is(err, unix.ENOMEM):
		return "the kernel ran out of memory for this step (or the cgroup's memory limit was hit)"
	case errors.Is(err, unix.E2BIG):
		return stage.ArgsHint(env, argv)
	}
	return ""
}

// processLimits names the limits a fork can hit: the pids controller of
// corral's cgroup and its ancestors (v1 or v2), RLIMIT_NPROC for a
// non-root uid, and the kernel's own.
func processLimits() string {
	var limits []string
	// The calling thread's cgroup: the fork that failed was its.
	if data, err := os.ReadFile("/proc/thread-self/cgroup"); err == nil {
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) != 3 {
				continue
			}
			var roots []string
			switch {
			case parts[0] == "0" && parts[1] == "":
				roots = []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}
			case strings.Contains(","+parts[1]+",", ",pids,"):
				roots = []string{"/sys/fs/cgroup/pids"}
			default:
				continue
			}
			for _, root := range roots {
				for dir := filepath.Join(root, parts[2]); strings.HasPrefix(dir, root); dir = filepath.Dir(dir) {
					max, err := os.ReadFile(filepath.Join(dir, "pids.max"))
					if err == nil && strings.TrimSpace(string(max)) != "max" {
						cur, _ := os.ReadFile(filepath.Join(dir, "pids.current"))
						limits = append(limits, fmt.Sprintf("pids.max %s of cgroup %s (%s in use)",
							strings.TrimSpace(string(max)), dir, strings.TrimSpace(string(cur))))
					}
					if dir == root {
						break
					}
				}
			}
		}
	}
	var rl unix.Rlimit
	if os.Getuid() != 0 && unix.Getrlimit(unix.RLIMIT_NPROC, &rl) == nil && rl.Cur != unix.RLIM_INFINITY {
		limits = append(limits, fmt.Sprintf("RLIMIT_NPROC %d for uid %d (ulimit -u)", rl.Cur, os.Getuid()))
	}
	for _, name := range []string{"kernel.threads-max", "kernel.pid_max"} {
		if v, ok := readSysctl(name); ok {
			limits = append(limits, name+" "+v)
		}
	}
	return strings.Join(limits, ", ")
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
