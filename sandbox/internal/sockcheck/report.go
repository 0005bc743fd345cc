package sockcheck

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/internal/seccomp"
)

// Naming what the filesystem rules refuse where the kernel enforces them
// (Policy.ReportFS: namespace modes, where the runner's mount namespace
// is read-only outside the writable paths and Landlock is on). Landlock
// refuses silently, and an agent's tools swallow the EACCES, so the
// checker looks at each write-intent and metadata call, resolves its path
// once in the caller's view (as fswrite.go does, with the caller's
// credentials), names what the policy will refuse, and answers CONTINUE.
// CONTINUE is safe here and only here: the look decides nothing. A runner
// thread that swaps the path after the look reaches whatever it swapped
// in through the kernel's own checks, the read-only mounts and Landlock,
// which hold every path the runner could name (DESIGN.md, "Reporting what
// the rules refused"); at worst a refusal goes unnamed, or a name is said
// for a call the kernel then let through.

// reported is a checked call's answer under ReportFS: every call runs,
// whatever the look found (a path that does not resolve, a copy that
// failed: the kernel says it to the caller), unless the caller is gone.
func (c *Checker) reported(val int64, e unix.Errno) (int64, unix.Errno) {
	if e == protected {
		return 0, unix.EROFS
	}
	if !c.pol.ReportFS || e == gone || e == answered {
		return val, e
	}
	return 0, proceed
}

// fsReport looks at one write-intent call and names it when the policy
// refuses it; the caller's credentials are on the thread (fsWrite). It
// returns protected for a call that reaches a protected path: the checker
// refuses that one itself (EROFS). A protected path that exists is a
// read-only mount, which would refuse it all the same; one that does not
// exist yet (.envrc, a new hook) no mount can hold, and this refusal is
// what keeps it from being made. A runner thread that swaps the path
// after this look gets past it; the host side moves aside what appears
// at such a name the moment it appears (sandbox, protectwatch.go).
func (c *Checker) fsReport(f *fsCall) unix.Errno {
	var e unix.Errno
	switch f.op {
	case seccomp.FSOpen, seccomp.FSCreat, seccomp.FSOpenat, seccomp.FSOpenat2:
		e = c.reportOpen(f)
	case seccomp.FSMkdir, seccomp.FSMkdirat, seccomp.FSMknod, seccomp.FSMknodat, seccomp.FSSymlink, seccomp.FSSymlinkat:
		e = c.reportOne(f, touchCreate)
	case seccomp.FSUnlink, seccomp.FSRmdir, seccomp.FSUnlinkat:
		e = c.reportOne(f, touchRemove)
	case seccomp.FSRename, seccomp.FSRenameat, seccomp.FSRenameat2, seccomp.FSLink, seccomp.FSLinkat:
		e = c.reportTwo(f)
	case seccomp.FSTruncate:
		e = c.reportOpen(f)
	}
	if e == unix.EROFS {
		return protected
	}
	return proceed
}

// reportOne names a create or a remove of the call's one path: not when
// the kernel answers first for another reason (EEXIST for a create of a
// name that exists, ENOENT for a remove of one that does not).
func (c *Checker) reportOne(f *fsCall, how int) unix.Errno {
	nd, e := c.resolveParent(f, f.dirfd[0], f.path[0], 0)
	if e != 0 {
		return 0
	}
	defer nd.close()
	if isDots(nd.name) || exists(nd) != (how == touchRemove) {
		return 0
	}
	return c.decideFS(f, nd, nd.path(), how)
}

// reportTwo names a rename's refused side (the source first), or a
// link's new name.
func (c *Checker) reportTwo(f *fsCall) unix.Errno {
	link := f.op == seccomp.FSLink || f.op == seccomp.FSLinkat
	if link && f.aflag&unix.AT_EMPTY_PATH != 0 && f.path[0] == "" {
		f.path[0] = "." // the descriptor's file: only the new name is looked at
	}
	src, e := c.resolveParent(f, f.dirfd[0], f.path[0], 0)
	if e != 0 {
		return 0
	}
	defer src.close()
	dst, e := c.resolveParent(f, f.dirfd[1], f.path[1], 0)
	if e != 0 {
		return 0
	}
	defer dst.close()
	if isDots(dst.name) || (!link && (isDots(src.name) || !exists(src))) {
		return 0
	}
	if link {
		if !exists(dst) {
			return c.decideFS(f, dst, dst.path(), touchCreate)
		}
		return 0
	}
	if !link && !sameMount(src.dir, dst.dir) {
		return 0 // EXDEV, which the kernel says first (mv then copies)
	}
	if e := c.decideFS(f, src, src.path(), touchRemove); e != 0 {
		return e
	}
	return c.decideFS(f, dst, dst.path(), touchRemove)
}

