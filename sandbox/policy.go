package sandbox

// The sandbox policy (docs/sandbox.md): Landlock rules on the
// runner's thread, a timeout in the engine, and the parent watch of
// --die-with-parent on the host side.
//
// Where each part runs:
//
//	host side (Launch)  Landlock preview: refuse before anything starts when
//	                    the kernel cannot have the policy; -v and the one
//	                    warning line. The parent watch (parent.go).
//	runner's thread     package runner: the privilege drop and Restrict in
//	                    the exec stage, just before its execve; on a
//	                    thread of corral's own process only for a policy
//	                    of TCP ports alone (MayForkFromEngine). In pidns
//	                    mode the stage is the init's child, after the
//	                    fresh /proc is mounted.
//	engine              Config.Timeout (reaper/timeout.go).
//
// The policy fails closed at both ends: the preview refuses a kernel
// without Landlock, and a Restrict that fails on the runner's thread stops
// the start, so the runner never runs without the policy asked for.

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/corral-sh/corral/internal/landlock"
	"github.com/corral-sh/corral/internal/seccomp"
	"github.com/corral-sh/corral/sandbox/internal/plan"
	"github.com/corral-sh/corral/sandbox/internal/runner"
	"github.com/corral-sh/corral/sandbox/internal/stage"
	"golang.org/x/sys/unix"
)

// startPolicy is the host side's part, before any mode starts anything.
// parent is the watch taken at corral's start, or nil.
func startPolicy(p *stage.Proc, run *plan.Plan, parent *ParentWatch) error {
	warnings := run.CapWarnings()
	if w := run.RootWarning(os.Geteuid()); w != "" {
		warnings = append(warnings, w)
	}
	impliedIPC(p, run)
	if run.Privileges.Landlock.Active() || run.Timeout > 0 || run.DieWithParent || len(warnings) > 0 {
		// It may write to stderr, and send SIGTERM: neither may meet the
		// Go runtime's default.
		p.Signals().WaitUrgent()
	}
	if pol := run.Privileges.Landlock; pol.Active() {
		rep, err := landlock.Preview(pol)
		if err != nil {
			return runner.LandlockError(err)
		}
		p.Logf("%s", describePolicy(pol, rep))
		// The engine's checker holds connects to Unix sockets beneath
		// hidden paths, in every mode (sandbox/internal/sockcheck).
		rep.NotEnforced = slices.DeleteFunc(rep.NotEnforced, func(s string) bool { return s == landlock.UnixSocketsBeneathHidden })
		if w := rep.Warning(); w != "" {
			fmt.Fprintf(p.Stderr, "corral: %s\n", w)
		}
	}
	// What a kept capability costs, and a uid-0 runner's way out (SPEC.md,
	// "Privileges of the runner"): once, here on the host side, when the
	// policy's preview let the run go on.
	for _, w := range warnings {
		fmt.Fprintf(p.Stderr, "corral: %s\n", w)
	}
	if run.Timeout > 0 {
		p.Logf("timeout: the run is cancelled as by SIGTERM %v after the runner starts, and corral then exits 124", run.Timeout)
	}
	if run.DieWithParent {
		if parent == nil {
			parent = WatchParent()
		}
		return parent.watch(p) // parent.go
	}
	return nil
}

// impliedIPC gives a policy run the IPC isolation it implies (plan/ipc.go):
// Landlock's scopes where this kernel has them, otherwise the seccomp
// guard of corral's own processes, as the runner names them in subreaper
// mode (ForPidns names none), and the checker's abstract names. -v says
// which.
func impliedIPC(p *stage.Proc, run *plan.Plan) {
	info, err := landlock.Describe()
	scopes := err == nil && info.IPCScopes()
	*run = run.WithImpliedIPC(scopes, seccomp.EnforcerGuard{PID: os.Getpid(), PGID: unix.Getpgrp()})
	switch {
	case run.IPCFallback():
		have := "no Landlock"
		if err == nil {
			have = fmt.Sprintf("Landlock ABI %d", info.ABI)
		}
		p.Logf("IPC isolation (implied by the policy): %s has no scopes (ABI 6, Linux 6.12), so the seccomp filter refuses SIGKILL and SIGSTOP aimed at corral and the socket checker refuses abstract Unix sockets the runner's tree did not bind; io_uring refused", have)
	case run.Privileges.ImpliedIPC:
		p.Logf("IPC isolation (implied by the policy): Landlock's signal and abstract Unix socket scopes; io_uring refused")
	case run.Privileges.DenyIOURing:
		p.Logf("io_uring refused (a sandbox policy)")
	}
}

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
