package sandbox

import (
	"errors"

	"github.com/corral-sh/corral/internal/seccomp"
	"github.com/moby/sys/capability"
	"golang.org/x/sys/unix"
)

// restrictRunner applies p to the calling thread (applyPrivileges) and
// installs the seccomp filter that fails ioctl(TIOCSTI) and
// ioctl(TIOCLINUX) with EPERM (SPEC "Terminal": the runner cannot push
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
func restrictRunner(p Privileges) (filtered bool, err error) {
	if p.AllowNewPrivs && holdsCap(capability.CAP_SYS_ADMIN) {
		if err := denyTerminalInjection(); err != nil {
			return false, err
		}
		filtered = true
	}
	if err := applyPrivileges(p); err != nil {
		return filtered, err
	}
	if filtered {
		return true, nil
	}
	err = denyTerminalInjection()
	if p.AllowNewPrivs && errors.Is(err, unix.EACCES) {
		return false, nil
	}
	return err == nil, err
}

func denyTerminalInjection() error {
	prog, err := seccomp.DenyTerminalInjection()
	if err == nil {
		err = seccomp.InstallOnThread(prog)
	}
	if err != nil {
		return &SetupError{Step: "deny TIOCSTI and TIOCLINUX to the runner (seccomp filter)", Err: err,
			Hint: "an outer seccomp profile or security module refuses filters here; run `corral probe`"}
	}
	return nil
}

// probeInjectionFilter is `corral probe`'s answer: can the runner get the
// TIOCSTI/TIOCLINUX filter here, and when does it not.
func probeInjectionFilter() Check {
	c := Check{Name: "seccomp"}
	if _, err := seccomp.Probe(); err != nil {
		c.Detail = err.Error() + "; the runner cannot be denied TIOCSTI and TIOCLINUX, so corral refuses to run it"
		return c
	}
	c.Available = true
	c.Detail = "the runner is denied TIOCSTI and TIOCLINUX"
	if !holdsCap(capability.CAP_SYS_ADMIN) {
		c.Detail += " (not with --allow-new-privs in subreaper mode: without no_new_privs or CAP_SYS_ADMIN the kernel takes no filter)"
	}
	return c
}
