package probe

import (
	"fmt"

	"github.com/corral-sh/corral/internal/landlock"
)

// probeNetwork is `corral probe`'s answer for the network policy: how each
// mode would enforce it here, and whether --net none and --allow-net work
// (README.md, "Network policy"). netns is the probe child's answer for a
// new network namespace beside the PID namespace and a fresh /proc;
// filter says whether the runner's seccomp filter can be installed.
func probeNetwork(netns Check, pidnsWorks bool, filter Check) []Check {
	pidns := Check{Name: "net, pidns", Available: netns.Available && pidnsWorks}
	if pidns.Available {
		pidns.Detail = "a network namespace of its own (netns), loopback only; the egress proxy's socket is made inside it"
	} else {
		pidns.Detail = "no network namespace: " + netns.Detail
		if netns.Available {
			pidns.Detail = "pidns mode does not work here (see above)"
		}
	}

	sub := Check{Name: "net, subreaper"}
	info, err := landlock.Describe()
	ports := err == nil && info.TCPPortRules()
	switch {
	case !filter.Available:
		sub.Detail = "no seccomp filter can be installed: " + filter.Detail
	case ports:
		sub.Available = true
		sub.Detail = fmt.Sprintf("seccomp socket filter (AF_UNIX, AF_NETLINK, and TCP when needed) + Landlock ABI %d TCP ports (connect only to the proxy and --host-port, bind only to --publish)", info.ABI)
	default:
		sub.Available = true
		sub.Detail = "seccomp socket filter only (no Landlock TCP port rules: ABI 4, Linux 6.7): --net none works; --allow-net, --host-port and --publish need pidns"
	}

	none := Check{Name: "--net none", Available: pidns.Available || sub.Available}
	allow := Check{Name: "--allow-net", Available: pidns.Available || (filter.Available && ports)}
	switch {
	case pidns.Available:
		none.Detail = "pidns: a network namespace with only loopback; subreaper: " + sub.Detail
		allow.Detail = "through corral's egress proxy: in pidns mode from a network namespace of its own"
		if filter.Available && ports {
			allow.Detail += "; in subreaper mode with seccomp + Landlock TCP ports"
		}
	case sub.Available:
		none.Detail = "subreaper mode: " + sub.Detail
		allow.Detail = "through corral's egress proxy, subreaper mode: " + sub.Detail
		if !ports {
			allow.Detail = "needs a network namespace or Landlock TCP port rules (ABI 4); corral refuses to run without them (125)"
		}
	default:
		none.Detail = "neither a network namespace nor a seccomp filter works here; corral refuses to run without them (125)"
		allow.Detail = none.Detail
	}
	return []Check{pidns, sub, none, allow}
}
