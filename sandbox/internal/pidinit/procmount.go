package pidinit

import (
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/corral-sh/corral/internal/proc"
	"github.com/corral-sh/corral/internal/setuperr"
	"github.com/corral-sh/corral/sandbox/internal/stage"
	"golang.org/x/sys/unix"
)

// The fresh /proc of pidns mode shows the new PID namespace, but a plain
// proc mount also drops every restriction the caller's /proc had: the
// hidepid and subset options, and what a container runtime masks or makes
// read-only beneath it (/proc/kcore, /proc/sys, ...). mountProc carries
// them over, reading the caller's mount table before it covers it.

type mountEntry = proc.MountEntry

// parseMountinfo parses a whole mountinfo table. A line that is not what
// the kernel writes is an error: corral cannot keep restrictions it cannot
// read, so it refuses rather than guess.
func parseMountinfo(text string) ([]mountEntry, error) { return proc.ParseMountTable(text) }

func hasOption(opts []string, name string) bool { return slices.Contains(opts, name) }

// procStepKind is what is done to one path beneath the fresh /proc.
type procStepKind int

const (
	// stepMask hides the path: an empty read-only tmpfs over a directory,
	// a read-only bind of /dev/null over anything else.
	stepMask procStepKind = iota
	// stepBind binds the path onto itself with the given flags (a
	// read-only /proc/sys, as container runtimes make it).
	stepBind
)

// procStep is one mount beneath the fresh /proc.
type procStep struct {
	Path     string // beneath /proc, without the leading "/proc/": "sys", "sys/fs/binfmt_misc"
	Kind     procStepKind
	ReadOnly bool    // stepBind: read-only
	Flags    uintptr // stepBind: nosuid, nodev, noexec as the caller had them
	Why      string  // for the error message when the step fails
}

// procPlan is how the fresh /proc is mounted and what is done beneath it.
type procPlan struct {
	Flags uintptr // for the proc mount itself: MS_RDONLY when the caller's was
	Data  string  // proc options: hidepid=, subset=, gid=
	Steps []procStep
}

// Paths container runtimes mask or make read-only (runc's and moby's
// defaults). A runner that runs as uid 0 gets them whatever the caller
// had: it owns these files even with no capability, and several have no
// capability check at all (sysrq-trigger, irq affinity, sysctls such as
// kernel.core_pattern).
var (
	uid0MaskedPaths   = []string{"asound", "acpi", "interrupts", "kcore", "keys", "latency_stats", "timer_list", "timer_stats", "sched_debug", "scsi"}
	uid0ReadOnlyPaths = []string{"bus", "fs", "irq", "sys", "sysrq-trigger"}
)

// planProc decides, from the caller's mount table, how the fresh /proc
// keeps every restriction of the caller's. keepGID says whether a gid=
// proc option can be carried over (the numbers mean the same thing inside
// and outside); otherwise it is dropped, which only hides more.
func planProc(entries []mountEntry, runnerUID0, keepGID bool) (procPlan, error) {
	top, err := callerProc(entries)
	if err != nil {
		return procPlan{}, err
	}
	plan := procOptions(top, keepGID)
	if runnerUID0 {
		plan.Steps = append(plan.Steps, uid0Steps()...)
	}
	plan.Steps = append(plan.Steps, keptSteps(entries, top, runnerUID0)...)
	return plan, nil
}

// callerProc finds the caller's /proc: the mount at /proc that nothing
// else at /proc covers (a mount stacked on it has it as its parent). It
// must be a proc: corral will not give the runner a /proc the caller does
// not have.
func callerProc(entries []mountEntry) (*mountEntry, error) {
	var top *mountEntry
	for i := range entries {
		e := &entries[i]
		if path.Clean(e.MountPoint) != "/proc" {
			continue
		}
		covered := false
		for j := range entries {
			if entries[j].Parent == e.ID && path.Clean(entries[j].MountPoint) == "/proc" && entries[j].ID != e.ID {
				covered = true
				break
			}
		}
		if !covered {
			top = e // the last one wins: later mounts are stacked later
		}
	}
	if top == nil {
		return nil, errors.New("the caller has no /proc mount")
	}
	if top.FSType != "proc" {
		return nil, fmt.Errorf("the caller's /proc is a %s mount, not proc: corral will not give the runner a /proc the caller does not have", top.FSType)
	}
	return top, nil
}

