//go:build linux

package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/corral-sh/corral/internal/bounds"
	"github.com/corral-sh/corral/sandbox"
)

// The network policy's options (docs/network.md).

var (
	envNet      = []string{"CORRAL_NET"}
	envAllowNet = []string{"CORRAL_ALLOW_NET"}
	envNetLog   = []string{"CORRAL_LOG", "CORRAL_NET_LOG"}
)

type netFlags struct {
	mode             string
	allow, hostPorts listFlag
	publish          listFlag
	deny, allowUnix  listFlag
	logPath          string
	noProxyEnv       bool
	allowFromEnv     bool // the allowlist is CORRAL_ALLOW_NET's
}

func registerNetFlags(fs *flag.FlagSet) *netFlags {
	f := &netFlags{}
	fs.StringVar(&f.mode, "net", "host", "")
	fs.Var(&f.allow, "allow-net", "")
	fs.Var(&f.hostPorts, "host-port", "")
	fs.Var(&f.publish, "publish", "")
	fs.Var(&f.deny, "deny-net", "")
	fs.Var(&f.allowUnix, "allow-unix", "")
	// --log, and its first name --net-log: one log of what the policy
	// did, network and filesystem alike.
	fs.StringVar(&f.logPath, "log", "", "")
	fs.StringVar(&f.logPath, "net-log", "", "")
	fs.BoolVar(&f.noProxyEnv, "no-proxy-env", false, "")
	return f
}

// apply sets the network policy in o, over what a config file set (its
// network namespace means --net none; an explicit --net host undoes it).
func (f *netFlags) apply(o *sandbox.Options, set map[string]bool, lookup func(string) (string, bool)) error {
	mode := f.mode
	if !set["net"] {
		if v, ok := firstEnv(envNet, lookup); ok && (v == "host" || v == "none") {
			mode = v // another value means the default, as for every variable
		}
	}
	switch mode {
	case "host":
		if set["net"] {
			o.Namespaces.Net = false
		}
	case "none":
		o.Namespaces.Net = true
	default:
		return fmt.Errorf("--net: unknown value %s: want host or none", bounds.Quote(mode))
	}

	o.Net.Allow = f.allow
	if v, ok := firstEnv(envAllowNet, lookup); ok && !set["allow-net"] {
		o.Net.Allow, f.allowFromEnv = strings.Split(v, ","), true
	}
	o.Net.Deny = f.deny
	o.Net.NoProxyEnv = f.noProxyEnv
	// Absolute now, as the caller meant it; what the options mean together
	// is Check's.
	for _, p := range absolute(f.allowUnix) {
		if _, err := os.Stat(p); err != nil && p != "" {
			return fmt.Errorf("--allow-unix %s: %v", bounds.Quote(p), errors.Unwrap(err))
		}
		o.Net.AllowUnix = append(o.Net.AllowUnix, p)
	}
	var err error
	if o.Net.HostPorts, err = ports("host-port", f.hostPorts); err != nil {
		return err
	}
	if o.Net.Publish, err = ports("publish", f.publish); err != nil {
		return err
	}
	o.Net.LogPath = f.logPath
	if set["log"] && set["net-log"] {
		return errors.New("--log and --net-log are one option: give it once")
	}
	if !set["log"] && !set["net-log"] && (len(o.Net.Allow) > 0 || o.Namespaces.Net) {
		// Exported for every run, the variable names where a run with a
		// network policy logs; a run without one is not asked to log.
		o.Net.LogPath, _ = firstEnv(envNetLog, lookup)
	}
	// What the options mean together is sandbox.Options.Check's to say.
	return nil
}

// named says where a malformed allowlist came from. An allowlist is the
// one variable that does not fall back to the default when it does not
// parse: the default is the whole network, and a typo must not open it.
func (f *netFlags) named(err error) error {
	var usage *sandbox.UsageError
	if f.allowFromEnv && errors.As(err, &usage) && usage.Flag == "--allow-net" {
		return fmt.Errorf("%s: %w", envAllowNet[0], err)
	}
	return err
}

// ports parses the values of a repeated port flag; which ports may go
// together is Check's to say.
func ports(flagName string, values []string) ([]uint16, error) {
	var out []uint16
	for _, v := range values {
		n, err := strconv.ParseUint(v, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("--%s %s: want a TCP port number from 1 to 65535", flagName, bounds.Quote(v))
		}
		out = append(out, uint16(n))
	}
	return out, nil
}
