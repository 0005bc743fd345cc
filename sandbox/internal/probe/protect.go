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
	if m := seccomp.ProbeNotify().NotifyMissing(); m != "" {
		c.Available = false
		c.Detail = "needs " + m + " (and SECCOMP_IOCTL_NOTIF_ADDFD, Linux 5.14): a --writable run exits 125 here; " + c.Detail
	}
	return c
}
