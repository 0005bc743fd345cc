package runner

// The filesystem rules as mounts, in namespace modes (SPEC, "Sandbox
// policy"; DESIGN, "What Landlock does not cover, and how corral holds
// it"). Landlock has no right for metadata: chmod, chown, xattrs and
// times pass every rule. And its rights are hierarchical: a grant on a
// project covers the project's .git/hooks. A read-only mount refuses
// every change with EROFS, the metadata ones included, and a mount point
// cannot be renamed or removed (EBUSY), so the exec stage, which still
// holds CAP_SYS_ADMIN in the init's user namespace, makes the runner a
// mount namespace of its own before it confines the thread:
//
//   - under --writable or --read-only, every mount read-only
//     (mount_setattr, AT_RECURSIVE: /sys, /dev, a tmpfs /tmp, ... too),
//     then each writable path bound onto itself and made writable again;
//   - the protected paths beneath a writable one (protect.go) bound
//     read-only onto themselves, a repository's .git bound onto itself;
//     then a --writable path beneath a protected one bound writable again
//     (the explicit re-grant);
//   - each hidden path bound read-only onto itself, with what lies
//     beneath it (Landlock refuses every access there).
//
// The namespace is the runner's alone: the engine (the init) keeps its
// own, where the state file, the cgroup and the run's logs stay writable,
// and nothing propagates to the caller's (the init made every mount
// private, and so is every copy). The runner cannot reach the init's
// namespace through /proc/1/root: the init is not dumpable
// (supervise.guardFromRunner).
//
// Device nodes: /dev is read-only like the rest. Writing to a character
// device never needs a writable mount (the kernel asks the mount only for
// regular files, directories and links), so /dev/null, /dev/zero,
// /dev/full, /dev/tty, /dev/ptmx and /dev/pts/N stay usable as Landlock
// allows; their metadata (chmod of a terminal, say) is refused like any
// other outside the writable paths.
//
// Landlock stays the first layer: its rules bind inodes, which these
// mounts do not change, and it is applied after them (it forbids every
// mount once on).

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/corral-sh/corral/internal/proc"
	"github.com/corral-sh/corral/internal/setuperr"
	"github.com/corral-sh/corral/sandbox/internal/plan"
	"golang.org/x/sys/unix"
)

// mountRules makes the runner's mount namespace for p and its mounts, on
// the calling thread, which must be locked to it and exec the runner:
// a mount namespace unshared by one thread is that thread's, and execve
// keeps it.
func mountRules(p plan.Privileges) error {
	wd, wdErr := os.Getwd()
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return mountError("make the runner a mount namespace of its own", err)
	}
	// The init made its mounts private, and copies of private mounts are
	// private; said once more, so that nothing here could ever reach the
	// caller's namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return mountError("make the runner's mounts private", err)
	}
	// The layers first: DIR is then one of the writable paths below.
	if err := mountOverlays(p.Overlays); err != nil {
		return err
	}
	m := layout(p)
	if err := m.apply(); err != nil {
		return err
	}
	// The working directory was resolved before the binds: a writable
	// one would still be the read-only mount beneath them.
	if wdErr == nil {
		if err := unix.Chdir(wd); err != nil {
			return mountError("enter the working directory "+wd+" again in the runner's mount namespace", err)
		}
	}
	return nil
}

// mounts is what mountRules does, as data, in order.
type mounts struct {
	readOnly bool     // every mount read-only first
	writable []string // bound onto themselves, writable; parents first
	pinned   []string // bound onto themselves as they are: a .git that must not be renamed
	protect  []string // bound onto themselves, read-only
	regrant  []string // writable paths beneath a protected one: bound writable again, last
	hide     []string // bound onto themselves, read-only, last
}

