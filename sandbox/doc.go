// Package sandbox is what a Go program imports to launch a command
// contained: Options, Launch, Probe, WatchParent, and RunStage, the one
// entry point main calls first. Its files are the host side, the process
// the caller started, read top to bottom:
//
//	launch.go     Launch: one run from the checked request to the exit
//	              status; the mode choice and auto's fallback
//	options.go    Options: the run's plan (package plan) and what only
//	              this process holds; Check, the one validation
//	pidns.go      pidns mode: clone the init, relay signals, exit with its
//	              status
//	subreaper.go  subreaper mode: this process runs the engine
//	policy.go     the sandbox policy's preview, before anything starts
//	network.go    the network session: the egress proxy and the port
//	              forwards on sockets made where the runner lives, each
//	              mode's network plan, the refused socket calls named
//	terminal.go   the terminal's foreground and job stops, in the process
//	              the caller's shell waits on
//	parent.go     --die-with-parent
//	probe.go      Probe: `corral probe`
//	stage.go      RunStage, and the wiring of the roles into each process
//
// Every other process role has its own package beneath sandbox/internal
// (pidinit, supervise, runner, probe), and they talk only through
// sandbox/internal/stage; beside them stand the packages that are no
// process of their own (plan, explain, egress, sockcheck). See
// docs/ARCHITECTURE.md for the roles, the message flow from flag to exec,
// where each promise is kept, and the Linux traps each part handles.
//
// The OCI config.json is not read here: package
// cmd/corral/internal/ociconfig turns it into Options before Launch.
package sandbox
