//go:build linux

package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/corral-sh/corral/internal/bounds"
	"github.com/corral-sh/corral/internal/landlock"
	"github.com/corral-sh/corral/internal/proc"
	"github.com/corral-sh/corral/sandbox"
)

// The sandbox policy's options (docs/sandbox.md).

var envTimeout = []string{"CORRAL_TIMEOUT_SECONDS"}

type policyFlags struct {
	writable, hide, overlay             listFlag
	changes                             string
	readOnly, isolateIPC, dieWithParent bool
	timeout                             string
}

func registerPolicyFlags(fs *flag.FlagSet) *policyFlags {
	f := &policyFlags{}
	fs.Var(&f.writable, "writable", "")
	fs.Var(&f.hide, "hide", "")
	fs.Var(&f.overlay, "overlay", "")
	fs.StringVar(&f.changes, "changes", "", "")
	fs.BoolVar(&f.readOnly, "read-only", false, "")
	fs.BoolVar(&f.isolateIPC, "isolate-ipc", false, "")
	fs.BoolVar(&f.dieWithParent, "die-with-parent", false, "")
	fs.StringVar(&f.timeout, "timeout", "", "")
	return f
}

// apply sets the policy in o, over what a config file set: --writable
// replaces its root.readonly, as every flag wins over the file.
func (f *policyFlags) apply(o *sandbox.Options, set map[string]bool, lookup func(string) (string, bool)) error {
	pol := &o.Privileges.Landlock
	if set["read-only"] && f.readOnly && len(f.writable) > 0 {
		return errors.New("--read-only and --writable exclude each other: --read-only means nothing is writable; give one of them")
	}
	if len(f.writable) > 0 {
		pol.ReadOnly = false
	}
	if set["read-only"] {
		pol.ReadOnly = f.readOnly
	}
	// Absolute now: the exec stage resolves them in the runner's working
	// directory, and the caller meant its own.
	pol.Writable = append(pol.Writable, absolute(f.writable)...)
	pol.Hide = append(pol.Hide, absolute(f.hide)...)
	pol.IsolateIPC = pol.IsolateIPC || f.isolateIPC
	if err := landlock.Check(*pol); err != nil {
		var pe *landlock.PolicyError
		if errors.As(err, &pe) {
			if pe.Field == "read-only" && !set["read-only"] {
				return fmt.Errorf("--writable: %v (root.readonly of --config)", pe.Err)
			}
			if pe.Path == "" {
				return fmt.Errorf("--%s: %v", pe.Field, pe.Err)
			}
			return fmt.Errorf("--%s %s: %v", pe.Field, pe.Path, pe.Err)
		}
		return err
	}

	timeout, err := parseTimeout(f.timeout, set["timeout"], lookup)
	if err != nil {
		return err
	}
	o.Timeout = timeout

	if f.dieWithParent && proc.PID1() {
		return errors.New("--die-with-parent: corral is PID 1 of its namespace, and its parent lives outside it where corral cannot watch it (the namespace ends with corral anyway)")
	}
	o.DieWithParent = f.dieWithParent
	// --overlay: the copy-on-write workspace (sandbox/overlay.go).
	for _, d := range absolute(f.overlay) {
		if d == "" {
			return errors.New("--overlay: want a folder")
		}
		o.Overlay = append(o.Overlay, d)
	}
	if f.changes != "" {
		o.Changes = absolute([]string{f.changes})[0]
	}
	return nil
}

func absolute(paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if p != "" { // "" stays, for Check to refuse by name
			if abs, err := filepath.Abs(p); err == nil {
				p = abs
			}
		}
		out = append(out, p)
	}
	return out
}

// timeoutMax is the longest --timeout, a year: a finite bound, so that
// no spelling of a number ("1e400" parses to +Inf) reaches the timer as
// an endless or overflowing duration.
const timeoutMax = 31536000.0

// parseTimeout reads --timeout, strictly (a finite number above 0 and at
// most timeoutMax, or a usage error naming that range), or
// CORRAL_TIMEOUT_SECONDS, leniently as every variable: a value that does
// not parse means the default, no timeout, and so does an infinite one
// ("1e400"), which has no bound to be clamped to; one not above zero is
// no timeout either, and one above the maximum is clamped to it.
func parseTimeout(value string, flagSet bool, lookup func(string) (string, bool)) (time.Duration, error) {
	var seconds float64
	if flagSet {
		v, err := bounds.Float(value, true, nil, nil, 0, math.Inf(-1), math.Inf(1))
		if err != nil || math.IsInf(v, 0) || !(v > 0) || v > timeoutMax {
			return 0, fmt.Errorf("--timeout: invalid value %s: want seconds above 0 and at most %d (a year), e.g. 600 or 0.5", bounds.Quote(value), int(timeoutMax))
		}
		seconds = v
	} else if raw, ok := firstEnv(envTimeout, lookup); ok {
		v, err := bounds.Float(strings.TrimSpace(raw), true, nil, nil, 0, math.Inf(-1), math.Inf(1))
		if err != nil || math.IsInf(v, 0) {
			return 0, nil
		}
		seconds = min(v, timeoutMax)
	}
	if !(seconds > 0) {
		return 0, nil
	}
	// Never rounded down to "no timeout".
	return max(bounds.Seconds(seconds), time.Microsecond), nil
}

// parentAtStart is corral's parent, taken first thing in main when the
// command line asks for --die-with-parent.
var parentAtStart *sandbox.ParentWatch

// wantsParentWatch reports whether args may hold --die-with-parent, before
// they are parsed: the watch must begin before anything else happens. A
// false alarm (a flag's value spelled so) costs one pidfd, closed after
// parsing.
func wantsParentWatch(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && name == "die-with-parent" {
			return true
		}
	}
	return false
}

// takeParent hands the parent taken at start to a run that wants it, and
// lets go of it otherwise.
func takeParent(want bool) *sandbox.ParentWatch {
	p := parentAtStart
	parentAtStart = nil
	if !want {
		p.Close()
		return nil
	}
	return p // nil when main did not take it (tests): Launch takes it then
}
