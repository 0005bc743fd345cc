package runner

// The runner's confinement beyond its privileges: the seccomp filter that
// denies TIOCSTI and TIOCLINUX, on every path, and the Landlock policy,
// on the exec stage's thread alone. Both fail closed: a filter or a policy
// that cannot be installed stops the start, so the runner never runs
// without what was asked for.

import (
	"errors"

	"github.com/corral-sh/corral/internal/landlock"
	"github.com/corral-sh/corral/internal/seccomp"
	"github.com/corral-sh/corral/internal/setuperr"
	"github.com/corral-sh/corral/sandbox/internal/plan"
	"github.com/corral-sh/corral/sandbox/internal/stage"
	"github.com/moby/sys/capability"
	"golang.org/x/sys/unix"
)

// restrictRunner applies p to the calling thread (applyPrivileges) and
// installs the seccomp filter that fails ioctl(TIOCSTI) and
// ioctl(TIOCLINUX) with EPERM (docs/terminal.md: the runner cannot push
// input into the caller's terminal, the CVE-2017-5226 class), in every
// mode and with or without a terminal. The caller has locked its goroutine
// to the thread and execs or forks the runner from it, which inherits both.
//
// The kernel takes a filter from a thread with no_new_privs or with
// CAP_SYS_ADMIN. Without --allow-new-privs the filter goes on after
// no_new_privs is set. With it, the filter goes on first, while the thread
// may still hold CAP_SYS_ADMIN (root, or the pidns init in its user
// namespace), before the drop takes that away. An unprivileged caller with
// --allow-new-privs has neither: the documented exception, in which the
// runner starts without the filter (filtered is false). Any other failure
// to install it is a setup error: the runner never starts unprotected.
func restrictRunner(p plan.Privileges) (restricted, error) {
	r := restricted{listener: -1}
	var err error
	if p.AllowNewPrivs && stage.HoldsCap(capability.CAP_SYS_ADMIN) {
		if r.listener, err = installFilter(p); err != nil {
			return r, err
		}
		r.filtered = true
	}
	status, err := applyPrivileges(p)
	if err != nil {
		return r, err
	}
	r.traced = status["TracerPid"] != 0
	if r.filtered {
		return r, nil
	}
	r.listener, err = installFilter(p)
	// A policy's io_uring denial and guard go without it too: such a run
	// has Landlock rules, which the same thread cannot take either (a 125
	// naming Landlock, confineRunner), or the socket checks above.
	if p.AllowNewPrivs && p.Sockets == nil && !p.Checked() && errors.Is(err, unix.EACCES) {
		return r, nil
	}
	r.filtered = err == nil
	return r, err
}

// restricted is what restrictRunner did and found.
type restricted struct {
	filtered bool // the runner's seccomp filter is on the thread
	// traced: a debugger or strace traces the thread, so a child of it
	// may be traced from its fork (strace -f), and PTRACE_TRACEME would
	// fail there: forkHeld does not try it.
	traced bool
	// listener is the filter's seccomp listener (plan.Privileges.Notify),
	// for the engine's checker; -1: none.
	listener int
}

// installFilter installs the runner's one seccomp filter: the TIOCSTI
// denial, the socket rules of subreaper mode's network policy, and, with
// Notify, the hand-over of every call that names a socket address to the
// engine's checker, through the listener it returns (-1: none). The
// documented exception above (no filter at all) never covers a network
// policy or --hide: without its filter the runner would have the whole
// network, or the sockets beneath a hidden path.
func installFilter(p plan.Privileges) (int, error) {
	prog, err := seccomp.RunnerFilter(seccomp.RunnerRules{Sockets: p.Sockets, DenyVsock: p.DenyVsock, NotifyAddresses: p.Notify,
		NotifyWrites: p.NotifyWrites, NotifyMetadata: p.NotifyMetadata, ReportFS: p.ReportFS, NotifyMounts: p.NotifyMounts,
		DenyIOURing: p.DenyIOURing, Guard: p.Guard})
	listener := -1
	switch {
	case err != nil:
	case p.Checked():
		listener, err = seccomp.InstallWithListener(prog)
	default:
		err = seccomp.InstallOnThread(prog)
	}
	if err != nil {
		step := "deny TIOCSTI and TIOCLINUX to the runner (seccomp filter)"
		hint := "an outer seccomp profile or security module refuses filters here; run `corral probe`"
		if p.Guard != nil || p.DenyIOURing {
			step = "the runner's sandbox policy filter (seccomp: no io_uring, corral's processes held from SIGKILL and SIGSTOP)"
		}
		if p.Sockets != nil || p.Checked() {
			step = "the runner's socket policy (seccomp filter with user notification)"
			if p.NotifyWrites {
				step = "the runner's socket and write checks (seccomp filter with user notification)"
			}
			if p.NotifyMetadata {
				step = "the runner's filesystem policy: Landlock has no right for chmod, chown, xattrs or times, so corral checks them (seccomp filter with user notification)"
			}
		}
		if p.Sockets != nil || p.Checked() || p.Guard != nil || p.DenyIOURing {
			if p.AllowNewPrivs {
				hint = "--allow-new-privs leaves no_new_privs unset, and without CAP_SYS_ADMIN the kernel takes no filter (no seccomp filter, no Landlock policy); drop --allow-new-privs, or run in pidns mode"
			}
		}
		return -1, &setuperr.SetupError{Step: step, Err: err, Hint: hint}
	}
	return listener, nil
}