// layout decides the mounts of p: every path canonical (as Landlock
// resolves them), hidden paths winning over the rest.
func layout(p plan.Privileges) mounts {
	pol := p.Landlock
	var m mounts
	m.readOnly = len(pol.Writable) > 0 || pol.ReadOnly
	for _, h := range pol.Hide {
		if c, ok := canonical(h); ok && c != "/" {
			m.hide = appendNew(m.hide, c)
		}
	}
	m.hide = outermost(m.hide)
	hidden := func(path string) bool { return underAny(path, m.hide) }
	for _, w := range pol.Writable {
		if c, ok := canonical(w); ok && !hidden(c) {
			m.writable = appendNew(m.writable, c)
		}
	}
	sortByDepth(m.writable)
	if len(m.writable) == 0 {
		return m
	}
	prot := protectedPaths(p.Protect) // protect.go
	for _, pin := range prot.pinned {
		if underAny(pin, m.writable) && !hidden(pin) && !slices.Contains(m.writable, pin) {
			m.pinned = appendNew(m.pinned, pin)
		}
	}
	for _, pp := range prot.paths {
		// Only beneath a writable path: elsewhere the tree is read-only
		// already. A --writable naming the path itself re-grants it.
		if !underAny(pp, m.writable) || hidden(pp) || slices.Contains(m.writable, pp) {
			continue
		}
		m.protect = appendNew(m.protect, pp)
	}
	sortByDepth(m.pinned)
	sortByDepth(m.protect)
	for _, w := range m.writable {
		for _, pp := range m.protect {
			if w != pp && beneath(w, pp) {
				m.regrant = appendNew(m.regrant, w)
				break
			}
		}
	}
	return m
}

func (m mounts) apply() error {
	var orig []proc.MountEntry
	if len(m.writable) > 0 {
		var err error
		if orig, err = readMounts(); err != nil {
			return mountError("read the mount table", err)
		}
	}
	if m.readOnly {
		if err := setReadOnly("/", true); err != nil {
			return mountError("make every mount read-only outside the writable paths", err)
		}
	}
	for _, w := range m.writable {
		if err := bindWritable(w, orig); err != nil {
			return mountError("keep "+w+" writable (--writable)", err)
		}
	}
	for _, pin := range m.pinned {
		if err := bind(pin); err != nil {
			return mountError("keep "+pin+" from being renamed or replaced (a protected path)", err)
		}
	}
	for _, pp := range m.protect {
		if err := bind(pp); err != nil {
			return mountError("make "+pp+" read-only (a protected path beneath a writable one)", err)
		}
		if err := setReadOnly(pp, true); err != nil {
			return mountError("make "+pp+" read-only (a protected path beneath a writable one)", err)
		}
	}
	for _, w := range m.regrant {
		if err := bindWritable(w, orig); err != nil {
			return mountError("keep "+w+" writable beneath a protected path (--writable)", err)
		}
	}
	if len(m.hide) > 0 {
		if err := cover(m.hide); err != nil {
			return err
		}
	}
	return nil
}

// bind binds path onto itself, with every mount beneath it: a bind
// without them is refused where the caller's mounts are locked (a user
// namespace), as it would show what they cover.
func bind(path string) error {
	if err := unix.Mount(path, path, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind onto itself: %w", err)
	}
	return nil
}

// bindWritable binds path onto itself and clears the read-only flag the
// tree got, mount by mount, on those the caller had writable: a mount the
// caller has read-only stays so (in a user namespace its flag is locked
// anyway), and the runner never gets more than the caller had. orig is
// the caller's table, read before the tree was made read-only.
func bindWritable(path string, orig []proc.MountEntry) error {
	if err := bind(path); err != nil {
		return err
	}
	now, err := readMounts()
	if err != nil {
		return err
	}
	for _, e := range now {
		if !beneath(e.MountPoint, path) {
			continue
		}
		// The bind at path copies the mount path lies on; a mount
		// beneath it, the caller's at the same place.
		was := containing(orig, e.MountPoint)
		if e.MountPoint != path {
			was = at(orig, e.MountPoint)
		}
		if was == nil || hasOpt(was.Options, "ro") {
			continue
		}
		err := mountReadOnly(e.MountPoint, false, false)
		if err != nil && !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EACCES) {
			return fmt.Errorf("%s: %w", e.MountPoint, err)
		}
	}
	return nil
}

// readMounts reads this thread's mount table: the namespace is this
// thread's alone (/proc/self would show the thread group leader's).
func readMounts() ([]proc.MountEntry, error) {
	return proc.ReadMountTable("/proc/thread-self/mountinfo")
}

func hasOpt(opts []string, name string) bool { return slices.Contains(opts, name) }

// setReadOnly sets or clears the read-only flag of the mount at path and
// of every mount beneath it.
func setReadOnly(path string, ro bool) error {
	return mountReadOnly(path, ro, true)
}

