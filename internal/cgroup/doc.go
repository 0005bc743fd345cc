// Package cgroup gives one run a cgroup v2 of its own, where a writable one
// exists, so that teardown's SIGKILL round is a single write to cgroup.kill
// that no fork can outrun, and emptiness is the kernel's "populated 0"
// rather than a /proc walk.
//
// It owns: finding the v2 hierarchy (/proc/self/mountinfo: /sys/fs/cgroup
// on pure v2 systems, /sys/fs/cgroup/unified in a hybrid layout) and the
// caller's cgroup in it (/proc/self/cgroup), deciding whether corral may
// use it (and saying why not), making the run's cgroup beneath the
// caller's, killing and watching it, and removing it.
//
// Where runs go. Always beneath the caller's own cgroup, never beside it:
// limits set on the caller (a CI job's pids.max, a unit's MemoryMax) keep
// covering the runner. The run's cgroup is a fresh leaf without
// controllers, so v2's "no internal processes" rule never refuses the
// move into it, and the caller stays where it is (a process in a non-root
// cgroup already keeps domain controllers out of its subtree_control, so
// nothing is lost). This works as root anywhere writable, and unprivileged
// in a delegated subtree (systemd-run --user --scope -p Delegate=yes, or
// any cgroup whose directory and cgroup.procs the caller owns):
// CLONE_INTO_CGROUP needs write access to cgroup.procs of the common
// ancestor, which is the caller's cgroup. It does not work (ErrUnavailable,
// with the reason) without cgroup2, on a read-only mount (most
// containers), without write access (rootless, no delegation), beneath a
// threaded cgroup, on a kernel without cgroup.kill (before 5.14: a kill
// that a fork could outrun is no better than the /proc walk), or where a
// seccomp filter refuses clone3 (Docker's profile answers ENOSYS).
//
// What the caller must do:
//
//  1. Before the runner starts: p, err := Find(); c, err := p.New(). On any
//     error keep the /proc walk; errors.Is(err, ErrUnavailable) is the
//     expected kind, worth a -v line; others are worth one line anyway.
//  2. Start the runner (or the exec stage that becomes it) with
//     SysProcAttr{UseCgroupFD: true, CgroupFD: c.FD()}. If that start fails
//     with ENOSYS or EPERM, Remove the cgroup and start without it.
//  3. Teardown's SIGKILL round: c.Kill(), then reap (wait4 until ECHILD) and
//     treat c.Populated() == false, or c.WaitEmpty(bound), as the tree
//     being gone. Kill and Populated need no new descriptor and no new OS
//     thread; WaitEmpty parks in the runtime poller.
//  4. At the end: c.Remove(). It kills anything left, removes cgroups a
//     runner made beneath, and retries while the kernel still finishes
//     exits; an error names the directory.
//
// Kill also kills the caller if it is inside. In pidns mode the host may
// start the init itself into the cgroup: the init then keeps kill(-1) for
// its SIGKILL round, and the host calls Remove after reaping the init.
//
// The cgroup is not a wall against a runner with write access to an
// ancestor's cgroup.procs (root, or the delegated user): it can move
// itself out. The engine's own reaping still covers what descends from
// it; Kill covers whatever stayed inside.
package cgroup
