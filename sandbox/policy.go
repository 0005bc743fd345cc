package sandbox

// The sandbox policy (SPEC "Sandbox policy"): Landlock rules on the
// runner's thread, a timeout in the engine, and the parent watch of
// --die-with-parent on the host side.
//
// Where each part runs:
//
//	host side (Launch)  Landlock preview: refuse before anything starts when
//	                    the kernel cannot have the policy; -v and the one
//	                    warning line. The parent watch (parent.go).
//	runner's thread     confineRunner: the privilege drop and Restrict in
//	                    the exec stage, just before its execve; never on a
//	                    thread of corral's own process (mayForkFromEngine).
//	                    In pidns mode the stage is the init's child, after
//	                    the fresh /proc is mounted.
//	engine              Config.Timeout (reaper/timeout.go).
//
// The policy fails closed at both ends: the preview refuses a kernel
// without Landlock, and a Restrict that fails on the runner's thread stops
// the start, so the runner never runs without the policy asked for.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/corral-sh/corral/internal/landlock"
	"github.com/moby/sys/capability"
)

// startPolicy is the host side's part, before any mode starts anything.
func (o *Options) startPolicy() error {
	if o.Privileges.Landlock.Active() || o.Timeout > 0 || o.DieWithParent {
		// It may write to stderr, and send SIGTERM: neither may meet the
		// Go runtime's default.
		o.signals().WaitUrgent()
	}
	if pol := o.Privileges.Landlock; pol.Active() {
		rep, err := landlock.Preview(pol)
		if err != nil {
			return landlockError(err)
		}
		o.logf("%s", describePolicy(pol, rep))
		if w := rep.Warning(); w != "" {
			fmt.Fprintf(o.Stderr, "corral: %s\n", w)
		}
	}
	if o.Timeout > 0 {
		o.logf("timeout: the run is cancelled as by SIGTERM %v after the runner starts, and corral then exits 124", o.Timeout)
	}
	if o.DieWithParent {
		return o.watchParent()
	}
	return nil
}

// mayForkFromEngine reports whether the runner may be forked from a
// thread of corral's own process (the starter). Not with a Landlock
// policy: the thread that forks must carry the runner's domain, and a
// thread of corral in the runner's domain is one the runner may signal
// with tgkill (a SIGKILL to one thread kills the whole of corral, defeating
// --isolate-ipc) and ptrace-attach where its uid and Yama allow (Landlock
// lets a domain trace its own members), from which corral's memory, and
// every unrestricted thread, would be the runner's. The exec stage is a
// process of its own that becomes the runner, so the domain never touches
// corral; it costs one Go runtime start.
func (o *Options) mayForkFromEngine() bool { return !o.Privileges.Landlock.Active() }

// confineRunner applies p to the calling thread of the exec stage, which
// then execs the runner: the privilege drop and the TIOCSTI filter
// (restrictRunner, injection.go) and the Landlock policy. The kernel takes a Landlock policy only from a thread
// with no_new_privs or CAP_SYS_ADMIN (in its user namespace), so it goes on
// after the drop, which sets no_new_privs, unless --allow-new-privs asks
// for none: then it goes on first, while the thread may still hold
// CAP_SYS_ADMIN (root, or, in pidns mode, the init's in its own user
// namespace, which the stage inherits). A thread with neither cannot have
// it, and the runner is not started. The stage runs after the init's
// mounts, so the rules bind the fresh /proc of a new PID namespace.
func confineRunner(p Privileges) error {
	pol := p.Landlock
	if !pol.Active() {
		_, err := restrictRunner(p)
		return err
	}
	if p.AllowNewPrivs && holdsCap(capability.CAP_SYS_ADMIN) {
		if err := restrictLandlock(pol, false); err != nil {
			return err
		}
		_, err := restrictRunner(p)
		return err
	}
	if _, err := restrictRunner(p); err != nil {
		return err
	}
	return restrictLandlock(pol, p.AllowNewPrivs)
}

// restrictLandlock enforces pol on the calling thread.
func restrictLandlock(pol landlock.Policy, allowNewPrivs bool) error {
	_, err := landlock.Restrict(pol)
	if err == nil {
		return nil
	}
	s := landlockError(err)
	if allowNewPrivs {
		s.Hint = "--allow-new-privs leaves no_new_privs unset, and without CAP_SYS_ADMIN the kernel takes no Landlock policy; drop --allow-new-privs, or run corral as root or in pidns mode" +
			"; " + s.Hint
	}
	return s
}

// landlockError is a failure to enforce the policy: a 125 that names
// Landlock and says that the runner did not start.
func landlockError(err error) *SetupError {
	const notRun = "corral does not run the command without the policy it was asked for"
	var pe *landlock.PolicyError
	if errors.As(err, &pe) {
		return &SetupError{Step: "sandbox policy", Err: plainError(err.Error()),
			Hint: "the path changed since corral started; " + notRun}
	}
	var ue *landlock.UnavailableError
	var ae *landlock.ABIError
	if errors.As(err, &ue) || errors.As(err, &ae) {
		// Their messages name Landlock, the errno and the fix already.
		return &SetupError{Step: "sandbox policy", Err: plainError(err.Error()), Hint: notRun + "; run `corral probe`"}
	}
	return &SetupError{Step: "sandbox policy: Landlock", Err: err, Hint: notRun}
}

// plainError keeps a message whose errno is already named in it from
// being named twice by describeErr.
type plainError string

func (e plainError) Error() string { return string(e) }

// describePolicy is the -v line: the ABI and what the runner gets.
func describePolicy(pol landlock.Policy, rep landlock.Report) string {
	var parts []string
	switch {
	case len(pol.Writable) > 0:
		parts = append(parts, "writable only beneath "+strings.Join(pol.Writable, ", "))
	case pol.ReadOnly:
		parts = append(parts, "nothing writable")
	}
	if len(pol.Writable) > 0 || pol.ReadOnly {
		parts = append(parts, "/dev/null, /dev/zero, /dev/full, /dev/tty, /dev/ptmx and /dev/pts usable")
	}
	if len(pol.Hide) > 0 {
		parts = append(parts, "no access beneath "+strings.Join(pol.Hide, ", "))
	}
	if len(rep.Split) > 0 {
		parts = append(parts, fmt.Sprintf("%d directories along the hidden paths cannot be listed, nor gain entries the runner can reach (%s)",
			len(rep.Split), strings.Join(rep.Split, ", ")))
	}
	if len(rep.FS) > 0 {
		parts = append(parts, "filesystem rights handled: "+strings.Join(rep.FS, ", "))
	}
	if len(rep.Scopes) > 0 {
		parts = append(parts, "IPC scopes: "+strings.Join(rep.Scopes, ", ")+" (no signal to, nor abstract Unix socket of, a process outside the runner's tree)")
	}
	parts = append(parts, rep.Notes...)
	return fmt.Sprintf("landlock ABI %d: %s", rep.ABI, strings.Join(parts, "; "))
}