// noMountSetattrEnv makes the exec stage take the fallback below, as on a
// kernel before 5.12, so that it is tested on this one. It only changes
// how the same mounts are made read-only, never whether: a runner that
// sets it for a nested corral gains nothing.
const noMountSetattrEnv = "CORRAL_TEST_NO_MOUNT_SETATTR"

// mountReadOnly sets (ro) or clears the read-only flag of the mount at
// path, and with recursive of every mount beneath it: mount_setattr(2)
// (Linux 5.12), or where the kernel has none, a read-only bind remount of
// each mount the table lists there, keeping its other per-mount flags
// (in a user namespace nosuid, nodev, noexec and the atime flags of a
// mount inherited from the caller are locked, and a remount that drops
// them is refused). Either way all of it or an error: a policy run never
// starts with part of the tree writable.
func mountReadOnly(path string, ro, recursive bool) error {
	if os.Getenv(noMountSetattrEnv) == "" {
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
		if !ro {
			attr = unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}
		}
		var flags uint
		if recursive {
			flags = unix.AT_RECURSIVE
		}
		err := unix.MountSetattr(-1, path, flags, &attr)
		if !errors.Is(err, unix.ENOSYS) {
			if err != nil {
				return fmt.Errorf("mount_setattr: %w", err)
			}
			return nil
		}
	}
	table, err := readMounts()
	if err != nil {
		return err
	}
	// Shallow first: a remount applies to the topmost mount at a path,
	// and every mount there is made the same.
	var todo []proc.MountEntry
	for _, e := range table {
		if e.MountPoint == path || (recursive && beneath(e.MountPoint, path)) {
			todo = append(todo, e)
		}
	}
	slices.SortStableFunc(todo, func(a, b proc.MountEntry) int {
		return strings.Count(a.MountPoint, "/") - strings.Count(b.MountPoint, "/")
	})
	for _, e := range todo {
		flags := unix.MS_REMOUNT | unix.MS_BIND | e.Flags()
		if ro {
			flags |= unix.MS_RDONLY
		} else {
			flags &^= unix.MS_RDONLY
		}
		if err := unix.Mount("", e.MountPoint, "", flags, ""); err != nil {
			if !recursive {
				return fmt.Errorf("remount %s: %w", e.MountPoint, err)
			}
			// A mount point out of this namespace's reach (beneath an
			// over-mount, or a folder the stage may not enter) is no
			// path the runner reaches either; anything else fails.
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EACCES) {
				continue
			}
			return fmt.Errorf("remount %s read-only: %w", e.MountPoint, err)
		}
	}
	return nil
}

// cover binds each hidden path onto itself, read-only: nothing beneath it
// can change, its metadata included, and the path itself cannot be
// renamed or removed (a mount point). Landlock refuses every access
// beneath it, as before.
//
// Not an empty mode-000 tmpfs over it, which would hide even what stat
// shows: the engine's socket checker resolves a connect's path in the
// runner's view with corral's own privileges, DAC override included, and
// would find nothing there (ENOENT) where the runner must get EACCES (a
// socket beneath --hide). Once the checker resolves with the runner's
// credentials (issue 33, finding 8) an empty cover gives EACCES there too.
func cover(hide []string) error {
	for _, h := range hide {
		if err := bind(h); err != nil {
			return mountError("hide "+h+" (--hide)", err)
		}
		if err := setReadOnly(h, true); err != nil {
			return mountError("hide "+h+" (--hide)", err)
		}
	}
	return nil
}

func mountError(step string, err error) *setuperr.SetupError {
	s := &setuperr.SetupError{Step: "sandbox policy: " + step, Err: err,
		Hint: "corral does not run the command without the policy it was asked for"}
	if errors.Is(err, unix.ENOSYS) {
		s.Hint = "the read-only mounts of a namespace mode need Linux 5.12 or later (mount_setattr); use --mode subreaper, or a newer kernel; " + s.Hint
	}
	return s
}

// outermost drops every path that lies beneath another of paths.
func outermost(paths []string) []string {
	var out []string
	for _, p := range paths {
		inner := false
		for _, q := range paths {
			if q != p && beneath(p, q) {
				inner = true
				break
			}
		}
		if !inner {
			out = append(out, p)
		}
	}
	return out
}

// sortByDepth puts parents before what lies beneath them.
func sortByDepth(paths []string) {
	slices.SortStableFunc(paths, func(a, b string) int {
		return strings.Count(a, "/") - strings.Count(b, "/")
	})
}