// sameMount: two folders lie on one mount (a rename between two is
// refused with EXDEV before any other check).
func sameMount(a, b int) bool {
	var sa, sb unix.Statx_t
	if unix.Statx(a, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &sa) != nil ||
		unix.Statx(b, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &sb) != nil {
		return true
	}
	return sa.Mnt_id == sb.Mnt_id
}

// reportOpen names an open for writing (or a truncate) of a file the
// policy does not let be written or created, following a symlink at the
// last component as the kernel will.
func (c *Checker) reportOpen(f *fsCall) unix.Errno {
	flags := f.flags & validOpenFlags
	if f.op == seccomp.FSTruncate {
		flags = unix.O_WRONLY
	}
	if flags&unix.O_PATH != 0 || flags&(unix.O_WRONLY|unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC) == 0 {
		return 0 // openat2 of a read: nothing is written
	}
	nd, e := c.resolveParent(f, f.dirfd[0], f.path[0], f.resolve&^resolveCached)
	if e != 0 {
		return 0
	}
	defer func() { nd.close() }()
	if isDots(nd.name) {
		return 0 // EISDIR, or O_TMPFILE in "." (not named)
	}
	if flags&unix.O_NOFOLLOW == 0 && flags&(unix.O_CREAT|unix.O_EXCL) != unix.O_CREAT|unix.O_EXCL {
		if c.follow(f, nd, f.resolve) != 0 {
			return 0
		}
		if procFDDir(nd.dirPath) {
			c.reportProcFD(f, nd)
			return 0
		}
	}
	var st unix.Stat_t
	found := unix.Fstatat(nd.dir, nd.name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
	how := touchWrite
	switch {
	case flags&unix.O_TMPFILE == unix.O_TMPFILE:
	case found && flags&(unix.O_CREAT|unix.O_EXCL) == unix.O_CREAT|unix.O_EXCL:
		return 0 // EEXIST
	case !found && flags&unix.O_CREAT == 0:
		return 0 // ENOENT
	case !found:
		how = touchCreate
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return 0 // EISDIR (touch opens a folder so before its utimensat)
	case flags&(unix.O_WRONLY|unix.O_RDWR|unix.O_TRUNC) == 0:
		return 0 // O_CREAT of a file that exists: a read
	}
	return c.decideFS(f, nd, nd.path(), how)
}

// reportProcFD names an open for writing of the caller's descriptor
// through /proc (/dev/stdout, /proc/self/fd/N) by the file it is: a
// pipe or a socket has no place to refuse, a file does.
func (c *Checker) reportProcFD(f *fsCall, nd *node) {
	tgid, err := threadGroupOf(f.cl.tid)
	if err != nil {
		return
	}
	owner := nd.dirPath[len("/proc/"):]
	owner = owner[:strings.IndexByte(owner, '/')]
	if owner != strconv.Itoa(os.Getpid()) && owner != strconv.Itoa(tgid) {
		return // another process's descriptor: not looked at
	}
	num, err := strconv.Atoi(nd.name)
	if err != nil || num < 0 {
		return
	}
	var dup int
	var e unix.Errno
	if werr := f.cl.w.withOwn(func() {
		if e = c.pidfdOf(f); e == 0 {
			dup, err = seccomp.GetFD(f.pidfd, num)
		}
	}); werr != nil || e != 0 || err != nil {
		return
	}
	defer unix.Close(dup)
	var st unix.Stat_t
	if unix.Fstat(dup, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return
	}
	if where, e := fdPath(dup); e == 0 {
		c.decideFS(f, nil, where, touchWrite)
	}
}

// dacRefuses reports whether the caller's own permissions refuse the
// call where it lands: a file not writable to it, a folder it may not
// add to or remove from, a name that is not there. The thread carries the
// caller's credentials (AT_EACCESS: its fsuid, groups, capabilities). A
// read-only mount answers EROFS only once the permissions let the write
// through, and Landlock is not asked (it has no hook there).
func dacRefuses(nd *node, how int) bool {
	if nd == nil || nd.dir < 0 {
		return false
	}
	var err error
	switch how {
	case touchWrite:
		name, flags := nd.name, unix.AT_EACCESS|unix.AT_SYMLINK_NOFOLLOW
		if name == "" {
			flags |= unix.AT_EMPTY_PATH
		}
		err = unix.Faccessat2(nd.dir, name, unix.W_OK, flags)
	case touchCreate, touchRemove:
		err = unix.Faccessat2(nd.dir, "", unix.W_OK|unix.X_OK, unix.AT_EACCESS|unix.AT_EMPTY_PATH)
	default:
		return false
	}
	return err == unix.EACCES || err == unix.EPERM || err == unix.ENOENT
}

// mountTried names, once per run, a program of the tree that tried to
// mount or to make the namespaces a mounting sandbox starts with: under
// a filesystem rule Landlock refuses its mounts, and the sandbox fails in
// words of its own.
func (c *Checker) mountTried(n *seccomp.Notif, m seccomp.MountCall) {
	if c.pol.Report == nil || !c.mountNamed.CompareAndSwap(false, true) {
		return
	}
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(int(n.Pid)) + "/comm")
	if err != nil {
		comm = []byte("a program")
	}
	c.pol.Report(Refusal{Tid: int(n.Pid), Call: m.String(), Kind: "mount", Path: strings.TrimSuffix(string(comm), "\n"),
		Reason: "mounts are refused under a filesystem rule"})
}

