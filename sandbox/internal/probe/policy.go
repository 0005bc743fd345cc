package probe

import (
	"os"
	"strings"

	"github.com/corral-sh/corral/internal/landlock"
	"github.com/corral-sh/corral/sandbox/internal/plan"
)

// probePolicy is `corral probe`'s answer for the sandbox policy: what this
// kernel's Landlock enforces, and whether each option would work here;
// --die-with-parent's is the host side's (Run).
func probePolicy() []Check {
	var checks []Check
	info, err := landlock.Describe()
	rights := Check{Name: "landlock rights", Available: err == nil}
	if err != nil {
		rights.Detail = err.Error()
	} else {
		rights.Detail = info.String()
	}
	checks = append(checks, rights)

	// Each option's answer previews a policy of that kind, so a right
	// this ABI cannot enforce is named where it matters.
	fs := func(name, what string, pol landlock.Policy) Check {
		c := Check{Name: name, Available: err == nil}
		if err != nil {
			c.Detail = "needs Landlock; corral refuses to run without it (125)"
			return c
		}
		c.Detail = what
		rep, perr := landlock.Preview(pol)
		switch {
		case perr != nil:
			c.Available, c.Detail = false, perr.Error()
		case rep.Warning() != "":
			c.Detail += "; " + rep.Warning()
		}
		return c
	}
	checks = append(checks,
		fs("--writable", "write only beneath the given paths", landlock.Policy{Writable: []string{os.TempDir()}}),
		fs("--read-only", "nothing writable but the usual devices", landlock.Policy{ReadOnly: true}),
		fs("--hide", "no access beneath the given paths (their ancestors cannot be listed)", landlock.Policy{Hide: []string{os.TempDir()}}))

	ipc := Check{Name: "--isolate-ipc"}
	switch {
	case err != nil:
		ipc.Detail = "needs Landlock ABI 6 (Linux 6.12); corral refuses to run without it (125)"
	case !strings.Contains(strings.Join(info.Scopes, ","), "signal"):
		ipc.Detail = (&landlock.ABIError{What: "IPC isolation", Need: 6, Have: info.ABI}).Error() + "; corral refuses to run without it (125)"
	default:
		ipc.Available = true
		ipc.Detail = "no signals to, nor abstract Unix sockets of, processes outside the runner's tree"
	}
	implied := Check{Name: "implied IPC", Available: true}
	switch {
	case ipc.Available:
		implied.Detail = "every filesystem or network policy gets Landlock's signal and abstract Unix socket scopes; io_uring refused"
	default:
		implied.Detail = "no Landlock scopes here: for every filesystem or network policy the seccomp filter refuses SIGKILL and SIGSTOP aimed at corral and the socket checker refuses abstract Unix sockets the runner's tree did not bind (an unconnected sendmsg to a host datagram socket is not checked); io_uring refused"
	}
	checks = append(checks, probeProtect()) // protect.go
	checks = append(checks, ipc, implied,
		Check{Name: "--timeout", Available: true, Detail: "a timer in the engine; needs nothing from the kernel"})
	if os.Geteuid() == 0 {
		// A uid-0 runner owns root's files (SPEC.md, "Privileges of the
		// runner"): said where every policy option is.
		checks = append(checks, Check{Name: "uid-0 runner", Available: true, Detail: plan.RootNote})
	}
	return checks
}