// procOptions carries the caller's read-only flag and its hidepid=,
// subset= and (keepGID) gid= options over to the fresh proc mount.
func procOptions(top *mountEntry, keepGID bool) procPlan {
	var plan procPlan
	if hasOption(top.Options, "ro") {
		plan.Flags |= unix.MS_RDONLY
	}
	var data []string
	for _, o := range top.SuperOptions {
		switch name, _, _ := strings.Cut(o, "="); name {
		case "hidepid", "subset":
			data = append(data, o)
		case "gid":
			if keepGID {
				data = append(data, o)
			}
		}
	}
	plan.Data = strings.Join(data, ",")
	return plan
}

// uid0Steps are what a uid-0 runner gets whatever the caller had.
func uid0Steps() []procStep {
	var steps []procStep
	for _, p := range uid0ReadOnlyPaths {
		steps = append(steps, procStep{Path: p, Kind: stepBind, ReadOnly: true,
			Flags: unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, Why: "make /proc/" + p + " read-only for a uid-0 runner"})
	}
	for _, p := range uid0MaskedPaths {
		steps = append(steps, procStep{Path: p, Kind: stepMask, Why: "mask /proc/" + p + " for a uid-0 runner"})
	}
	return steps
}

// subMount is one mount beneath the caller's /proc.
type subMount struct {
	e     *mountEntry
	rel   string // its path beneath /proc
	depth int    // the length of its chain of parents up to the caller's /proc
}

// subMounts lists every mount beneath the caller's /proc top, parents
// before children. Mounts on a /proc that is covered, or outside it, have
// no chain of parents up to top and show nothing to the caller.
func subMounts(entries []mountEntry, top *mountEntry) []subMount {
	byID := make(map[int]*mountEntry, len(entries))
	for i := range entries {
		byID[entries[i].ID] = &entries[i]
	}
	var subs []subMount
	for i := range entries {
		e := &entries[i]
		rel, ok := strings.CutPrefix(path.Clean(e.MountPoint), "/proc/")
		if !ok || rel == "" {
			continue
		}
		depth, p := 0, e
		for p != nil && p.ID != top.ID && depth <= len(entries) {
			p = byID[p.Parent]
			depth++
		}
		if p == nil || depth > len(entries) {
			continue
		}
		// /proc/PID/... of the caller's view names a process of the
		// caller's PID namespace, which the runner's namespace does not
		// have: nothing there to keep.
		if first, _, _ := strings.Cut(rel, "/"); isNumber(first) {
			continue
		}
		subs = append(subs, subMount{e, rel, depth})
	}
	slices.SortStableFunc(subs, func(a, b subMount) int { return a.depth - b.depth })
	return subs
}

// keptSteps repeat, beneath the fresh /proc, what the caller has mounted
// beneath its own.
func keptSteps(entries []mountEntry, top *mountEntry, runnerUID0 bool) []procStep {
	var steps []procStep
	for _, s := range subMounts(entries, top) {
		step := procStep{Path: s.rel, Kind: stepMask,
			Why: fmt.Sprintf("keep the caller's mask of /proc/%s (%s)", s.rel, s.e.FSType)}
		// A part of proc bound onto its own path is what runtimes use to
		// make it read-only: do the same to the same part of the new
		// proc. Anything else over a proc path (/dev/null, a tmpfs,
		// another filesystem, another part of proc) hides it: hide it.
		if s.e.FSType == "proc" && path.Clean(s.e.Root) == "/"+s.rel {
			step = procStep{Path: s.rel, Kind: stepBind, ReadOnly: hasOption(s.e.Options, "ro"),
				Flags: s.e.Flags() & (unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC),
				Why:   fmt.Sprintf("keep the caller's %s bind of /proc/%s", rwName(hasOption(s.e.Options, "ro")), s.rel)}
			// A uid-0 runner never gets write access back beneath a
			// path it must have read-only.
			if runnerUID0 && underAny(s.rel, uid0ReadOnlyPaths) {
				step.ReadOnly = true
			}
		}
		steps = append(steps, step)
	}
	return steps
}

