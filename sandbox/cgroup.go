package sandbox

// The run's cgroup v2 (internal/cgroup): where a writable one exists, the
// runner starts inside a cgroup of its own (clone3 with
// CLONE_INTO_CGROUP), so that teardown's SIGKILL round is one write to
// cgroup.kill that no fork can outrun, and the cgroup is removed when the
// run is over.
//
// The engine's process makes it: corral itself in subreaper mode, the init
// in pidns mode. The init is then outside the cgroup, so its SIGKILL round
// is cgroup.kill and kill(-1) both, with one code path for both modes, and
// the process that made the cgroup is the one that removes it, after its
// own engine saw the tree empty: nothing has to pass between host and
// init. (Starting the init itself into the cgroup from the host would put
// the engine inside what cgroup.kill kills, leaving the init with kill(-1)
// alone and the host with a cgroup to clean up behind a process it does
// not supervise.)

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/corral-sh/corral/internal/cgroup"
	"golang.org/x/sys/unix"
)

// minNOFILE is the lowest RLIMIT_NOFILE at which a run takes a cgroup.
const minNOFILE = 64

// openCgroup makes the run's cgroup, before the runner starts, while
// descriptors are plentiful. Where none can be used, the /proc walk
// stays: the usual reasons (rootless without delegation, a container's
// read-only mount) are said under -v, anything unexpected on stderr.
func (o *Options) openCgroup() {
	defer close(o.cgroupMade)
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil && rl.Cur < minNOFILE {
		// The cgroup holds four descriptors for the whole run: under a
		// limit this low they would be the ones the start then lacks,
		// and a run that works without the cgroup must not fail with it.
		o.logf("cgroup: not used: RLIMIT_NOFILE %d leaves no room for its descriptors (%d or more does); teardown walks /proc", rl.Cur, minNOFILE)
		return
	}
	p, err := cgroup.Find()
	if err == nil {
		p.Owner = o.CgroupOwner
		o.cgroup, err = p.New()
	}
	switch {
	case err == nil:
		o.logf("cgroup: the runner's tree goes into %s; teardown's SIGKILL is its cgroup.kill", o.cgroup.Path())
	case errors.Is(err, cgroup.ErrUnavailable):
		o.logf("cgroup: not used: %v; teardown walks /proc", err)
	default:
		o.signals().WaitUrgent() // a closed stderr must not kill corral
		fmt.Fprintf(o.Stderr, "corral: cgroup: %v; teardown walks /proc instead\n", err)
	}
}

// startCgroup makes the run's cgroup (openCgroup) beside the rest of the
// setup, which needs none of it: reading the mount table, a mkdir and
// four opens cost about 0.2 ms, which the start would otherwise wait for.
// The engine's process calls it as early as it knows it runs the engine
// (runSubreaper; the init before its mounts); everything that reads
// o.cgroup waits for it first (awaitCgroup).
func (o *Options) startCgroup() {
	if o.cgroupMade != nil {
		return
	}
	o.cgroupMade = make(chan struct{})
	o.signals() // made here, not by the goroutine: o is the caller's
	go o.openCgroup()
}

// awaitCgroup returns once the cgroup is decided.
func (o *Options) awaitCgroup() {
	if o.cgroupMade != nil {
		<-o.cgroupMade
	}
}

// cgroupFD is the descriptor the runner is started into, or -1.
func (o *Options) cgroupFD() int {
	o.awaitCgroup()
	if o.cgroup == nil {
		return -1
	}
	return o.cgroup.FD()
}

// dropCgroup gives the cgroup up when the kernel refused to start the
// runner into it (and started it outside): the runner is not inside, so
// it is removed now, and teardown walks /proc.
func (o *Options) dropCgroup(err error) {
	o.awaitCgroup()
	c := o.cgroup
	if c == nil {
		return
	}
	o.cgroup = nil
	o.logf("cgroup: starting the runner into %s was refused (%v); started it outside, teardown walks /proc", c.Path(), err)
	if rerr := c.Remove(); rerr != nil {
		o.signals().WaitUrgent()
		fmt.Fprintf(o.Stderr, "corral: cgroup: %v\n", rerr)
	}
}

// killAll is the engine's Config.KillAll: cgroup.kill, one write through
// the descriptor opened before the runner started. Nil without a cgroup.
func (o *Options) killAll() func() error {
	said := false
	return func() error {
		o.awaitCgroup()
		c := o.cgroup
		if c == nil { // dropped at the start
			return nil
		}
		if err := c.Kill(); err != nil {
			return err
		}
		if !said {
			said = true
			o.logf("teardown: SIGKILL through %s/cgroup.kill", c.Path())
		}
		return nil
	}
}

// removeCgroup ends the run's cgroup, whatever ended the run (the tree
// emptied, a cancel before the start, a failed setup). The engine decided
// the tree was empty from wait4's ECHILD; cgroup.events confirms it, and
// Remove kills anything that is still inside (a process moved in by
// someone else) before it removes the directory.
func (o *Options) removeCgroup() {
	o.awaitCgroup()
	c := o.cgroup
	if c == nil {
		return
	}
	o.cgroup = nil
	populated, err := c.Populated()
	switch {
	case err != nil:
		o.logf("cgroup: %v", err)
	case populated:
		o.logf("cgroup: %s is still populated after the tree was reaped; killing what is left", c.Path())
	}
	if err := c.Remove(); err != nil {
		o.signals().WaitUrgent()
		fmt.Fprintf(o.Stderr, "corral: cgroup: %v\n", err)
		return
	}
	if err == nil && !populated {
		o.logf("cgroup: %s empty (populated 0), removed", c.Path())
	} else {
		o.logf("cgroup: %s removed", c.Path())
	}
}

// withCgroup returns a copy of sys (nil: none) that starts the process
// into the cgroup fd; fd < 0: sys itself.
func withCgroup(sys *syscall.SysProcAttr, fd int) *syscall.SysProcAttr {
	if fd < 0 {
		return sys
	}
	out := &syscall.SysProcAttr{}
	if sys != nil {
		*out = *sys
	}
	out.UseCgroupFD, out.CgroupFD = true, fd
	return out
}

// refused reports an error with which the kernel (or a seccomp filter)
// refuses a start rather than the runner failing its exec: clone3 filtered
// (ENOSYS), CLONE_INTO_CGROUP denied (EPERM, EACCES), ptrace denied.
func refused(err error) bool {
	return errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENOSYS)
}

// forkInto is syscall.ForkExec into the cgroup fd (fd < 0: none). A
// refusal with the cgroup is tried again without it; when that second try
// is what worked, the cgroup was the cause: refusal is the first try's
// error, and the caller gives the cgroup up.
func forkInto(path string, args []string, attr *syscall.ProcAttr, fd int) (pid int, refusal, err error) {
	if fd >= 0 {
		into := *attr
		into.Sys = withCgroup(attr.Sys, fd)
		pid, err = syscall.ForkExec(path, args, &into)
		if err == nil || !refused(err) {
			return pid, nil, err
		}
		refusal = err
	}
	pid, err = syscall.ForkExec(path, args, attr)
	if err != nil {
		refusal = nil
	}
	return pid, refusal, err
}
