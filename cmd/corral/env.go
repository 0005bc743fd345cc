//go:build linux

package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/corral-sh/corral/internal/bounds"
	"github.com/corral-sh/corral/sandbox"
)

// The runner's environment policy, with bubblewrap's names (docs/usage.md,
// "The runner's environment"): --clearenv, then --unsetenv, then
// --setenv, applied to the environment the runner would get otherwise
// (the caller's without corral's own variables, or process.env of
// --config). The proxy variables of --allow-net come after all of them.

type envFlags struct {
	set   listFlag // VAR=VALUE, as joinSetenv made them
	unset listFlag // VAR, or a pattern with *
	clear bool
}

func registerEnvFlags(fs *flag.FlagSet) *envFlags {
	f := &envFlags{}
	fs.Var(&f.set, "setenv", "")
	fs.Var(&f.unset, "unsetenv", "")
	fs.BoolVar(&f.clear, "clearenv", false, "")
	return f
}

// joinSetenv rewrites bubblewrap's two-argument "--setenv VAR VALUE" as
// "--setenv=VAR=VALUE", the one value the flag package can hand over,
// before the command line is parsed. It walks args as the flag package
// will, so that a flag's value spelled "--setenv" stays a value, and it
// stops where the flags stop (at "--" or the first argument that is not a
// flag). "--setenv=VAR=VALUE" is accepted as it is.
func joinSetenv(fs *flag.FlagSet, args []string) ([]string, error) {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || len(a) < 2 || a[0] != '-' {
			return append(out, args[i:]...), nil
		}
		name, _, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if hasValue {
			out = append(out, a)
			continue
		}
		if name == "setenv" {
			if i+2 >= len(args) || args[i+1] == "--" || args[i+2] == "--" {
				return nil, fmt.Errorf("--setenv needs two arguments, VAR and VALUE: --setenv NAME VALUE")
			}
			v, value := args[i+1], args[i+2]
			if err := checkVarName("--setenv", v); err != nil {
				return nil, err
			}
			out = append(out, "--setenv="+v+"="+value)
			i += 2
			continue
		}
		out = append(out, a)
		fl := fs.Lookup(name)
		if fl == nil {
			continue // the flag package refuses it
		}
		if b, ok := fl.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		if i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
	}
	return out, nil
}

// checkVarName refuses what cannot be an environment variable's name.
func checkVarName(flagName, name string) error {
	if name == "" || strings.ContainsAny(name, "=\x00") {
		return fmt.Errorf("%s %s: not a variable name (want a non-empty name without = or NUL)", flagName, bounds.Quote(name))
	}
	return nil
}

// apply changes the runner's environment in o: --clearenv, then each
// --unsetenv, then each --setenv (a later one for the same name wins).
func (f *envFlags) apply(o *sandbox.Options) error {
	type setting struct{ name, value string }
	var sets []setting
	for _, kv := range f.set {
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("--setenv %s: want VAR VALUE (or --setenv=VAR=VALUE)", bounds.Quote(kv))
		}
		if err := checkVarName("--setenv", name); err != nil {
			return err
		}
		if strings.ContainsRune(value, 0) {
			return fmt.Errorf("--setenv %s: the value holds a NUL byte", name)
		}
		sets = append(sets, setting{name, value})
	}
	for _, pattern := range f.unset {
		if err := checkVarName("--unsetenv", pattern); err != nil {
			return err
		}
	}
	env := o.Env
	if f.clear {
		env = nil
	}
	out := make([]string, 0, len(env)+len(sets))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !unsetMatch(f.unset, name) {
			out = append(out, kv)
		}
	}
	noProxy := map[string]string{} // NO_PROXY and no_proxy as --setenv gave them
	for _, s := range sets {
		out = withVar(out, s.name, s.value)
		if s.name == "NO_PROXY" || s.name == "no_proxy" {
			noProxy[s.name] = s.value
		}
	}
	if len(noProxy) > 0 {
		// Asked for by name: kept beside the proxy variables of
		// --allow-net, unlike an inherited one. Clients read one case
		// or the other (curl and Python both), so a value given in one
		// case is the other's too, unless that was given as well.
		for name, other := range map[string]string{"NO_PROXY": "no_proxy", "no_proxy": "NO_PROXY"} {
			if v, ok := noProxy[name]; ok {
				if _, given := noProxy[other]; !given {
					out = withVar(out, other, v)
				}
			}
		}
		o.Net.KeepNoProxy = true
	}
	if f.clear || len(f.unset) > 0 || len(sets) > 0 {
		o.Env = out
	}
	return nil
}

// unsetMatch reports whether name matches one of the --unsetenv
// patterns: * stands for any run of characters, the rest is literal and
// case-sensitive, anchored at both ends.
func unsetMatch(patterns []string, name string) bool {
	for _, p := range patterns {
		if globMatch(p, name) {
			return true
		}
	}
	return false
}

func globMatch(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, part := range parts[1 : len(parts)-1] {
		i := strings.Index(s, part)
		if i < 0 {
			return false
		}
		s = s[i+len(part):]
	}
	return len(s) >= len(last) && strings.HasSuffix(s, last)
}

// withVar returns env with NAME=VALUE in place of every NAME=, or
// appended.
func withVar(env []string, name, value string) []string {
	out := env[:0]
	for _, kv := range env {
		if n, _, _ := strings.Cut(kv, "="); n != name {
			out = append(out, kv)
		}
	}
	return append(out, name+"="+value)
}
