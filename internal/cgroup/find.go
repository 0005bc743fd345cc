package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/corral-sh/corral/internal/container"
	"golang.org/x/sys/unix"
)

// ErrUnavailable is wrapped by every error that means "no cgroup v2 corral
// may use here" (none mounted, read-only, not writable, a kernel without
// cgroup.kill, clone3 refused): the caller falls back to its /proc walk and
// says why only when asked (-v, corral probe). Any other error from this
// package is unexpected (EMFILE, a malformed /proc file) and worth a line
// of its own; the fallback is the same.
var ErrUnavailable = errors.New("no usable cgroup v2")

func unavailable(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnavailable, fmt.Sprintf(format, args...))
}

// Parent is the caller's own cgroup v2: runs get cgroups of their own
// beneath it, so every limit placed on the caller (a CI job's pids.max, a
// service's MemoryMax) still covers them.
type Parent struct {
	// Owner is the pid named in the new cgroup's name, corral-OWNER-RANDOM;
	// 0: this process's. A pidns init sets the host side's, which an
	// operator (or a test) can see from outside, rather than its own 1.
	Owner int
	// Mount is where the v2 hierarchy is mounted: /sys/fs/cgroup on a
	// pure v2 system, /sys/fs/cgroup/unified in a hybrid layout.
	Mount string
	// Path is the caller's cgroup as /proc/self/cgroup names it: "/" or
	// e.g. "/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope".
	Path string
	// Dir is that cgroup's directory: Mount joined with Path minus the
	// mount's root.
	Dir string
}

// Find locates the caller's cgroup v2 and checks, without changing
// anything, that corral may create cgroups beneath it and start processes
// into them. An error wrapping ErrUnavailable says why not, and what would
// change that.
//
// Passing these checks is not a promise: Parent.New makes the cgroup and is
// the real test (the kernel's cgroup.kill can only be seen on a non-root
// cgroup, and permission is the kernel's to grant).
func Find() (*Parent, error) {
	self, err := readFile("/proc/self/cgroup", 1024)
	if err != nil {
		return nil, fmt.Errorf("read the caller's cgroup: %w", err)
	}
	if p := atUsualPlace(self); p != nil {
		// Any answer but a hidden directory is the one every other mount
		// of the hierarchy would give: a cgroup's mode, type and the
		// kernel's features do not depend on where it is seen from.
		if err := p.check(); !errors.As(err, new(*hiddenError)) {
			if err != nil {
				return nil, err
			}
			return p, nil
		}
	}
	mountinfo, err := readFile("/proc/self/mountinfo", 8192)
	if err != nil {
		return nil, fmt.Errorf("read the mount table: %w", err)
	}
	p, err := locate(mountinfo, self, container.Here())
	if err != nil {
		return nil, err
	}
	if err := p.check(); err != nil {
		return nil, err
	}
	return p, nil
}

// usualMounts are where systemd mounts the cgroup v2 hierarchy: a pure v2
// layout, then a hybrid one.
var usualMounts = []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}

// initialCgroupNamespace is /proc/self/ns/cgroup in the initial cgroup
// namespace, whose inode number is fixed (PROC_CGROUP_INIT_INO).
const initialCgroupNamespace = "cgroup:[4026531835]"

// atUsualPlace finds the caller's cgroup without the mount table, which
// on a host with many mounts (a Kubernetes node, a desktop with snaps) is
// tens of kilobytes the kernel formats for each launch: where the caller
// is in the initial cgroup namespace (so procCgroup's path starts at the
// hierarchy's real root) and a writable cgroup2 mount at one of the usual
// places shows that root (the one cgroup without a cgroup.type), the
// caller's cgroup is that path beneath the mount. Nil: ask the mount
// table (locate).
func atUsualPlace(procCgroup []byte) *Parent {
	path, found, err := parseProcCgroup(procCgroup)
	if err != nil || !found {
		return nil
	}
	var link [64]byte
	n, err := unix.Readlink("/proc/self/ns/cgroup", link[:])
	if err != nil || string(link[:n]) != initialCgroupNamespace {
		return nil
	}
	for _, m := range usualMounts {
		var fs unix.Statfs_t
		if unix.Statfs(m, &fs) != nil || fs.Type != unix.CGROUP2_SUPER_MAGIC {
			continue
		}
		if fs.Flags&unix.ST_RDONLY != 0 {
			return nil // another mount may be writable
		}
		if err := unix.Faccessat(unix.AT_FDCWD, m+"/cgroup.type", unix.F_OK, 0); !errors.Is(err, unix.ENOENT) {
			return nil // a subtree, not the root
		}
		return &Parent{Mount: m, Path: path, Dir: filepath.Join(m, path)}
	}
	return nil
}

