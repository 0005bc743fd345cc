package sandbox

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/corral-sh/corral/internal/cgroup"
	"github.com/corral-sh/corral/reaper"
	"github.com/moby/sys/capability"
	"golang.org/x/sys/unix"
)

// Check is one answer of the probe.
type Check struct {
	Name      string `json:"name"`
	Available bool   `json:"available"`
	Detail    string `json:"detail,omitempty"` // why not, or what was found
}

// ProbeReport is what `corral probe` prints.
type ProbeReport struct {
	UID      int     `json:"uid"`
	Checks   []Check `json:"checks"`
	AutoMode Mode    `json:"auto_mode"`
	Reason   string  `json:"auto_reason"`
}

const probeArg0 = "corral [probe]"

// Probe finds out what this machine allows by trying each feature in a
// throwaway child. Nothing on the machine changes: children that made
// namespaces exit and take them along.
func Probe() ProbeReport {
	r := ProbeReport{UID: os.Getuid()}
	userns := !holdsCap(capability.CAP_SYS_ADMIN)

	r.Checks = append(r.Checks, probeUserns()) // diagnose.go

	pidFlags := uintptr(unix.CLONE_NEWPID)
	if userns {
		pidFlags |= unix.CLONE_NEWUSER
	}
	pidCheck := probeChild("pid namespaces", pidFlags, userns, probeStart{Step: "namespaces"})
	r.Checks = append(r.Checks, pidCheck)

	procCheck := probeChild("fresh /proc mount", pidFlags|unix.CLONE_NEWNS, userns, probeStart{Step: "proc"})
	r.Checks = append(r.Checks, procCheck)

	r.Checks = append(r.Checks,
		probeChild("subreaper", 0, false, probeStart{Step: "subreaper"}),
		probePidfd(),
		probeCgroup2(),
		probeLandlock(),
		withNoNewPrivsNote(probeInjectionFilter()), // injection.go, diagnose.go
	)
	r.Checks = append(r.Checks, probePolicy()...) // policyprobe.go

	r.AutoMode, r.Reason = ModePidns, "new PID and mount namespaces and a fresh /proc work here"
	if userns {
		r.Reason = "new user, PID and mount namespaces and a fresh /proc work here"
	}
	for _, c := range []Check{pidCheck, procCheck} {
		if !c.Available {
			r.AutoMode, r.Reason = ModeSubreaper, c.Name+" unavailable: "+c.Detail
			break
		}
	}
	return r
}

// probeChild clones a probe child with flags and has it try spec.Step.
func probeChild(name string, flags uintptr, mapIDs bool, spec probeStart) Check {
	sys := &syscall.SysProcAttr{Cloneflags: flags, Pdeathsig: syscall.SIGKILL}
	if mapIDs {
		mapCallerIDs(sys, []int{int(capability.CAP_SYS_ADMIN)})
	}
	pid, link, err := spawnStage(probeArg0, msgProbeStart, spec, syscall.ProcAttr{Sys: sys, Env: []string{}})
	if err != nil {
		return Check{Name: name, Detail: cloneFailure(&Options{}, flags, flags&unix.CLONE_NEWUSER != 0, err).Error()}
	}
	ready, err := link.awaitReply()
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
		err = explainInitFailure(&Options{}, err, 0) // diagnose.go
	}
	return Check{Name: name, Detail: err.Error()}
}

// runProbeChild tries one step and reports; it never returns.
func runProbeChild() {
	reaper.CatchPipe()
	var spec probeStart
	link, err := openStage(msgProbeStart, &spec)
	if err != nil {
		link.fail(err)
		os.Exit(125)
	}
	var failed *SetupError
	switch spec.Step {
	case "proc":
		failed = setupNamespaces(&Options{})
	case "hold": // diagnose.go
		holdProbe(link)
	case "subreaper":
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			failed = &SetupError{Step: "prctl(PR_SET_CHILD_SUBREAPER)", Err: err}
		}
	}
	if failed != nil {
		link.fail(failed)
		os.Exit(125)
	}
	if link.ready() != nil {
		os.Exit(125)
	}
	os.Exit(0)
}

func probePidfd() Check {
	c := Check{Name: "pidfd"}
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		c.Detail = "pidfd_open: " + describeErr(err) + "; corral falls back to checking start times before each signal"
		return c
	}
	unix.Close(fd)
	c.Available = true
	return c
}

// probeCgroup2 says whether a run will get a cgroup of its own (cgroup.go):
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
		c.Detail = "landlock_create_ruleset: " + describeErr(errno)
		if errno == unix.EOPNOTSUPP {
			c.Detail += "; built in but not enabled (add landlock to the lsm= boot parameter)"
		}
		return c
	}
	c.Available = true
	c.Detail = fmt.Sprintf("ABI version %d", abi)
	return c
}
