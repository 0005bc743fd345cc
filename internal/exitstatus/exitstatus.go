// Package exitstatus names corral's exit statuses once (docs/usage.md, "Exit
// status"). Every process role maps its outcome to one of these; none
// writes the numbers itself.
package exitstatus

const (
	// UnknownWait: a wait status that is neither an exit nor a signal.
	UnknownWait = 1
	// Failure: a subcommand could not do its job (corral spec could not
	// write the config), as any command-line tool fails.
	Failure = 1
	// Usage: a malformed command line; stderr starts with "usage:".
	Usage = 2
	// Timeout: --timeout expired and the run was stopped.
	Timeout = 124
	// Setup: corral's own setup failed (a namespace, the subreaper flag, the
	// privilege drop, a policy the kernel cannot enforce).
	Setup = 125
	// NotExecutable: the runner was found but could not be executed.
	NotExecutable = 126
	// NotFound: the runner could not be found.
	NotFound = 127
	// SignalBase is added to the number of the signal that killed the
	// runner (SIGKILL: 137).
	SignalBase = 128
)