// hiddenError is check's answer when Dir is not the cgroup it names (not
// there, or another filesystem mounted over it): another mount may show it.
type hiddenError struct{ err error }

func (e *hiddenError) Error() string { return e.err.Error() }
func (e *hiddenError) Unwrap() error { return e.err }

// locate picks, from the mount table and the caller's /proc/self/cgroup,
// the cgroup2 mount that shows the caller's cgroup and names its directory.
// engine is the container engine corral runs under: inside its container a
// cgroup2 mount is the engine's to give, not a command to run there.
func locate(mountinfo, procCgroup []byte, engine container.Engine) (*Parent, error) {
	path, found, err := parseProcCgroup(procCgroup)
	if err != nil {
		return nil, err
	}
	if !found {
		if engine.Known() {
			return nil, unavailable("the caller is in no cgroup v2 hierarchy (cgroup v1 only), and inside a %s container only the engine can give it one: run the container on a host booted with systemd.unified_cgroup_hierarchy=1", engine)
		}
		return nil, unavailable("the caller is in no cgroup v2 hierarchy (cgroup v1 only); mount one (mount -t cgroup2 none /sys/fs/cgroup/unified) or boot with systemd.unified_cgroup_hierarchy=1")
	}
	mounts, err := parseMountinfo(mountinfo)
	if err != nil {
		return nil, err
	}
	var seen []string
	var readOnly *Parent
	for _, m := range mounts {
		if m.fstype != "cgroup2" {
			continue
		}
		seen = append(seen, m.point)
		rel, ok := within(m.root, path)
		if !ok {
			continue
		}
		p := &Parent{Mount: m.point, Path: path, Dir: filepath.Join(m.point, rel)}
		if !m.readOnly {
			return p, nil
		}
		if readOnly == nil {
			readOnly = p
		}
	}
	switch {
	case readOnly != nil:
		return nil, unavailable("cgroup v2 at %s is mounted read-only (usual in a container); give corral a writable cgroup (a container with its own writable cgroup namespace, or a privileged one)", readOnly.Mount)
	case len(seen) == 0 && engine.Known():
		return nil, unavailable("cgroup v2 is not mounted in this %s container (no cgroup2 line in /proc/self/mountinfo), and only the engine can mount one there: run the container on a host booted with systemd.unified_cgroup_hierarchy=1, privileged for a writable one", engine)
	case len(seen) == 0:
		return nil, unavailable("cgroup v2 is not mounted (no cgroup2 line in /proc/self/mountinfo); mount it (mount -t cgroup2 none /sys/fs/cgroup/unified) to let corral use it")
	}
	return nil, unavailable("the caller's cgroup %s is not visible under any cgroup2 mount (%s): a mount shows only part of the hierarchy", path, strings.Join(seen, ", "))
}

// within returns path relative to a mount of the hierarchy's subtree root,
// as an absolute path inside that mount.
func within(root, path string) (string, bool) {
	switch {
	case root == "/":
		return path, true
	case path == root:
		return "/", true
	case strings.HasPrefix(path, root+"/"):
		return path[len(root):], true
	}
	return "", false
}

