// Package early starts, for a run, the registration of every signal corral
// handles (reaper.CatchSignals), in its package initialisation: before
// main, and before every package that sorts after it (the Go runtime
// initialises packages in import-path order once their imports are done),
// so that as few signals as possible find the Go runtime's default (a
// goroutine dump for SIGQUIT, death for SIGTERM or a closed pipe's
// SIGPIPE), and the registration, which goes on in the background, gets a
// head start on the launch.
package early

import (
	"os"
	"strings"

	"github.com/corral-sh/corral/internal/stagearg"
	"github.com/corral-sh/corral/reaper"
)

// Signals is the registration, nil when this process is not a run: a
// subcommand, a stage corral re-executes itself as (each makes its own),
// or a test binary.
var Signals *reaper.Signals

// The subcommands: commands that do not run a runner. They keep the signal
// dispositions of a plain command-line tool. This is corral's one list of
// them: main dispatches by these names, and only for a name listed here.
const (
	Version = "version"
	Probe   = "probe"
	Spec    = "spec"
)

// IsSubcommand reports whether name is a subcommand.
func IsSubcommand(name string) bool {
	switch name {
	case Version, Probe, Spec:
		return true
	}
	return false
}

func init() {
	if stagearg.Current() != "" { // a stage registers its own (package sandbox)
		return
	}
	if strings.HasSuffix(os.Args[0], ".test") {
		return
	}
	if args := os.Args[1:]; len(args) == 0 || !IsSubcommand(args[0]) {
		Signals = reaper.CatchSignals()
	}
}
