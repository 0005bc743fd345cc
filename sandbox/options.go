package sandbox

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/corral-sh/corral/internal/bounds"
	"github.com/corral-sh/corral/reaper"
	"github.com/corral-sh/corral/sandbox/internal/egress"
	"github.com/corral-sh/corral/sandbox/internal/stage"
)

// Mode is how the boundary is built.
type Mode = stage.Mode

const (
	ModeAuto      = stage.ModeAuto
	ModePidns     = stage.ModePidns
	ModeSubreaper = stage.ModeSubreaper
)

// ParseMode accepts the names of the --mode flag.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeAuto, ModePidns, ModeSubreaper:
		return m, nil
	}
	return "", fmt.Errorf("unknown mode %s: want auto, pidns or subreaper", bounds.Quote(s))
}

// Options are the caller's request for one contained run. Launch validates
// them once into the run's plan, which is what every process of the run
// reads and what crosses to the pidns init; the rest (Stderr, Signals,
// Parent) stays in the calling process.
type Options struct {
	Mode Mode

	Path string   // the runner, absolute
	Args []string // argv, Args[0] included
	Env  []string // the runner's whole environment
	Dir  string   // working directory; empty: inherited

	Grace     time.Duration
	Poll      time.Duration
	StatePath string

	Privileges Privileges
	Namespaces Namespaces
	Net        Network

	Verbose bool
	Stderr  io.Writer

	// Signals is the process's signal registration (reaper.CatchSignals),
	// made at its start; nil: made when needed.
	Signals *reaper.Signals

	// The sandbox policy beyond Privileges.Landlock (policy.go).
	Timeout       time.Duration // the engine cancels the run this long after the runner started; 0: never
	DieWithParent bool          // the host side cancels the run when corral's parent exits
	// Parent is corral's parent as found at corral's start (WatchParent),
	// for DieWithParent; nil: taken when Launch starts.
	Parent *ParentWatch
}

// Privileges are applied to the runner alone, on the thread it is forked or
// exec'd from.
type Privileges = stage.Privileges

// Namespaces beyond the PID and mount namespaces pidns mode always makes.
type Namespaces = stage.Namespaces

// Rlimit is one resource limit for the runner.
type Rlimit = stage.Rlimit

// SetupError is a failure of corral's own setup: exit status 125. It is
// the module's one setup error type (the engine's too), so a failure in a
// re-executed stage decodes into the same type, errno included.
type SetupError = reaper.SetupError

// ParseCap accepts a capability name as in capabilities(7), with or
// without the CAP_ prefix, in any case: "NET_BIND_SERVICE",
// "cap_net_bind_service".
func ParseCap(name string) (int, error) { return stage.ParseCap(name) }

// CapName is the capabilities(7) name of c, e.g. CAP_NET_BIND_SERVICE.
func CapName(c int) string { return stage.CapName(c) }

// RlimitByName returns the resource number of a spec name like RLIMIT_NOFILE.
func RlimitByName(name string) (int, error) { return stage.RlimitByName(name) }

// ParseRlimit parses NAME=SOFT[:HARD]; a missing HARD equals SOFT, and
// "unlimited" (or "infinity") means no limit.
func ParseRlimit(s string) (Rlimit, error) { return stage.ParseRlimit(s) }

// WithRlimit returns list with rl in place of any limit on the same resource.
func WithRlimit(list []Rlimit, rl Rlimit) []Rlimit { return stage.WithRlimit(list, rl) }

// plan validates the request once into the run's plan.
func (o *Options) plan() (stage.Plan, error) {
	mode := o.Mode
	if mode == "" {
		mode = ModeAuto
	}
	if _, err := ParseMode(string(mode)); err != nil {
		return stage.Plan{}, &SetupError{Step: "choose the mode", Err: err}
	}
	if err := checkNetwork(o); err != nil {
		return stage.Plan{}, &SetupError{Step: "network policy", Err: err}
	}
	if mode == ModeSubreaper && o.Namespaces.Any() {
		return stage.Plan{}, &SetupError{Step: "subreaper mode", Err: errors.New("namespaces were requested (--net, --config linux.namespaces or hostname)"),
			Hint: "only pidns mode can create them: use --mode pidns or --mode auto"}
	}
	return stage.Plan{
		Mode: mode,
		Path: o.Path, Args: o.Args, Env: o.Env, Dir: o.Dir,
		Grace: o.Grace, Poll: o.Poll, StatePath: o.StatePath,
		Privileges: o.Privileges, Namespaces: o.Namespaces, Net: o.Net,
		Verbose:       o.Verbose,
		Timeout:       o.Timeout,
		DieWithParent: o.DieWithParent,
	}, nil
}

// Network is the network policy beyond --net none (Namespaces.Net):
// --allow-net, --host-port, --publish, --net-log.
type Network = stage.Network

// ParseNetRule checks one --allow-net destination, HOST[:PORT]: a DNS name,
// a *.wildcard, an IP address or a CIDR, with a port 1-65535 or *
// (default: 80 and 443). Its error is a usage error.
func ParseNetRule(s string) (string, error) {
	r, err := egress.ParseRule(s)
	if err != nil {
		return "", err
	}
	return r.String(), nil
}

// checkNetwork refuses a network policy that cannot mean anything: cmd
// gives usage errors for these first, a Go caller gets a setup error.
func checkNetwork(o *Options) error {
	for _, d := range o.Net.Allow {
		if _, err := egress.ParseRule(d); err != nil {
			return err
		}
	}
	isolated := o.Namespaces.Net || len(o.Net.Allow) > 0
	switch {
	case (len(o.Net.HostPorts) > 0 || len(o.Net.Publish) > 0) && !isolated:
		return errors.New("--host-port and --publish need --net none or --allow-net")
	case o.Net.LogPath != "" && len(o.Net.Allow) == 0:
		return errors.New("--net-log needs --allow-net")
	case o.Net.ProxyAddr != "":
		return errors.New("Network.ProxyAddr is corral's to set")
	}
	return nil
}