// check asks the filesystem and the kernel what locate could not: that Dir
// is a live cgroup2 directory of a usable type, that the caller may create
// cgroups in it and move processes out of it (CLONE_INTO_CGROUP needs
// write access to cgroup.procs of the common ancestor, Dir itself), and
// that clone3 is not filtered.
func (p *Parent) check() error {
	var fs unix.Statfs_t
	if err := unix.Statfs(p.Dir, &fs); err != nil {
		return &hiddenError{unavailable("%s: %v", p.Dir, err)}
	}
	if fs.Type != unix.CGROUP2_SUPER_MAGIC {
		return &hiddenError{unavailable("%s is not a cgroup2 filesystem (another mount hides the cgroup2 one)", p.Dir)}
	}
	// The hierarchy's real root has neither cgroup.type nor cgroup.kill;
	// every other cgroup (a cgroup namespace's root too) has both, on a
	// kernel with cgroup.kill.
	typ, err := readFile(filepath.Join(p.Dir, "cgroup.type"), 64)
	switch {
	case err == nil:
		if t := strings.TrimSpace(string(typ)); t != "domain" {
			return unavailable("the caller's cgroup %s is of type %q: corral only nests beneath a domain cgroup", p.Dir, t)
		}
		if _, err := os.Stat(filepath.Join(p.Dir, "cgroup.kill")); errors.Is(err, os.ErrNotExist) {
			return errNoKill()
		}
	case !errors.Is(err, os.ErrNotExist):
		return unavailable("read %s/cgroup.type: %v", p.Dir, err)
	}
	for _, f := range []struct {
		path string
		mode uint32
	}{{p.Dir, unix.W_OK | unix.X_OK}, {filepath.Join(p.Dir, "cgroup.procs"), unix.W_OK}} {
		if err := unix.Faccessat(unix.AT_FDCWD, f.path, f.mode, unix.AT_EACCESS); err != nil {
			return notWritable(f.path, err)
		}
	}
	return clone3Available()
}

// errNoKill is made when it is needed, not while the package initialises:
// formatting it there was the first use of fmt in every corral process.
func errNoKill() error {
	return unavailable("this kernel has no cgroup.kill (Linux 5.14 or later is needed); without it a kill could be outrun by forks, so the /proc walk stays")
}

func notWritable(path string, err error) error {
	if errors.Is(err, unix.EROFS) {
		return unavailable("%s is on a read-only mount (usual in a container); give corral a writable cgroup", path)
	}
	owner := ""
	var st unix.Stat_t
	if unix.Stat(path, &st) == nil {
		owner = fmt.Sprintf(", owned by uid %d", st.Uid)
		// In a user namespace (pidns mode's init) an owner it does not
		// map shows as the overflow uid, usually 65534, nobody's own.
		if data, err := readFile("/proc/sys/kernel/overflowuid", 16); err == nil && strings.TrimSpace(string(data)) == fmt.Sprint(st.Uid) && inUserNamespace() {
			owner = fmt.Sprintf(", owned by a uid that corral's user namespace does not map (shown as %d)", st.Uid)
		}
	}
	return unavailable("uid %d may not write %s (%v%s); run corral as root, or inside a cgroup delegated to its user, e.g. systemd-run --user --scope -p Delegate=yes corral …",
		os.Geteuid(), path, err, owner)
}

// inUserNamespace reports whether the caller's uid map is not the initial
// namespace's identity map of every uid.
func inUserNamespace() bool {
	data, err := readFile("/proc/self/uid_map", 64)
	return err == nil && strings.Join(strings.Fields(string(data)), " ") != "0 0 4294967295"
}

// clone3Available calls clone3 with a size the kernel refuses before it
// looks at anything: EINVAL means the system call exists and is not
// filtered. Docker's seccomp profile answers ENOSYS for it, so that libcs
// fall back to clone; CLONE_INTO_CGROUP has no such fallback.
func clone3Available() error {
	_, _, errno := unix.RawSyscall(unix.SYS_CLONE3, 0, 0, 0)
	if errno == unix.EINVAL {
		return nil
	}
	return unavailable("clone3 is refused (%v), usually by a seccomp filter; starting a process into a cgroup needs it", errno)
}

// Check is the full test `corral probe` reports: Find, then make and remove
// a cgroup. It returns where runs' cgroups would go.
func Check() (string, error) {
	p, err := Find()
	if err != nil {
		return "", err
	}
	c, err := p.New()
	if err != nil {
		return "", err
	}
	if err := c.Remove(); err != nil {
		return "", err
	}
	return p.Dir, nil
}

// readFile reads a small kernel-generated file with open, read and close
// only: os.ReadFile would also fstat it and offer it to the runtime
// poller, doubling what Find costs each run's launch.
func readFile(path string, size int) ([]byte, error) {
	fd, err := openAt(unix.AT_FDCWD, path, unix.O_RDONLY)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	buf := make([]byte, size)
	n := 0
	for {
		if n == len(buf) {
			buf = append(buf, make([]byte, len(buf))...)
		}
		m, err := unix.Read(fd, buf[n:])
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		case m == 0:
			return buf[:n], nil
		}
		n += m
	}
}
