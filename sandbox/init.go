package sandbox

import (
	"fmt"
	"os"
	"strings"

	"github.com/corral-sh/corral/reaper"
	"golang.org/x/sys/unix"
)

// initReady is the init's one line on the ready pipe when its namespaces
// are set up; anything else is "step\terrno\thint" of the step that failed.
const initReady = "ready"

// IsInit reports whether this process is a pidns init.
func IsInit() bool { return isStage(initArg0) }

// RunInit sets up the new namespaces and runs the engine as PID 1. It
// never returns.
func RunInit() {
	// First: the host passes signals on as soon as this init says ready,
	// and a process inside the namespace may send any once the runner
	// runs. The registration goes on while the namespaces are set up, and
	// is complete before the init says so.
	sigs := reaper.CatchSignals()
	var o Options
	ready, err := readStageSpec(&o)
	if err != nil {
		fmt.Fprintf(ready, "init\t%v\t\n", err)
		os.Exit(125)
	}
	o.Stderr = os.Stderr
	o.Signals = sigs
	// The starter thread drops the runner's privileges while the
	// namespaces are set up and the signals registered.
	o.prepareStart()
	if err := setupNamespaces(&o); err != nil {
		fmt.Fprintf(ready, "%s\t%s\t%s\n", err.Step, describeErr(err.Err), err.Hint)
		os.Exit(125)
	}
	// "ready" once every signal is registered: the host passes signals on
	// from then. The engine sets up and execs the runner meanwhile (held
	// until the same moment, see forkHeld), and this init never exits
	// before it said ready: the host takes an init that ends without
	// saying it for a namespace that could not be made.
	said := make(chan struct{})
	go func() {
		sigs.Wait()
		fmt.Fprintln(ready, initReady)
		ready.Close()
		close(said)
	}()
	sigs.WaitUrgent() // before the engine's first write to stderr
	status, err := runEngine(&o, true)
	<-said
	if err != nil {
		fmt.Fprintf(os.Stderr, "corral: %v\n", err)
	}
	os.Exit(status)
}

// setupNamespaces does, inside the new namespaces, what only their PID 1
// can: a /proc that shows this PID namespace, loopback, the hostname.
func setupNamespaces(o *Options) *SetupError {
	// Our mounts must not propagate back to the caller's namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return &SetupError{Step: "make mounts private in the new mount namespace", Err: err}
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		s := &SetupError{Step: "mount proc on /proc in the new namespace", Err: err}
		if err == unix.EPERM {
			s.Hint = "parts of /proc are overmounted (container runtimes mask /proc/sys and friends), and the kernel then refuses a fresh proc mount to an unprivileged user namespace; run corral as root, unmask /proc, or use --mode subreaper"
		}
		return s
	}
	if o.Namespaces.Net {
		if err := loopbackUp(); err != nil {
			return &SetupError{Step: "bring up loopback in the new network namespace", Err: err}
		}
	}
	if o.Namespaces.Hostname != "" {
		if err := unix.Sethostname([]byte(o.Namespaces.Hostname)); err != nil {
			return &SetupError{Step: "set hostname in the new UTS namespace", Err: err}
		}
	}
	return nil
}

// decodeInitFailure turns the init's failure line back into a SetupError.
func decodeInitFailure(line string) *SetupError {
	parts := strings.SplitN(line, "\t", 3)
	for len(parts) < 3 {
		parts = append(parts, "")
	}
	return &SetupError{Step: parts[0], Err: initErr(parts[1]), Hint: parts[2]}
}

type initErr string

func (e initErr) Error() string { return string(e) }