// plainCall: every path of the call is, by its letters, strictly
// beneath a writable path and clear of --hide and of every protected
// path — a relative one joined to the folder its base names
// (/proc/TID/cwd, /proc/TID/fd/N, one readlink) — so the look can end
// before anything is copied or resolved: a write in a project (npm ci's
// thousands, tar -x's one a file) costs the round trip and little more.
// The writable paths are canonical, so the only way such a path lands
// elsewhere is a symlink the tree made beneath a writable path: a
// refusal there goes unnamed, and the kernel still refuses it (ReportFS
// decides nothing).
func (c *Checker) plainCall(f *fsCall) bool {
	a := f.cl.n.Data.Args
	cwd := uint64(0xffffff9c) // AT_FDCWD as the kernel reads an int
	var pairs [][2]uint64     // (dirfd, path pointer)
	switch f.op {
	case seccomp.FSOpen, seccomp.FSCreat, seccomp.FSMkdir, seccomp.FSMknod, seccomp.FSUnlink, seccomp.FSRmdir, seccomp.FSTruncate:
		pairs = [][2]uint64{{cwd, a[0]}}
	case seccomp.FSOpenat, seccomp.FSMkdirat, seccomp.FSMknodat, seccomp.FSUnlinkat:
		pairs = [][2]uint64{{a[0], a[1]}}
	case seccomp.FSSymlink:
		pairs = [][2]uint64{{cwd, a[1]}}
	case seccomp.FSSymlinkat:
		pairs = [][2]uint64{{a[1], a[2]}}
	case seccomp.FSRename, seccomp.FSLink:
		pairs = [][2]uint64{{cwd, a[0]}, {cwd, a[1]}}
	case seccomp.FSRenameat, seccomp.FSRenameat2, seccomp.FSLinkat:
		pairs = [][2]uint64{{a[0], a[1]}, {a[2], a[3]}}
	default:
		return false // openat2's resolve flags: looked at in full
	}
	for _, pr := range pairs {
		path, e := c.readString(f.cl, pr[1], maxPath)
		if e != 0 || path == "" {
			return false
		}
		if path[0] != '/' {
			rel := strings.TrimSuffix(path, "/")
			if rel == "" || filepath.Clean(rel) != rel || rel == ".." || strings.HasPrefix(rel, "../") {
				return false
			}
			what := "cwd"
			if fd := int32(pr[0]); fd != atFDCWD {
				if fd < 0 {
					return false
				}
				what = "fd/" + strconv.Itoa(int(fd))
			}
			base, err := os.Readlink("/proc/" + strconv.Itoa(f.cl.tid) + "/" + what)
			if err != nil || !strings.HasPrefix(base, "/") {
				return false
			}
			path = strings.TrimSuffix(base, "/") + "/" + rel
		}
		if !c.plainPath(path) {
			return false
		}
	}
	return true
}

// plainPath: path, as the runner gave it, is absolute, clean, strictly
// beneath a writable path by its letters, and clear of --hide and of
// every protected path.
func (c *Checker) plainPath(path string) bool {
	p := c.pol.Writes
	path = strings.TrimSuffix(path, "/")
	if p == nil || path == "" || path[0] != '/' || filepath.Clean(path) != path || c.pol.hidden(path) {
		return false
	}
	inside := false
	for _, w := range p.Writable {
		if w == "/" || (len(path) > len(w) && path[:len(w)] == w && path[len(w)] == '/') {
			inside = true
			break
		}
	}
	if !inside {
		return false
	}
	if _, ok := p.Protects(path); ok {
		return false
	}
	if _, ok := p.holds(path); ok {
		return false
	}
	for _, pin := range p.Pinned {
		if path == pin {
			return false
		}
	}
	return true
}
