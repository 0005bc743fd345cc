// Package reaper is corral's engine: it starts the runner, is the single
// owner of wait4 for every process below it, keeps the adoption accounting,
// forwards signals, and tears the tree down with grace and escalation.
//
// With a JobControl (terminal mode) it also follows the runner's stops
// with WUNTRACED and continues the runner's process group (jobcontrol.go).
//
// It behaves the same as PID 1 of a PID namespace and as a child subreaper
// in the caller's namespaces; it knows nothing about how the runner's
// boundary was built (see package sandbox) nor about flags (see cmd/corral).
// Its phases are one state machine (phase.go): starting, running,
// terminating, killing, exited.
//
// Config.State takes any StateWriter; package reaper/statefile is corral's
// own (statefile.Open), an atomic file that a runner sharing its folder
// cannot redirect. The statuses Run returns are corral's (docs/usage.md,
// "Exit status"): the runner's own, 128+signal, ExitTimeout, and 125 with a
// *SetupError.
//
// # What Run takes over in its process
//
// The engine supervises processes, and processes are per process, not per
// goroutine: while Run runs it owns these, for the whole calling process.
//
//   - wait4(-1): it reaps every child of the process, whoever started it,
//     with wait4(-1, WNOHANG|__WALL). It must be the only waiter: another
//     goroutine's exec.Cmd.Wait, os.Process.Wait or wait4 would steal
//     exits from it (and get ECHILD for the ones it took). Config.Start
//     starts the runner and returns its pid without waiting; with
//     os.StartProcess, call Release on the *os.Process, never Wait.
//   - every child of the process is part of the runner's tree: at
//     teardown it gets SIGTERM (or the cancelling signal) and then
//     SIGKILL, like the runner's own descendants. Start no other child
//     while Run runs.
//   - the child-subreaper bit (prctl PR_SET_CHILD_SUBREAPER) is set unless
//     the process is PID 1, so that orphans of the tree come back to it,
//     and it stays set after Run returns.
//   - signal handlers: signal.Notify for SIGPIPE, the cancelling signals
//     (SIGTERM, SIGINT, SIGQUIT: they end the run), SIGCHLD, and every
//     signal it forwards to the runner (SIGHUP, SIGUSR1/2, SIGWINCH,
//     SIGCONT, SIGALRM, the job-control signals, the faults sent with
//     kill(2), real-time signals 35–64; the table is in signals.go). A
//     signal ignored when the process started stays ignored. A caller's
//     own signal.Notify for these still gets them, but the engine acts on
//     them too. Without Config.Signals, Run registers them itself and
//     removes them when it returns, unless OwnsProcess.
//   - job stops: a SIGTSTP, SIGTTIN or SIGTTOU it receives is passed to the
//     runner and then stops the whole process (SIGSTOP to itself, unless
//     it is PID 1), as a shell expects of a job; with a JobControl, the
//     runner's own stop stops the process the same way.
//   - OS threads: CatchSignals makes three idle OS threads for the Go
//     runtime, kept for the process's life, so that a runner that fills a
//     shared pids.max cannot make the runtime fail to create one.
//   - RLIMIT_NOFILE: when the runner lowers the process's limit (prlimit),
//     the engine raises it back to what it was at start, if it may.
//   - with OwnsProcess, the GC target (debug.SetGCPercent(25)), and its
//     signal handlers stay registered after Run returns.
//
// # What a library caller must not do
//
//   - run two Runs at once in one process, or a Run beside any other code
//     that forks and waits;
//   - wait for the runner or any other child while Run runs (see above);
//   - set OwnsNamespace unless the process is PID 1 of a PID namespace
//     made for this run: the engine's SIGKILL is then kill(-1), which in
//     the caller's namespace reaches every process of the user;
//   - set OwnsProcess in a process that lives on after Run;
//   - rely on a burst of one real-time signal arriving as many: the Go
//     runtime may coalesce a burst of one signal number into one delivery,
//     which the engine then forwards once.
//
// Example shows the smallest complete use.
package reaper
