package sandbox

import (
	"fmt"
	"io"
	"time"

	"github.com/corral-sh/corral/internal/bounds"
	"github.com/corral-sh/corral/internal/cgroup"

	"github.com/corral-sh/corral/internal/landlock"
	"github.com/corral-sh/corral/reaper/statefile"
	"github.com/corral-sh/corral/reaper"
)

// Mode is how the boundary is built.
type Mode string

const (
	ModeAuto      Mode = "auto"
	ModePidns     Mode = "pidns"
	ModeSubreaper Mode = "subreaper"
)

// ParseMode accepts the names of the --mode flag.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeAuto, ModePidns, ModeSubreaper:
		return m, nil
	}
	return "", fmt.Errorf("unknown mode %s: want auto, pidns or subreaper", bounds.Quote(s))
}

// Options describe one contained run. They travel to the init as a stage
// message (stage.go), field by field: every exported field crosses, byte
// for byte, unless tagged `json:"-"` or `wire:"-"`.
type Options struct {
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
	Stderr  io.Writer `json:"-"`

	// Terminal is terminal mode (terminal.go): the runner gets its own
	// process group and the terminal's foreground. The process the
	// caller's shell waits on decides it, and the init is told.
	Terminal bool
	jobs     reaper.JobControl // terminal mode's job control for the engine; nil otherwise

	// Signals is the process's signal registration (reaper.CatchSignals),
	// made at its start; nil: made when needed.
	Signals *reaper.Signals `json:"-"`

	starter *starter // the thread the runner is forked from (prepareStart)
	// cgroup is the run's cgroup v2 (cgroup.go), made by the process that
	// runs the engine; nil where none can be used.
	cgroup *cgroup.Cgroup
	// CgroupOwner is the pid the run's cgroup is named after: the pidns
	// host side's, sent to the init; 0: the engine's own process.
	CgroupOwner int
	// cgroupMade is closed once openCgroup has decided (startCgroup);
	// o.cgroup is read only after it.
	cgroupMade chan struct{}

	// The sandbox policy beyond Privileges.Landlock (policy.go).
	Timeout       time.Duration // the engine cancels the run this long after the runner started; 0: never
	DieWithParent bool          // the host side cancels the run when corral's parent exits
	// Parent is corral's parent as found at corral's start (WatchParent),
	// for DieWithParent; nil: taken when Launch starts.
	Parent *ParentWatch `json:"-"`
}

// signals returns the process's registration, making it if needed.
func (o *Options) signals() *reaper.Signals {
	if o.Signals == nil {
		o.Signals = reaper.CatchSignals()
	}
	return o.Signals
}

// Privileges are applied to the runner alone, on the thread it is forked or
// exec'd from.
type Privileges struct {
	// Keep are the capabilities kept, in all five sets; nothing else is.
	Keep          []int
	AllowNewPrivs bool
	Rlimits       []Rlimit
	// Landlock is the filesystem and IPC policy (--writable, --read-only,
	// --hide, --isolate-ipc), enforced on the same thread (policy.go).
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

// any reports whether a namespace was asked for: only pidns mode honours it.
func (n Namespaces) any() bool { return n.Net || n.IPC || n.UTS || n.User || n.Hostname != "" || n.PID }

// SetupError is a failure of corral's own setup: exit status 125. It is
// the module's one setup error type (the engine's too), so a failure in a
// re-executed stage decodes into the same type, errno included.
type SetupError = reaper.SetupError

// stateWriter is w as the engine's StateWriter: nil when there is no state
// file, so that the engine, seeing no writer, keeps no timer.
func stateWriter(w *statefile.Writer) reaper.StateWriter {
	if w == nil {
		return nil
	}
	return w
}