func rwName(ro bool) string {
	if ro {
		return "read-only"
	}
	return "read-write"
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func underAny(rel string, roots []string) bool {
	for _, r := range roots {
		if rel == r || strings.HasPrefix(rel, r+"/") {
			return true
		}
	}
	return false
}

// mountProc mounts a /proc for the new PID namespace that keeps every
// restriction of the caller's. It must run before anything covers the
// caller's /proc: /proc/self/mountinfo is read from it.
func mountProc(p *stage.Proc) *setuperr.SetupError {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return &setuperr.SetupError{Step: "read the caller's mounts (/proc/self/mountinfo)", Err: err}
	}
	entries, err := parseMountinfo(string(data))
	if err != nil {
		return &setuperr.SetupError{Step: "read the caller's mounts (/proc/self/mountinfo)", Err: err}
	}
	plan, err := planProc(entries, os.Getuid() == 0, gidMeansTheSame())
	if err != nil {
		return &setuperr.SetupError{Step: "keep the caller's /proc restrictions", Err: err}
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC|plan.Flags, plan.Data); err != nil {
		step := "mount proc on /proc in the new namespace"
		if plan.Data != "" {
			step += " (" + plan.Data + ", as the caller's)"
		}
		// The hint depends on who the caller is, which only the host
		// side knows: it adds one (package probe, ExplainInitFailure).
		return &setuperr.SetupError{Step: step, Err: err}
	}
	applied := 0
	for _, s := range plan.Steps {
		done, err := applyProcStep(s)
		if err != nil {
			return &setuperr.SetupError{Step: s.Why, Err: err}
		}
		if done {
			applied++
		}
	}
	if applied > 0 || plan.Data != "" {
		p.Logf("pidns: fresh /proc %s, %d paths beneath it masked or read-only", withOptions(plan.Data), applied)
	}
	return nil
}

func withOptions(data string) string {
	if data == "" {
		return "without options"
	}
	return "with the caller's " + data
}

// gidMeansTheSame reports whether a gid= option the kernel shows in
// mountinfo (always in the initial user namespace's numbers) names the
// same group here: only when this process is in the initial user
// namespace, i.e. its gid map is the identity.
func gidMeansTheSame() bool {
	data, err := os.ReadFile("/proc/self/gid_map")
	if err != nil {
		return false
	}
	return strings.Join(strings.Fields(string(data)), " ") == "0 0 4294967295"
}

// applyProcStep does one step beneath the fresh /proc and reports whether
// there was anything to do: a path the new proc does not have (subset=pid,
// a kernel without it) has nothing to hide.
func applyProcStep(s procStep) (bool, error) {
	target := "/proc/" + s.Path
	var st unix.Stat_t
	if err := unix.Lstat(target, &st); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return false, nil
		}
		return false, err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		// /proc/self, /proc/net, /proc/mounts: per-process links; a
		// mount never sits on a link, and following one would leave
		// /proc.
		return false, nil
	}
	const always = unix.MS_NOSUID | unix.MS_NOEXEC
	switch s.Kind {
	case stepMask:
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return true, unix.Mount("tmpfs", target, "tmpfs", unix.MS_RDONLY|unix.MS_NODEV|always, "mode=0555")
		}
		// Not nodev: the mask reads as an empty file, as runc's does,
		// rather than failing with EACCES.
		if err := unix.Mount("/dev/null", target, "", unix.MS_BIND, ""); err != nil {
			return false, fmt.Errorf("bind /dev/null: %w", err)
		}
		return true, remountBind(target, unix.MS_RDONLY|always)
	default:
		if err := unix.Mount(target, target, "", unix.MS_BIND, ""); err != nil {
			return false, fmt.Errorf("bind onto itself: %w", err)
		}
		flags := s.Flags | always | unix.MS_NODEV
		if s.ReadOnly {
			flags |= unix.MS_RDONLY
		}
		return true, remountBind(target, flags)
	}
}

// remountBind sets flags on a bind mount, keeping the flags it already
// has: in a user namespace the kernel refuses a remount that would clear
// a flag the mount was locked with (nosuid on the /dev that /dev/null
// comes from, say).
func remountBind(target string, flags uintptr) error {
	var fs unix.Statfs_t
	if err := unix.Statfs(target, &fs); err != nil {
		return fmt.Errorf("statfs: %w", err)
	}
	for _, m := range []struct {
		st   int64
		flag uintptr
	}{
		{unix.ST_RDONLY, unix.MS_RDONLY}, {unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV},
		{unix.ST_NOEXEC, unix.MS_NOEXEC}, {unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME},
		{unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if int64(fs.Flags)&m.st != 0 {
			flags |= m.flag
		}
	}
	if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|flags, ""); err != nil {
		return fmt.Errorf("remount: %w", err)
	}
	return nil
}
