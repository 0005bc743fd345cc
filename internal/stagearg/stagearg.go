// Package stagearg is the one rule by which a process tells that it is
// one of the copies corral starts of itself (the pidns init, the exec
// stage, the probe child): an argv[0] that names the role, which no user
// types by accident, and one argument, the stage socket's descriptor
// number. It imports nothing but os, so that the package that registers
// corral's signals first (cmd/corral/internal/early) can ask it at no
// cost.
package stagearg

import "os"

// The argv[0] of each re-executed role.
const (
	Init  = "corral [init]"
	Exec  = "corral [exec]"
	Probe = "corral [probe]"
)

// Current returns this process's role (one of the constants above) when
// its command line is a stage's, else "". Whether argv[1] really is a
// socket is the stage's to find out (sandbox/internal/stage).
func Current() string {
	if len(os.Args) != 2 {
		return ""
	}
	switch a := os.Args[0]; a {
	case Init, Exec, Probe:
		return a
	}
	return ""
}
