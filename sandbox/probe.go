package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unsafe"

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

// probeSpec tells a throwaway probe child what to try.
type probeSpec struct {
	Step string // "namespaces", "proc", "subreaper"
}

// Probe finds out what this machine allows by trying each feature in a
// throwaway child. Nothing on the machine changes: children that made
// namespaces exit and take them along.
func Probe() ProbeReport {
	r := ProbeReport{UID: os.Getuid()}
	userns := !holdsCap(capability.CAP_SYS_ADMIN)

	userCheck := probeChild("user namespaces", unix.CLONE_NEWUSER, true, probeSpec{Step: "namespaces"})
	r.Checks = append(r.Checks, userCheck)

	pidFlags := uintptr(unix.CLONE_NEWPID)
	if userns {
		pidFlags |= unix.CLONE_NEWUSER
	}
	pidCheck := probeChild("pid namespaces", pidFlags, userns, probeSpec{Step: "namespaces"})
	r.Checks = append(r.Checks, pidCheck)

	procCheck := probeChild("fresh /proc mount", pidFlags|unix.CLONE_NEWNS, userns, probeSpec{Step: "proc"})
	r.Checks = append(r.Checks, procCheck)

	r.Checks = append(r.Checks,
		probeChild("subreaper", 0, false, probeSpec{Step: "subreaper"}),
		probePidfd(),
		probeCgroup2(),
		probeLandlock(),
		probeSeccomp(),
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
func probeChild(name string, flags uintptr, mapIDs bool, spec probeSpec) Check {
	sys := &syscall.SysProcAttr{Cloneflags: flags, Pdeathsig: syscall.SIGKILL}
	if mapIDs {
		mapCallerIDs(sys, []int{int(capability.CAP_SYS_ADMIN)})
	}
	pid, report, err := spawnStage(probeArg0, spec, syscall.ProcAttr{Sys: sys, Env: []string{}})
	if err != nil {
		return Check{Name: name, Detail: (&SetupError{Step: cloneFlagNames(flags), Err: err, Hint: cloneHint(err, flags&unix.CLONE_NEWUSER != 0)}).Error()}
	}
	line, _ := bufio.NewReader(report).ReadString('\n')
	report.Close()
	var ws unix.WaitStatus
	for {
		if _, err := unix.Wait4(pid, &ws, 0, nil); !errors.Is(err, unix.EINTR) {
			break
		}
	}
	line = strings.TrimSpace(line)
	if line == initReady {
		return Check{Name: name, Available: true}
	}
	if line == "" {
		line = fmt.Sprintf("probe child ended with status %#x", uint32(ws))
	}
	return Check{Name: name, Detail: decodeInitFailure(line).Error()}
}

// IsProbe reports whether this process is a probe child.
func IsProbe() bool { return isStage(probeArg0) }

// RunProbeChild tries one step and reports; it never returns.
func RunProbeChild() {
	reaper.CatchPipe()
	var spec probeSpec
	report, err := readStageSpec(&spec)
	if err != nil {
		fmt.Fprintf(report, "probe\t%v\t\n", err)
		os.Exit(125)
	}
	var failed *SetupError
	switch spec.Step {
	case "proc":
		failed = setupNamespaces(&Options{})
	case "subreaper":
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			failed = &SetupError{Step: "prctl(PR_SET_CHILD_SUBREAPER)", Err: err}
		}
	}
	if failed != nil {
		fmt.Fprintf(report, "%s\t%s\t%s\n", failed.Step, describeErr(failed.Err), failed.Hint)
		os.Exit(125)
	}
	fmt.Fprintln(report, initReady)
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

func probeCgroup2() Check {
	c := Check{Name: "cgroup v2"}
	root, hybrid := "", false
	for _, dir := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		var fs unix.Statfs_t
		if unix.Statfs(dir, &fs) == nil && fs.Type == unix.CGROUP2_SUPER_MAGIC {
			root, hybrid = dir, dir != "/sys/fs/cgroup"
			break
		}
	}
	if root == "" {
		c.Detail = "no cgroup2 mount at /sys/fs/cgroup (cgroup v1 only)"
		return c
	}
	c.Available = true
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		c.Detail = "cannot read /proc/self/cgroup: " + describeErr(err)
		return c
	}
	var own string
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			own = rest
		}
	}
	dir := filepath.Join(root, own)
	if unix.Access(filepath.Join(dir, "cgroup.procs"), unix.W_OK) == nil &&
		unix.Access(filepath.Join(dir, "cgroup.subtree_control"), unix.W_OK) == nil {
		c.Detail = "delegated and writable: " + dir
	} else {
		c.Detail = "no writable delegated cgroup (" + dir + " is not writable by uid " + fmt.Sprint(os.Getuid()) + ")"
	}
	if hybrid {
		c.Detail = "hybrid hierarchy, controllers on v1; " + c.Detail
	}
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

func probeSeccomp() Check {
	c := Check{Name: "seccomp"}
	// SECCOMP_GET_ACTION_AVAIL asks whether an action exists; it installs nothing.
	action := uint32(unix.SECCOMP_RET_ALLOW)
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&action)))
	if errno != 0 {
		c.Detail = "seccomp(SECCOMP_GET_ACTION_AVAIL): " + describeErr(errno)
		return c
	}
	c.Available = true
	if mode, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err == nil && mode == 2 {
		c.Detail = "corral itself already runs under a seccomp filter"
	}
	return c
}
