package seccomp

import "golang.org/x/sys/unix"

// Functions only tests use, kept beside the package they test.

// DenyTerminalInjection returns the filter corral installs on the runner's
// thread when the run has no network policy: RunnerFilter(RunnerRules{}).
func DenyTerminalInjection() ([]unix.SockFilter, error) {
	return RunnerFilter(RunnerRules{})
}

func terminalFilter(goarch string) ([]unix.SockFilter, error) {
	return runnerFilter(goarch, RunnerRules{})
}
