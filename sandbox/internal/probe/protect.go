package probe

import (
	"strings"

	"github.com/corral-sh/corral/internal/seccomp"
	"github.com/corral-sh/corral/sandbox/internal/plan"
)

// probeProtect names the protected paths beneath a --writable one, and
// whether this machine can hold them: the engine's checker makes the
// runner's write-intent calls (seccomp user notification, pidfd_getfd,
// process_vm_readv; an open's descriptor goes back with
// SECCOMP_IOCTL_NOTIF_ADDFD, Linux 5.14).
func probeProtect() Check {
	c := Check{Name: "protected paths", Available: true, Detail: strings.Join(plan.DescribeProtection(), "; ")}
	m := seccomp.ProbeNotify().NotifyMissing()
	if a := seccomp.AddfdSendMissing(); a != "" {
		if m != "" {
			m += ", "
		}
		m += a
	}
	if m != "" {
		c.Available = false
		c.Detail = "in subreaper mode needs " + m + ": a --writable run in subreaper mode exits 125 here (pidns mode holds them with mounts); " + c.Detail
	}
	return c
}
