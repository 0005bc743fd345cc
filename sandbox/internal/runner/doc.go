// Package runner is the runner's start: what is done on the one thread the
// runner comes from, and the execve. Two paths run it:
//
//   - the starter thread (start.go), a locked thread of the engine's
//     process, which drops the runner's privileges as soon as it exists and
//     forks the runner, held at its execve until the engine is ready; no
//     second Go runtime start;
//   - the exec stage (exec.go, argv[0] "corral [exec]"), a re-execution of
//     corral that becomes the runner: taken with --rlimit (rlimits belong to
//     the whole process) or a Landlock policy (the domain must never touch
//     corral's own process), or when the starter could not start it.
//
// On both, in this order: rlimits, the bounding set, the capability sets,
// the ambient set, no_new_privs, a read-back check (privileges.go); the
// seccomp filter that denies TIOCSTI and TIOCLINUX and the Landlock policy
// (confine.go); the caller's signal mask; execve. The runner's working
// directory is the caller's (or --cwd's); no process of corral's own keeps
// it once the runner has it.
package runner
