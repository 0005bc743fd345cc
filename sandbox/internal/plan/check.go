package plan

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/corral-sh/corral/internal/bounds"
	"github.com/corral-sh/corral/internal/setuperr"
)

// UsageError is a request that cannot mean anything, whatever the machine
// allows: Flag names the option at fault (as the command line spells it),
// Err says why. corral exits 2 for it.
type UsageError struct {
	Flag string
	Err  error
}

func (e *UsageError) Error() string { return e.Err.Error() }

func (e *UsageError) Unwrap() error { return e.Err }

func usage(flag, msg string) *UsageError { return &UsageError{Flag: flag, Err: errors.New(msg)} }

// ParseMode accepts the names of the --mode flag.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeAuto, ModePidns, ModeSubreaper:
		return m, nil
	}
	return "", fmt.Errorf("unknown mode %s: want auto, pidns or subreaper", bounds.Quote(s))
}

// Check is the one validation of a run's plan, made before anything
// starts: a *UsageError for a request that contradicts itself, or a
// *setuperr.SetupError (status 125) for one that only pidns mode could
// honour under --mode subreaper. What depends on the machine (a kernel
// without Landlock, a port taken) is found later, where it is tried.
// The allowlist's syntax is the host side's to check (sandbox.Options).
func (p *Plan) Check() error {
	if p.Mode != "" {
		if _, err := ParseMode(string(p.Mode)); err != nil {
			return &UsageError{Flag: "--mode", Err: err}
		}
	}
	if err := p.Net.check(p.Isolated(), p.policyOption() != ""); err != nil {
		return err
	}
	if err := p.checkOverlay(); err != nil {
		return err
	}
	if err := p.checkCaps(); err != nil {
		return err
	}
	if p.Mode == ModeSubreaper && p.Namespaces.Any() {
		return &setuperr.SetupError{Step: "subreaper mode", Err: errors.New("namespaces were requested (--config linux.namespaces or hostname)"),
			Hint: "only pidns mode can create them: use --mode pidns or --mode auto"}
	}
	return nil
}

// check refuses network options that mean nothing without the rest;
// policy: the run has a filesystem or network policy option.
func (n *Network) check(isolated, policy bool) error {
	switch {
	case len(n.HostPorts) > 0 && !isolated:
		return usage("--host-port", "--host-port needs --net none or --allow-net: with the host's network the runner reaches the port already")
	case len(n.Publish) > 0 && !isolated:
		return usage("--publish", "--publish needs --net none or --allow-net: with the host's network the runner's server is reachable already")
	case n.LogPath != "" && !policy:
		return usage("--log", "--log records what a policy allowed and refused: give a filesystem or network policy option too (--writable, --read-only, --hide, --net none, --allow-net)")
	case len(n.Deny) > 0 && !n.Proxy():
		return usage("--deny-net", "--deny-net narrows --allow-net: give --allow-net too (with the host's network nothing is filtered, with --net none nothing is reachable)")
	case n.NoProxyEnv && !n.Proxy():
		return usage("--no-proxy-env", "--no-proxy-env leaves out the proxy variables of --allow-net: give --allow-net too")
	case len(n.AllowUnix) > 0 && !isolated:
		return usage("--allow-unix", "--allow-unix needs --net none or --allow-net: with the host's network every Unix socket is reachable already")
	case n.ProxyAddr != "":
		return usage("Network.ProxyAddr", "Network.ProxyAddr is corral's to set")
	}
	for _, path := range n.AllowUnix {
		if !strings.HasPrefix(path, "/") {
			return usage("--allow-unix", fmt.Sprintf("--allow-unix %s: want an absolute path", bounds.Quote(path)))
		}
	}
	for _, list := range []struct {
		flag  string
		ports []uint16
	}{{"--host-port", n.HostPorts}, {"--publish", n.Publish}} {
		for i, port := range list.ports {
			if port == 0 {
				return usage(list.flag, list.flag+" 0: want a TCP port number from 1 to 65535")
			}
			for _, q := range list.ports[:i] {
				if q == port {
					return usage(list.flag, fmt.Sprintf("%s %d is given twice", list.flag, port))
				}
			}
		}
	}
	return nil
}

