package plan

import (
	"errors"
	"fmt"

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
	if err := p.Net.check(p.Isolated()); err != nil {
		return err
	}
	if p.Mode == ModeSubreaper && p.Namespaces.Any() {
		return &setuperr.SetupError{Step: "subreaper mode", Err: errors.New("namespaces were requested (--config linux.namespaces or hostname)"),
			Hint: "only pidns mode can create them: use --mode pidns or --mode auto"}
	}
	return nil
}

// check refuses network options that mean nothing without the rest.
func (n *Network) check(isolated bool) error {
	switch {
	case len(n.HostPorts) > 0 && !isolated:
		return usage("--host-port", "--host-port needs --net none or --allow-net: with the host's network the runner reaches the port already")
	case len(n.Publish) > 0 && !isolated:
		return usage("--publish", "--publish needs --net none or --allow-net: with the host's network the runner's server is reachable already")
	case n.LogPath != "" && !n.Proxy():
		return usage("--net-log", "--net-log logs the connections of the egress proxy: give --allow-net too")
	case n.ProxyAddr != "":
		return usage("Network.ProxyAddr", "Network.ProxyAddr is corral's to set")
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
