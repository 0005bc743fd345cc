//go:build linux

package main

import "github.com/corral-sh/corral/sandbox"

// protectSettings adds the settings file read for this run, if any, to the
// paths protected beneath a writable one (SPEC, "Protected paths beneath a
// writable one"): a runner that may rewrite it would set the next run's
// policy.
func (f *runFlags) protectSettings(o *sandbox.Options, lookup func(string) (string, bool)) {
	path := f.settingsPath
	if !f.set["settings"] {
		path, _ = firstEnv(envSettings, lookup)
	}
	if path != "" {
		o.Privileges.Protect = append(o.Privileges.Protect, absolute([]string{path})...)
	}
}