// policyOption names the first sandbox or network policy option the plan
// holds, as the command line spells it; "": none.
func (p *Plan) policyOption() string {
	ll := p.Privileges.Landlock
	for _, o := range []struct {
		flag string
		on   bool
	}{
		{"--net none", p.Namespaces.Net}, {"--allow-net", len(p.Net.Allow) > 0}, {"--deny-net", len(p.Net.Deny) > 0},
		{"--allow-unix", len(p.Net.AllowUnix) > 0}, {"--host-port", len(p.Net.HostPorts) > 0}, {"--publish", len(p.Net.Publish) > 0},
		{"--writable", len(ll.Writable) > 0}, {"--read-only", ll.ReadOnly}, {"--hide", len(ll.Hide) > 0}, {"--isolate-ipc", ll.IsolateIPC}, {"--overlay", len(p.Overlay) > 0},
	} {
		if o.on {
			return o.flag
		}
	}
	return ""
}

// checkCaps refuses a capability that undoes the sandbox together with a
// policy it would undo (SPEC.md, "Privileges of the runner").
func (p *Plan) checkCaps() error {
	option := p.policyOption()
	if option == "" {
		return nil
	}
	for _, c := range p.Privileges.Keep {
		if cost := CapCost(c); cost != "" {
			return usage("--cap-add", fmt.Sprintf("--cap-add %s cannot go with %s: %s; drop one of them", CapName(c), option, cost))
		}
	}
	return nil
}

// CapWarnings are the lines corral says once on stderr at launch for each
// capability kept that undoes the sandbox (allowed only without a policy
// option, which Check refuses otherwise).
func (p *Plan) CapWarnings() []string {
	var out []string
	for _, c := range p.Privileges.Keep {
		if cost := CapCost(c); cost != "" {
			out = append(out, fmt.Sprintf("--cap-add %s: %s", CapName(c), cost))
		}
	}
	return out
}

// RootNote is what corral says of a uid-0 runner (SPEC.md, "Privileges of
// the runner"): at launch when a network or IPC policy has no filesystem
// rule, and in corral probe.
const RootNote = "the runner runs as uid 0 and owns root's files: without --writable or --read-only it can change what root runs later (cron, systemd units, /etc) and through that leave the network and IPC policy; give --writable or --read-only"

// RootWarning is RootNote when the plan asks a network or IPC policy
// without a filesystem rule for a runner of uid (corral's runner keeps
// the caller's uid, in a user namespace too, which maps it to itself);
// "" otherwise.
func (p *Plan) RootWarning(uid int) string {
	ll := p.Privileges.Landlock
	asked := p.Isolated() || len(p.Net.AllowUnix) > 0 || ll.IsolateIPC
	if uid != 0 || !asked || len(ll.Writable) > 0 || ll.ReadOnly {
		return ""
	}
	return RootNote
}

// checkOverlay refuses --overlay where it cannot mean anything: it needs
// the runner's own mount namespace, which only pidns mode makes.
func (p *Plan) checkOverlay() error {
	if len(p.Overlay) == 0 {
		if p.Changes != "" {
			return usage("--changes", "--changes says where --overlay keeps a run's changes: give --overlay DIR too")
		}
		return nil
	}
	for i, d := range p.Overlay {
		if !filepath.IsAbs(d) {
			return usage("--overlay", fmt.Sprintf("--overlay %s: want an absolute path", bounds.Quote(d)))
		}
		for _, e := range p.Overlay[:i] {
			if e == d || beneathDir(d, e) || beneathDir(e, d) {
				return usage("--overlay", fmt.Sprintf("--overlay %s and --overlay %s overlap: give the outer one alone", bounds.Quote(e), bounds.Quote(d)))
			}
		}
	}
	if p.Mode == ModeSubreaper {
		return &setuperr.SetupError{Step: "--overlay " + p.Overlay[0], Err: errors.New("subreaper mode has no mount namespace to mount the copy-on-write layer in"),
			Hint: "use --mode pidns or --mode auto"}
	}
	return nil
}

func beneathDir(path, dir string) bool {
	return dir == "/" || len(path) > len(dir) && path[:len(dir)] == dir && path[len(dir)] == '/'
}
