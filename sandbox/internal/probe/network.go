package probe

import (
	"fmt"

	"github.com/corral-sh/corral/internal/landlock"
	"github.com/corral-sh/corral/internal/seccomp"
)

// probeNetwork is `corral probe`'s answer for the network policy: how each
// mode would enforce it here, and whether --net none and --allow-net work
// (docs/network.md). netns is the probe child's answer for a
// new network namespace beside the PID namespace and a fresh /proc;
// filter says whether the runner's seccomp filter can be installed. Every
// mode also needs the socket checks (user notification, pidfd_getfd,
// process_vm_readv: Unix sockets, --hide, and in subreaper mode every TCP
// address), without which a network policy is a 125.
func probeNetwork(netns Check, pidnsWorks bool, filter Check) []Check {
	checks := seccomp.ProbeNotify().NotifyMissing()
	pidns := Check{Name: "net, pidns", Available: netns.Available && pidnsWorks && checks == ""}
	switch {
	case !netns.Available:
		pidns.Detail = "no network namespace: " + netns.Detail
	case !pidnsWorks:
		pidns.Detail = "pidns mode does not work here (see above)"
	case checks != "":
		pidns.Detail = "no socket checks: " + checks + " missing"
	default:
		pidns.Detail = "a network namespace of its own (netns), loopback only; the egress proxy's socket is made inside it; Unix sockets and vsock checked by the engine (seccomp user notification)"
	}

	sub := Check{Name: "net, subreaper"}
	info, err := landlock.Describe()
	switch {
	case !filter.Available:
		sub.Detail = "no seccomp filter can be installed: " + filter.Detail
	case checks != "":
		sub.Detail = "no socket checks: " + checks + " missing"
	default:
		sub.Available = true
		sub.Detail = "seccomp socket filter (AF_UNIX, AF_NETLINK, and TCP when needed), every TCP connect and bind and every Unix connect checked by address by the engine (seccomp user notification)"
		if err == nil && info.TCPPortRules() {
			sub.Detail += fmt.Sprintf(", Landlock ABI %d TCP ports beside", info.ABI)
		}
	}

	none := Check{Name: "--net none", Available: pidns.Available || sub.Available}
	allow := Check{Name: "--allow-net", Available: pidns.Available || sub.Available}
	switch {
	case pidns.Available:
		none.Detail = "pidns: a network namespace with only loopback; subreaper: " + sub.Detail
		allow.Detail = "through corral's egress proxy: in pidns mode from a network namespace of its own"
		if sub.Available {
			allow.Detail += "; in subreaper mode with the seccomp filter and the socket checks"
		}
	case sub.Available:
		none.Detail = "subreaper mode: " + sub.Detail
		allow.Detail = "through corral's egress proxy, subreaper mode: " + sub.Detail
	default:
		none.Detail = "neither mode can enforce it here; corral refuses to run without it (125)"
		allow.Detail = none.Detail
	}
	return []Check{pidns, sub, none, allow}
}
