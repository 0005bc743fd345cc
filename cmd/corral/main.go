//go:build linux

// Command corral runs one command inside a process boundary and owns every
// process that command ever creates. main only dispatches: options and
// environment are parsed here, the boundary is built by package sandbox,
// and the engine lives in package reaper.
package main

import (
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/corral-sh/corral/cmd/corral/internal/early"
	"github.com/corral-sh/corral/internal/exitstatus"
	"github.com/corral-sh/corral/reaper"
	"github.com/corral-sh/corral/sandbox"
	"golang.org/x/sys/unix"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// exitUsage is exitstatus.Usage under the name the option parser's tests
// know; new code uses exitstatus.Usage.
const exitUsage = exitstatus.Usage

func main() {
	// corral re-executes itself for the roles that need a fresh process
	// (the pidns init, the exec stage, the probe child), each selected by
	// an argv[0] that no user types by accident; such a process never
	// comes back from here.
	sandbox.RunStage()
	if wantsParentWatch(os.Args[1:]) {
		// --die-with-parent: before anything else (policy.go).
		parentAtStart = sandbox.WatchParent()
	}
	if err := warmPoller(); err != nil {
		fmt.Fprintf(os.Stderr, "corral: %v\n", err)
		os.Exit(exitstatus.Setup)
	}
	os.Exit(run(os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr))
}

func run(args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	if len(args) > 0 && early.IsSubcommand(args[0]) {
		return subcommand(args[0])(args[1:], stdout, stderr)
	}
	var sigs *reaper.Signals // nil in a test binary: sandbox makes its own
	if early.Begun() {
		sigs = reaper.CatchSignals() // takes over what early began
	}
	opts, notes, warnings, err := parseRunWarned(args, lookup)
	if err != nil && sigs != nil {
		// Before anything is written: a closed pipe must not kill corral.
		sigs.WaitUrgent()
	}
	switch {
	case err == errHelp:
		fmt.Fprint(stdout, helpText())
		return 0
	case err != nil:
		if s, ok := cancelledWhileParsing(sigs); ok {
			// The cancel came first: corral ends as for one before the
			// runner starts (SPEC.md, "Settings files").
			return exitstatus.SignalBase + int(s)
		}
		fmt.Fprintf(stderr, "usage: %v\nRun 'corral --help' for the options.\n", err)
		return exitstatus.Usage
	}
	opts.Stderr = stderr
	if len(warnings) > 0 && sigs != nil {
		sigs.WaitUrgent() // as for an error: a closed stderr must not kill corral
	}
	for _, w := range warnings {
		fmt.Fprintf(stderr, "corral: %s\n", w)
	}
	if opts.Verbose {
		for _, n := range notes {
			fmt.Fprintf(stderr, "corral: %s\n", n)
		}
	}
	opts.Signals = sigs
	opts.Parent = takeParent(opts.DieWithParent)
	status, err := sandbox.Launch(opts)
	if err != nil {
		if sigs != nil {
			sigs.WaitUrgent()
		}
		fmt.Fprintf(stderr, "corral: %v\n", err)
		if status == 0 {
			status = exitstatus.Setup
		}
	}
	return status
}

// cancelledWhileParsing returns a cancelling signal that arrived while
// corral read its options, when there is one; the others are dropped, as
// corral is about to exit.
func cancelledWhileParsing(sigs *reaper.Signals) (syscall.Signal, bool) {
	if sigs == nil {
		return 0, false
	}
	for {
		select {
		case sig := <-sigs.Incoming():
			if s, ok := sig.(syscall.Signal); ok && reaper.IsCancelling(s) {
				return s, true
			}
		default:
			return 0, false
		}
	}
}

// subcommand is the handler of each subcommand package early lists (the
// one list of them); nil for any other name.
func subcommand(name string) func(args []string, stdout, stderr io.Writer) int {
	switch name {
	case early.Version:
		return runVersion
	case early.Probe:
		return runProbe
	case early.Spec:
		return runSpec
	case early.Changes:
		return runChanges // changes.go
	}
	return nil
}

// runVersion prints the version; it takes no arguments and ignores any.
func runVersion(_ []string, stdout, _ io.Writer) int {
	fmt.Fprintf(stdout, "corral %s\n", version)
	return 0
}

// warmPoller makes the Go runtime create its poller (an epoll and an
// eventfd) now. The runtime does so at the first os.Open of any file, and
// dies with a fatal error and a stack trace, not an error value, when it
// cannot: at an RLIMIT_NOFILE of 6 or 7 corral would crash reading
// /proc/self/status rather than report EMFILE. So: with fewer than the
// three descriptors that first open needs, say so and stop; with them, open
// once now, and every later open fails with a plain EMFILE at worst.
func warmPoller() error {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err == nil && rl.Cur < 64 {
		free := 0
		for fd := 0; fd < int(rl.Cur); fd++ {
			if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == unix.EBADF {
				free++
			}
		}
		if free < 3 {
			return fmt.Errorf("too many open files (EMFILE): RLIMIT_NOFILE %d leaves %d free, and the Go runtime needs 3 to start its poller; raise it (ulimit -n)", rl.Cur, free)
		}
	}
	f, err := os.Open("/dev/null")
	if err == nil {
		f.Close()
	}
	return nil
}
