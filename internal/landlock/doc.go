// Package landlock confines the runner's filesystem access, TCP ports and
// IPC with Landlock, on the runner's thread just before its execve, so the
// rules hold for the runner and everything it starts. Landlock needs no privilege
// and no namespace, so it works in every corral mode and inside containers.
//
// It owns: reading the kernel's Landlock ABI (ABI, Describe, for `corral
// probe` and -v); validating a Policy up front (Check: a path that does not
// exist is a *PolicyError, a usage error for the caller); and turning a
// Policy into a ruleset enforced on the calling thread (Restrict), handling
// every filesystem right the running ABI knows and reporting what it cannot
// enforce (Report.NotEnforced, for the caller to print once).
//
// The rules: read, list and execute everywhere except beneath hidden
// paths; the write-side rights (write, truncate, create, remove, rename,
// device ioctl) only beneath writable paths; /dev/null, /dev/zero,
// /dev/full, /dev/tty, /dev/ptmx and /dev/pts usable whatever the policy.
// Landlock only ever allows, so a hidden path is carved out by granting on
// every sibling along the way from the granted root down to it, not on the
// ancestors themselves: those ancestors cannot be listed, nothing can be
// created or removed directly in them, and an entry that appears in them
// after Restrict is unreachable (Report.Split names them). With IsolateIPC
// (ABI 6) the runner's tree can neither signal a process outside it nor
// connect to an abstract Unix socket made outside it. With Net (ABI 4) TCP
// bind and connect work only to the ports listed (none: no TCP at all),
// in the same ruleset as the filesystem rules or alone; Info.TCPPortRules
// says whether the kernel can.
//
// What the caller must do: lock its goroutine to the OS thread
// (runtime.LockOSThread), set no_new_privs on that thread (or hold
// CAP_SYS_ADMIN), make its mounts first (rules bind the inodes present when
// Restrict runs, e.g. the fresh /proc of a new PID namespace), call
// Restrict, and execve from that same thread. A failing Restrict must stop
// the start: the package never falls back to running unrestricted.
package landlock
