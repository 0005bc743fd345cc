// Package early starts, for a run, the registration of the signals whose
// Go default is fatal (package sigstart), in its package initialisation:
// before main, and as soon as the Go runtime can, so that as few signals
// as possible find the Go runtime's default (a goroutine dump for
// SIGQUIT, death for SIGTERM or a closed pipe's SIGPIPE). Package
// sigstart holds the registration until package reaper takes it
// (reaper.CatchSignals) and does the rest.
//
// The Go runtime initialises packages by repeatedly taking the first, in
// import-path order, whose imports are all initialised. So this package
// imports nothing but what registering needs (os/signal, os, syscall,
// package sigstart, and the argv rule of package stagearg): it is then
// initialised right after os/signal, before golang.org/x/sys/unix, the
// OCI types, encoding/json and every package of corral's that needs them,
// which, with package reaper among its imports, it used to wait for (1 to
// 2 ms of a run's start). test/bench/window measures the window; keep
// this package's imports as they are.
package early

import (
	"os"

	"github.com/corral-sh/corral/internal/sigstart"
	"github.com/corral-sh/corral/internal/stagearg"
)

// Begun reports whether this process began the registration at its
// start: false when it is not a run (a subcommand, a stage corral
// re-executes itself as — each makes its own — or a test binary).
func Begun() bool { return begun }

var begun bool

// The subcommands: commands that do not run a runner. They keep the signal
// dispositions of a plain command-line tool. This is corral's one list of
// them: main dispatches by these names, and only for a name listed here.
const (
	Version = "version"
	Probe   = "probe"
	Spec    = "spec"
	Changes = "changes"
)

// IsSubcommand reports whether name is a subcommand.
func IsSubcommand(name string) bool {
	switch name {
	case Version, Probe, Spec, Changes:
		return true
	}
	return false
}

func init() {
	if stagearg.Current() != "" { // a stage registers its own (package sandbox)
		return
	}
	if a0 := os.Args[0]; len(a0) >= 5 && a0[len(a0)-5:] == ".test" {
		return
	}
	if args := os.Args[1:]; len(args) == 0 || !IsSubcommand(args[0]) {
		sigstart.BeginHeld()
		begun = true
	}
}