// MayForkFromEngine reports whether the runner may be forked from a
// thread of corral's own process (the starter). With a Landlock policy,
// the thread that forks must carry the runner's domain, and then a thread
// of corral is in it. That is allowed only for a policy of TCP ports
// alone (subreaper mode's --net none and --allow-net on a kernel without
// Landlock's scopes, where the IPC isolation they imply is the seccomp
// guard's, plan/ipc.go), which neither
// scopes signals nor resolves paths: being in the domain gives the runner
// nothing over that thread that its uid did not (Landlock only restricts;
// tracing it is refused because corral's process is not dumpable,
// supervise.guardFromRunner), and the exec stage would cost a second Go
// runtime start. Not with --isolate-ipc: a corral thread inside the scope
// is one the runner may tgkill, and a SIGKILL to one thread kills the
// whole of corral. Not with filesystem rules: their paths are resolved
// where the exec stage runs, in the runner's working directory and, in
// pidns mode, after the init's mounts, which the starter precedes. The
// exec stage is a process of its own that becomes the runner, so the
// domain never touches corral.
func MayForkFromEngine(plan *plan.Plan) bool {
	pol := plan.Privileges.Landlock
	return !pol.Active() || pol.NetOnly()
}

// confineRunner applies p to the calling thread, which then starts the
// runner (the exec stage's, or the starter's for a policy of TCP ports
// alone, MayForkFromEngine): the privilege drop and the TIOCSTI filter
// (restrictRunner) and the Landlock policy. The kernel takes a Landlock policy only from a thread
// with no_new_privs or CAP_SYS_ADMIN (in its user namespace), so it goes on
// after the drop, which sets no_new_privs, unless --allow-new-privs asks
// for none: then it goes on first, while the thread may still hold
// CAP_SYS_ADMIN (root, or, in pidns mode, the init's in its own user
// namespace, which the stage inherits). A thread with neither cannot have
// it, and the runner is not started. The stage runs after the init's
// mounts, so the rules bind the fresh /proc of a new PID namespace.
func confineRunner(p plan.Privileges) (restricted, error) {
	pol := p.Landlock
	if !pol.Active() {
		return restrictRunner(p)
	}
	if p.AllowNewPrivs && stage.HoldsCap(capability.CAP_SYS_ADMIN) {
		if err := restrictLandlock(pol, false); err != nil {
			return restricted{listener: -1}, err
		}
		return restrictRunner(p)
	}
	r, err := restrictRunner(p)
	if err != nil {
		return r, err
	}
	return r, restrictLandlock(pol, p.AllowNewPrivs)
}

// restrictLandlock enforces pol on the calling thread.
func restrictLandlock(pol landlock.Policy, allowNewPrivs bool) error {
	_, err := landlock.Restrict(pol)
	if err == nil {
		return nil
	}
	s := LandlockError(err)
	if allowNewPrivs {
		s.Hint = "--allow-new-privs leaves no_new_privs unset, and without CAP_SYS_ADMIN the kernel takes no Landlock policy; drop --allow-new-privs, or run corral as root or in pidns mode" +
			"; " + s.Hint
	}
	return s
}

// LandlockError is a failure to enforce the policy: a 125 that names
// Landlock and says that the runner did not start.
func LandlockError(err error) *setuperr.SetupError {
	const notRun = "corral does not run the command without the policy it was asked for"
	var pe *landlock.PolicyError
	if errors.As(err, &pe) {
		return &setuperr.SetupError{Step: "sandbox policy", Err: setuperr.Plain(err.Error()),
			Hint: "the path changed since corral started; " + notRun}
	}
	var ue *landlock.UnavailableError
	var ae *landlock.ABIError
	if errors.As(err, &ue) || errors.As(err, &ae) {
		// Their messages name Landlock, the errno and the fix already.
		return &setuperr.SetupError{Step: "sandbox policy", Err: setuperr.Plain(err.Error()), Hint: notRun + "; run `corral probe`"}
	}
	return &setuperr.SetupError{Step: "sandbox policy: Landlock", Err: err, Hint: notRun}
}
