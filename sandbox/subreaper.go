package sandbox

import (
	"github.com/corral-sh/corral/internal/exitstatus"
	"github.com/corral-sh/corral/internal/proc"
	"github.com/corral-sh/corral/reaper"
	"github.com/corral-sh/corral/sandbox/internal/runner"
	"github.com/corral-sh/corral/sandbox/internal/stage"
	"github.com/corral-sh/corral/sandbox/internal/supervise"
)

// runSubreaper runs the engine in this process: the host side is the
// engine's process, and the process the caller's shell waits on. why is
// -v's reason for the mode.
func runSubreaper(p *stage.Proc, n *network, why string) (int, error) {
	if proc.PID1() {
		why += "; corral is PID 1 and reaps its namespace"
	}
	run, how, err := n.forSubreaper() // network.go
	if err != nil {
		return exitstatus.Setup, err
	}
	engine := supervise.New(p, &run, 0, runner.Prepare, n.onRefused) // its cgroup is made in Prepare
	if n.proxy != nil {
		// The checker runs in this process: a connect to an address an
		// entry admits is made on the runner's socket (egress.DirectConnect),
		// a connect to port 53 reaches corral's DNS responder.
		engine.SetEgress(supervise.Egress{Direct: n.proxy.DirectConnect, DNSTCP: n.dns.TCP, DNSUDP: n.dns.UDP})
	}
	p.Logf("mode subreaper: %s", why)
	if how != "" {
		p.Logf("network: %s", how)
	}
	var jobs reaper.JobControl
	term := openTerminal(p) // terminal mode (terminal.go)
	if term != nil {
		defer term.restore()
		jobs = term
	}
	engine.Prepare(term != nil)
	return engine.Run(jobs, false)
}
