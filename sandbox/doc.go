// Package sandbox builds the boundary a runner lives in and starts it.
//
// The process roles that live here (the last three are re-executions of
// the corral binary, selected by an argv[0] no user types by accident and
// entered through RunStage, the one entry point main calls first):
//
//   - the host side (Launch): picks the mode; in pidns mode it clones the
//     init into new namespaces, forwards signals to it and exits with its
//     status; in subreaper mode it runs the engine itself;
//   - the init (argv[0] "corral [init]"): PID 1 of the new PID namespace;
//     mounts a private /proc, then runs the reaper engine;
//   - the exec stage (argv[0] "corral [exec]"): the runner's process before
//     execve, on one locked OS thread: rlimits, capability sets,
//     no_new_privs, a read-back check, then execve. Without rlimits the
//     engine does the same on a throwaway locked thread and forks the
//     runner from it, saving a Go runtime start (startRunnerDirect);
//   - the probe child (argv[0] "corral [probe]"): tries one feature.
//
// On a terminal, the process the caller's shell waits on (the subreaper
// engine's, or the pidns host side) gives the runner its own process group
// and the foreground, stops and continues as the runner's job does, and
// restores the foreground group at exit (terminal.go). On every path the
// runner's thread gets the seccomp filter that denies TIOCSTI and TIOCLINUX
// (injection.go).
//
// Each stage talks to its parent over one socket (stage.go), placed above
// every descriptor the caller passed so those keep their numbers: one start
// message in, one reply out, as byte-exact frames (internal/wire). A setup
// failure comes back as a typed message that decodes into the same
// *SetupError, errno included, and the parent prints it once; the exec
// stage's socket is close-on-exec, so EOF means the runner is running.
//
// # Files by process role
//
// Each file belongs to the process that runs its code:
//
//	launch.go     host side: Launch, the mode choice, runEngine (the
//	              engine's configuration, shared by the subreaper host and
//	              the pidns init)
//	host.go       host side, pidns: clone the init, relay signals, exit
//	              with its status
//	diagnose.go   host side: why pidns mode failed, and whether auto falls back
//	terminal.go   host side (the process the shell waits on): the
//	              terminal's foreground and job stops
//	parent.go     host side: --die-with-parent
//	init.go       pidns init: the namespaces' setup, then the engine as PID 1
//	procmount.go  pidns init: the private /proc
//	loopback.go   pidns init: lo up in a new network namespace
//	execstage.go  exec stage, and the engine's start of the runner (held
//	              fork, or the exec stage with --rlimit or a policy)
//	injection.go  the runner's thread (exec stage or starter thread):
//	              privileges and the TIOCSTI filter
//	policy.go     the runner's thread: Landlock; host side: its preview
//	probe.go      probe child, and `corral probe`'s checks (host side)
//	policyprobe.go `corral probe`'s sandbox policy checks
//	stage.go      the protocol between a parent and each stage: RunStage,
//	              spawnStage, the start and reply messages
//	inherit.go    what the caller passed (fds, signal mask), read at start
//	              by every role and handed on to the runner unchanged
//	options.go, rlimit.go, caps.go, errno.go: the types every role shares
//
// The OCI config.json is not read here: package cmd/corral/internal/ociconfig turns
// it into Options before Launch.
package sandbox
