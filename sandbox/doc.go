// Package sandbox builds the boundary a runner lives in and starts it.
//
// The process roles that live here (the last three are re-executions of
// the corral binary, selected by an argv[0] no user types by accident):
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
package sandbox
