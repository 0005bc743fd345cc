// Package sandbox is what a Go program imports to launch a command
// contained: Options, Launch, Probe, WatchParent, and RunStage, the one
// entry point main calls first. Its files are the host side, the process
// the caller started:
//
//	options.go   Options, the caller's request, validated once into the
//	             run's plan (package stage)
//	launch.go    Launch: the mode choice and fallback; subreaper mode,
//	             where this process runs the engine
//	pidns.go     pidns mode: clone the init, relay signals, exit with its
//	             status
//	terminal.go  the terminal's foreground and job stops, in the process
//	             the caller's shell waits on
//	parent.go    --die-with-parent
//	network.go   the network policy's host side: the egress proxy and the
//	             port forwards, on sockets made where the runner lives
//	policy.go    the sandbox policy's preview, before anything starts
//	probe.go     Probe: `corral probe`
//	stage.go     RunStage, and the wiring of the roles into each process
//
// Every other process role has its own package beneath sandbox/internal
// (pidinit, supervise, runner, probe, egress), and they talk only through
// sandbox/internal/stage: the message table, the plan and the link. See
// docs/ARCHITECTURE.md for the roles, the message flow from flag to exec,
// where each promise is kept, and the Linux traps each part handles.
//
// The OCI config.json is not read here: package
// cmd/corral/internal/ociconfig turns it into Options before Launch.
package sandbox
