package stage

import (
	"time"

	"github.com/corral-sh/corral/internal/landlock"
)

// Mode is how the boundary is built.
type Mode string

const (
	ModeAuto      Mode = "auto"
	ModePidns     Mode = "pidns"
	ModeSubreaper Mode = "subreaper"
)

// Plan is one contained run, validated once from the caller's request
// (sandbox.Options) and never changed after: every process of the run
// reads it, the pidns init gets it in InitStart, field by field (every
// exported field crosses, byte for byte, unless tagged `wire:"-"`). What a
// process decides or makes while it runs (the terminal, the cgroup, the
// starter thread) is that process's own state, never written back here.
type Plan struct {
	Mode Mode

	Path string   // the runner, absolute
	Args []string // argv, Args[0] included
	Env  []string // the runner's whole environment
	Dir  string   // working directory; empty: inherited

	Grace     time.Duration
	Poll      time.Duration
	StatePath string

	Privileges Privileges
	Namespaces Namespaces

	Verbose bool

	// The sandbox policy beyond Privileges.Landlock.
	Timeout       time.Duration // the engine cancels the run this long after the runner started; 0: never
	DieWithParent bool          // the host side cancels the run when corral's parent exits
}

// Privileges are applied to the runner alone, on the thread it is forked or
// exec'd from.
type Privileges struct {
	// Keep are the capabilities kept, in all five sets; nothing else is.
	Keep          []int
	AllowNewPrivs bool
	Rlimits       []Rlimit
	// Landlock is the filesystem and IPC policy (--writable, --read-only,
	// --hide, --isolate-ipc), enforced on the same thread (package runner).
	Landlock landlock.Policy
}

// Namespaces beyond the PID and mount namespaces pidns mode always makes.
type Namespaces struct {
	Net      bool   // new network namespace: loopback only
	IPC      bool   // new System V IPC / POSIX message queue namespace
	UTS      bool   // new hostname namespace
	Hostname string // set in the new UTS namespace
	// User forces a user namespace even for a caller with CAP_SYS_ADMIN.
	User bool
	// PID says the PID and mount namespaces were asked for by name (a
	// --config linux.namespaces list), so subreaper mode cannot honour it.
	PID bool
}

// Any reports whether a namespace was asked for: only pidns mode honours it.
func (n Namespaces) Any() bool {
	return n.Net || n.IPC || n.UTS || n.User || n.Hostname != "" || n.PID
}
