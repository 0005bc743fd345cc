package plan

import "github.com/corral-sh/corral/internal/seccomp"

// Implied IPC isolation (SPEC.md, the --isolate-ipc row, and "A policy run
// holds against a runner that turns on corral"): a runner under any
// filesystem or network policy cannot signal, stop or kill the processes
// that enforce it, nor reach the host's abstract Unix sockets. Landlock's
// scopes give both where the kernel has them (ABI 6, Linux 6.12); before
// that the seccomp filter refuses SIGKILL and SIGSTOP aimed at corral and
// the engine's checker refuses abstract names the tree did not bind.
// Either way such a run never fails for want of scopes: only an explicit
// --isolate-ipc needs them (125 without).

// PolicyRun reports whether the plan holds a sandbox or network policy
// option, the runs that imply IPC isolation and refuse io_uring; not
// --timeout, --die-with-parent or --cap-add alone, under which the runner
// is trusted.
func (p *Plan) PolicyRun() bool { return p.policyOption() != "" }

// WithImpliedIPC is the plan with the IPC isolation a policy run implies:
// Landlock's scopes where this kernel has them (scopes), otherwise guard,
// corral's own processes as the runner names them, for the seccomp filter,
// and the engine's checks of abstract names (IPCFallback). io_uring is
// refused under every policy: a ring makes the calls the policy checks
// where no filter sees them. A plan without a policy is returned as it is,
// and so is an explicit --isolate-ipc, which Landlock alone holds.
func (p Plan) WithImpliedIPC(scopes bool, guard seccomp.EnforcerGuard) Plan {
	if !p.PolicyRun() {
		return p
	}
	p.Privileges.DenyIOURing = true
	if p.Privileges.Landlock.IsolateIPC {
		return p
	}
	if scopes {
		p.Privileges.Landlock.IsolateIPC = true
		p.Privileges.ImpliedIPC = true
		return p
	}
	p.Privileges.Guard = &guard
	return p
}

// IPCFallback reports whether the plan's IPC isolation is held without
// Landlock's scopes (WithImpliedIPC on a kernel without them).
func (p *Plan) IPCFallback() bool { return p.Privileges.Guard != nil }

// IsolatesAbstract reports whether the engine's checker must refuse
// abstract Unix names the tree did not bind: an explicit --isolate-ipc
// (where Landlock holds them too), and the fallback.
func (p *Plan) IsolatesAbstract() bool { return p.Privileges.Landlock.IsolateIPC || p.IPCFallback() }
