//go:build linux && (amd64 || arm64)

package main

// The forks below are written in assembly so that the children never run a
// single instruction of Go: a forked copy of a Go process has one thread
// out of many, and the runtime (scheduler, GC, signal handlers) must not run
// in it. Each child only makes raw system calls and then exits or blocks.
// This keeps the runner's cost per process at one or two clone(2) calls, so
// the launcher under test, not the runner, is what a workload measures.

// orphan double-forks: an intermediate child forks a grandchild and exits at
// once, and the grandchild exits at once too, so it is orphaned (adopted by
// the nearest subreaper or PID 1) and must be reaped there. It returns the
// intermediate's pid, which the caller reaps. Both children share the
// caller's memory (vfork style, signals blocked meanwhile), so producing an
// orphan costs tens of microseconds, and the reaper's cost is what shows.
func orphan() (pid int, errno int)

// detached double-forks a helper that outlives the caller: the grandchild
// starts a new session, sets SIGTERM's disposition to handler (0 SIG_DFL:
// exit on SIGTERM; 1 SIG_IGN: ignore it), blocks every other signal, writes
// one byte to readyFD, closes every descriptor and then blocks in ppoll(2)
// forever. It returns the intermediate's pid, which the caller reaps.
func detached(handler uintptr, readyFD int) (pid int, errno int)

// sleeper forks a direct child that dies with the caller
// (PR_SET_PDEATHSIG=SIGKILL), blocks every signal, closes every
// descriptor and blocks in ppoll(2) forever. It returns the child's pid.
func sleeper() (pid int, errno int)

const forkSupported = true
