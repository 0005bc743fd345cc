// Package probe finds out what this machine allows: `corral probe`'s
// checks, each tried in a throwaway probe child (argv[0] "corral
// [probe]", child.go) where it could change something, and the
// diagnostics that explain why pidns mode could not be set up (diagnose.go)
// and whether --mode auto may fall back.
package probe

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/corral-sh/corral/internal/cgroup"
	"github.com/corral-sh/corral/internal/seccomp"
	"github.com/corral-sh/corral/internal/setuperr"
	"github.com/corral-sh/corral/sandbox/internal/explain"
	"github.com/corral-sh/corral/sandbox/internal/plan"
	"github.com/corral-sh/corral/sandbox/internal/stage"
	"github.com/moby/sys/capability"
	"golang.org/x/sys/unix"
)

// Check is one answer of the probe.
type Check struct {
	Name      string `json:"name"`
	Available bool   `json:"available"`
	Detail    string `json:"detail,omitempty"` // why not, or what was found
}

// Report is what `corral probe` prints.
type Report struct {
	UID      int       `json:"uid"`
	Checks   []Check   `json:"checks"`
	AutoMode plan.Mode `json:"auto_mode"`
	Reason   string    `json:"auto_reason"`
}

// Run finds out what this machine allows by trying each feature in a
// throwaway child. Nothing on the machine changes: children that made
// namespaces exit and take them along. dieWithParent is the host side's
// check of --die-with-parent, the last of the policy's.
func Run(dieWithParent func() Check) Report {
	r := Report{UID: os.Getuid()}
	userns := !stage.HoldsCap(capability.CAP_SYS_ADMIN)

	r.Checks = append(r.Checks, probeUserns()) // diagnose.go

	pidFlags := uintptr(unix.CLONE_NEWPID)
	if userns {
		pidFlags |= unix.CLONE_NEWUSER
	}
	pidCheck := probeChild("pid namespaces", pidFlags, userns, stage.ProbeStart{Step: "namespaces"})
	r.Checks = append(r.Checks, pidCheck)

	procCheck := probeChild("fresh /proc mount", pidFlags|unix.CLONE_NEWNS, userns, stage.ProbeStart{Step: "proc"})
	r.Checks = append(r.Checks, procCheck)

	netnsCheck := probeChild("network namespace", pidFlags|unix.CLONE_NEWNET, userns, stage.ProbeStart{Step: "namespaces"})
	filter := withNoNewPrivsNote(probeInjectionFilter()) // diagnose.go
	r.Checks = append(r.Checks,
		probeChild("subreaper", 0, false, stage.ProbeStart{Step: "subreaper"}),
		probePidfd(),
		probeCgroup2(),
		probeLandlock(),
		filter,
	)
	r.Checks = append(r.Checks, probePolicy()...)                                                               // policy.go
	r.Checks = append(r.Checks, probeNetwork(netnsCheck, pidCheck.Available && procCheck.Available, filter)...) // network.go
	r.Checks = append(r.Checks, dieWithParent())

	r.AutoMode, r.Reason = plan.ModePidns, "new PID and mount namespaces and a fresh /proc work here"
	if userns {
		r.Reason = "new user, PID and mount namespaces and a fresh /proc work here"
	}
	for _, c := range []Check{pidCheck, procCheck} {
		if !c.Available {
			r.AutoMode, r.Reason = plan.ModeSubreaper, c.Name+" unavailable: "+c.Detail
			break
		}
	}
	return r
}

// probeChild clones a probe child with flags and has it try spec.Step.
func probeChild(name string, flags uintptr, mapIDs bool, spec stage.ProbeStart) Check {
	sys := &syscall.SysProcAttr{Cloneflags: flags, Pdeathsig: syscall.SIGKILL}
	if mapIDs {
		if err := explain.CheckProc(nil); err != nil { // diagnose.go
			return Check{Name: name, Detail: err.Error()}
		}
		stage.MapCallerIDs(sys, []int{int(capability.CAP_SYS_ADMIN)})
	}
	caller := stage.Inherited()
	pid, link, err := stage.Spawn(stage.ProbeArg0, stage.MsgProbeStart, spec, syscall.ProcAttr{Sys: sys, Env: []string{}}, caller)
	if err != nil {
		return Check{Name: name, Detail: explain.CloneFailure(nil, caller, flags, flags&unix.CLONE_NEWUSER != 0, err).Error()}
	}
	ready, err := link.AwaitReply(stage.StepProbeReply)
	link.Close()
	var ws unix.WaitStatus
	for {
		if _, err := unix.Wait4(pid, &ws, 0, nil); !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if ready {
		return Check{Name: name, Available: true}
	}
	if err == nil {
		err = fmt.Errorf("probe child ended with status %#x", uint32(ws))
	} else {
		err = explain.ExplainInitFailure(nil, caller, err, 0) // diagnose.go
	}
	return Check{Name: name, Detail: err.Error()}
}

func probePidfd() Check {
	c := Check{Name: "pidfd"}
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		c.Detail = "pidfd_open: " + setuperr.Describe(err) + "; corral falls back to checking start times before each signal"
		return c
	}
	unix.Close(fd)
	c.Available = true
	return c
}

// probeCgroup2 says whether a run will get a cgroup of its own (package
// supervise):
// it makes one where a run would and removes it, as a run does.
func probeCgroup2() Check {
	c := Check{Name: "cgroup v2"}
	dir, err := cgroup.Check()
	if err != nil {
		c.Detail = "not used: " + err.Error() + "; teardown walks /proc instead"
		return c
	}
	c.Available = true
	c.Detail = "each run gets a cgroup of its own beneath " + dir + "; teardown's SIGKILL is one write to its cgroup.kill"
	return c
}

func probeLandlock() Check {
	c := Check{Name: "landlock"}
	// landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
	// returns the ABI version and creates nothing.
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		c.Detail = "landlock_create_ruleset: " + setuperr.Describe(errno)
		if errno == unix.EOPNOTSUPP {
			c.Detail += "; built in but not enabled (add landlock to the lsm= boot parameter)"
		}
		return c
	}
	c.Available = true
	c.Detail = fmt.Sprintf("ABI version %d", abi)
	return c
}

// probeInjectionFilter is `corral probe`'s answer: can the runner get the
// TIOCSTI/TIOCLINUX filter here, and when does it not.
func probeInjectionFilter() Check {
	c := Check{Name: "seccomp"}
	if _, err := seccomp.Probe(); err != nil {
		c.Detail = err.Error() + "; the runner cannot be denied TIOCSTI and TIOCLINUX, so corral refuses to run it"
		return c
	}
	c.Available = true
	c.Detail = "the runner is denied TIOCSTI and TIOCLINUX"
	if !stage.HoldsCap(capability.CAP_SYS_ADMIN) {
		c.Detail += " (not with --allow-new-privs in subreaper mode: without no_new_privs or CAP_SYS_ADMIN the kernel takes no filter)"
	}
	return c
}
