// Command corral runs one command inside a process boundary and owns every
// process that command ever creates. main only dispatches: options and
// environment are parsed here, the boundary is built by package sandbox,
// and the engine lives in package reaper.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/corral-sh/corral/cmd/corral/internal/early"
	"github.com/corral-sh/corral/sandbox"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

const (
	exitUsage = 2
	exitSetup = 125
)

func main() {
	// corral re-executes itself for the roles that need a fresh process;
	// each is selected by an argv[0] that no user types by accident.
	switch {
	case sandbox.IsExecStage():
		sandbox.RunExecStage()
	case sandbox.IsInit():
		sandbox.RunInit()
	case sandbox.IsProbe():
		sandbox.RunProbeChild()
	}
	if wantsParentWatch(os.Args[1:]) {
		// --die-with-parent: before anything else (policy.go).
		parentAtStart = sandbox.WatchParent()
	}
	os.Exit(run(os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr))
}

// subcommands are the commands that do not run a runner (see also package
// early, which must agree).
var subcommands = map[string]bool{"version": true, "probe": true, "spec": true}

func run(args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "version":
			fmt.Fprintf(stdout, "corral %s\n", version)
			return 0
		case "probe":
			return runProbe(args[1:], stdout, stderr)
		case "spec":
			return runSpec(args[1:], stdout, stderr)
		}
	}
	opts, err := parseRun(args, lookup)
	if err != nil && early.Signals != nil {
		// Before anything is written: a closed pipe must not kill corral.
		early.Signals.WaitUrgent()
	}
	switch {
	case err == errHelp:
		fmt.Fprint(stdout, helpText)
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "usage: %v\nRun 'corral --help' for the options.\n", err)
		return exitUsage
	}
	opts.Stderr = stderr
	opts.Signals = early.Signals
	opts.Parent = takeParent(opts.DieWithParent)
	status, err := sandbox.Launch(opts)
	if err != nil {
		if early.Signals != nil {
			early.Signals.WaitUrgent()
		}
		fmt.Fprintf(stderr, "corral: %v\n", err)
		if status == 0 {
			status = exitSetup
		}
	}
	return status
}
