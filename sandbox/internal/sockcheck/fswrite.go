package sockcheck

import (
	"bytes"
	"encoding/binary"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/internal/seccomp"
)

// The runner's write-intent filesystem calls (seccomp
// RunnerRules.NotifyWrites; WritePolicy). Landlock cannot carve a
// protected path out of a writable one, and a call answered CONTINUE
// would be resolved again by the kernel after the check — a runner thread
// could swap a symlink or a folder in between. So the checker makes each
// call itself, on what it resolved once:
//
//   - it copies the path(s) out of the caller's memory once, and takes a
//     duplicate of each directory descriptor the call names (pidfd_getfd);
//   - it resolves the path's folder, as the caller would and with the
//     caller's credentials (creds.go), to an O_PATH descriptor: beneath
//     /proc/TID/root (RESOLVE_IN_ROOT) for an absolute path, from the
//     caller's working directory or the named descriptor otherwise, no
//     magic links;
//   - it decides on that folder — the path the kernel names for it
//     (/proc/self/fd/N) — and the last component, against WritePolicy:
//     outside the writable paths or beneath --hide EACCES, as the
//     runner's Landlock policy would; a protected path EROFS, as a
//     read-only mount would;
//   - it makes the call with the *at form on the folder's descriptor and
//     the last component, never following a symlink there (a symlink an
//     open follows is read, and its target resolved and decided the same
//     way), and answers with the result; an open's new descriptor goes
//     to the caller through SECCOMP_IOCTL_NOTIF_ADDFD, which answers the
//     call in the same step.
//
// The folder is held open from the decision to the call, so the call
// lands in the folder decided on, whatever is renamed meanwhile.

// fsCall is one write-intent call, with what was copied of it.
type fsCall struct {
	cl    *call
	op    seccomp.FSCall
	pidfd int
	// The call's paths and the directory descriptors they are relative
	// to (-1: the caller's working directory), as copied.
	path  [2]string
	dirfd [2]int
	// open: flags and mode (openat2: its struct's resolve too).
	flags   uint64
	mode    uint32
	resolve uint64
	// mknod's device, linkat's and renameat2's and unlinkat's flags.
	dev   uint64
	aflag int
	// truncate's length.
	length int64
	// symlink's target (its contents: never resolved here).
	target string
	// The caller's root and working directory (/proc/TID/root, cwd),
	// opened before the checker takes on the caller's credentials, for
	// the paths that need them; -1: not opened.
	root, cwd int
}

const atFDCWD = -100

// maxPath is PATH_MAX: a longer path fails with ENAMETOOLONG, as the
// kernel's own copy would.
const maxPath = 4096

// validOpenFlags are the flags open(2) knows (VALID_OPEN_FLAGS but
// O_LARGEFILE, which a 64-bit kernel forces): the rest the kernel ignores
// for open and openat, and openat2 would refuse, so they are dropped.
const validOpenFlags = unix.O_WRONLY | unix.O_RDWR | unix.O_CREAT | unix.O_EXCL | unix.O_NOCTTY | unix.O_TRUNC |
	unix.O_APPEND | unix.O_NONBLOCK | unix.O_SYNC | unix.O_DSYNC | unix.O_ASYNC | unix.O_DIRECT | unix.O_DIRECTORY |
	unix.O_NOFOLLOW | unix.O_NOATIME | unix.O_CLOEXEC | unix.O_PATH | unix.O_TMPFILE

// fsWrite checks and makes one write-intent call.
func (c *Checker) fsWrite(w *workerState, n *seccomp.Notif, op seccomp.FSCall) (int64, unix.Errno) {
	cl := &call{n: n, tid: int(n.Pid), w: w}
	f := &fsCall{cl: cl, op: op, dirfd: [2]int{-1, -1}, root: -1, cwd: -1, pidfd: -1}
	defer func() {
		if f.pidfd >= 0 {
			unix.Close(f.pidfd)
		}
	}()
	// Everything read of the caller up to the one check below (its
	// credentials, memory, descriptors, /proc folders) was the caller's
	// if its call is still pending then: its tid was not reused.
	cr, err := c.callerCreds(w, cl.n)
	if err != nil {
		if !c.valid(n) {
			return 0, gone
		}
		return 0, unix.EACCES
	}
	if c.pol.ReportFS && c.plainCall(f) { // report.go
		return 0, proceed
	}
	if e := c.copyFS(f); e != 0 {
		return 0, e
	}
	defer func() {
		for _, fd := range []int{f.dirfd[0], f.dirfd[1], f.root, f.cwd} {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
	}()
	// The bases the paths need, opened now with corral's own credentials
	// (which /proc/TID needs for a caller that made itself non-dumpable),
	// so that resolving as the caller needs no switch back.
	for i, p := range f.path {
		var e unix.Errno
		switch {
		case p == "":
		case p[0] == '/' && f.root < 0:
			f.root, e = procBase(cl, "root")
		case p[0] != '/' && f.dirfd[i] < 0 && f.cwd < 0:
			f.cwd, e = procBase(cl, "cwd")
		}
		if e != 0 {
			if !c.valid(n) {
				return 0, gone
			}
			return 0, e
		}
	}
	if !c.valid(n) {
		return 0, gone
	}
	if err := w.asCaller(cr); err != nil {
		return 0, unix.EACCES
	}
	if c.pol.ReportFS {
		return 0, c.fsReport(f) // report.go: named, and the kernel decides
	}
	switch op {
	case seccomp.FSOpen, seccomp.FSCreat, seccomp.FSOpenat, seccomp.FSOpenat2:
		return c.fsOpen(f)
	case seccomp.FSMkdir, seccomp.FSMkdirat, seccomp.FSMknod, seccomp.FSMknodat, seccomp.FSSymlink, seccomp.FSSymlinkat:
		return c.fsCreate(f)
	case seccomp.FSUnlink, seccomp.FSRmdir, seccomp.FSUnlinkat:
		return c.fsRemove(f)
	case seccomp.FSRename, seccomp.FSRenameat, seccomp.FSRenameat2, seccomp.FSLink, seccomp.FSLinkat:
		return c.fsTwo(f)
	case seccomp.FSTruncate:
		return c.fsTruncate(f)
	}
	return 0, unix.ENOSYS
}

// copyFS copies the call's arguments: each path once, each directory
// descriptor duplicated (with corral's own credentials: pidfd_getfd
// needs them for a caller that made itself non-dumpable).
func (c *Checker) copyFS(f *fsCall) unix.Errno {
	a := f.cl.n.Data.Args
	dir := func(i int, v uint64) unix.Errno {
		fd := int(int32(v))
		if fd == atFDCWD {
			return 0
		}
		if e := c.pidfdOf(f); e != 0 {
			return e
		}
		d, err := seccomp.GetFD(f.pidfd, fd)
		if err != nil {
			return unix.EBADF
		}
		f.dirfd[i] = d
		return 0
	}
	str := func(i int, v uint64) unix.Errno {
		s, e := c.readString(f.cl, v, maxPath)
		f.path[i] = s
		return e
	}
	var e unix.Errno
	switch f.op {
	case seccomp.FSOpen:
		e = str(0, a[0])
		f.flags, f.mode = uint64(uint32(a[1])), uint32(a[2])
	case seccomp.FSCreat:
		e = str(0, a[0])
		f.flags, f.mode = unix.O_CREAT|unix.O_WRONLY|unix.O_TRUNC, uint32(a[1])
	case seccomp.FSOpenat:
		f.flags, f.mode = uint64(uint32(a[2])), uint32(a[3])
		e = first(str(0, a[1]), dir(0, a[0]))
	case seccomp.FSOpenat2:
		if e = c.readHow(f, a[2], a[3]); e == 0 {
			e = first(str(0, a[1]), dir(0, a[0]))
		}
	case seccomp.FSMkdir:
		e = str(0, a[0])
		f.mode = uint32(a[1])
	case seccomp.FSMkdirat:
		f.mode = uint32(a[2])
		e = first(str(0, a[1]), dir(0, a[0]))
	case seccomp.FSMknod:
		e = str(0, a[0])
		f.mode, f.dev = uint32(a[1]), a[2]
	case seccomp.FSMknodat:
		f.mode, f.dev = uint32(a[2]), a[3]
		e = first(str(0, a[1]), dir(0, a[0]))
	case seccomp.FSSymlink:
		f.target, e = c.readString(f.cl, a[0], maxPath)
		e = first(e, str(0, a[1]))
	case seccomp.FSSymlinkat:
		f.target, e = c.readString(f.cl, a[0], maxPath)
		e = first(e, str(0, a[2]), dir(0, a[1]))
	case seccomp.FSUnlink:
		e = str(0, a[0])
	case seccomp.FSRmdir:
		e = str(0, a[0])
		f.aflag = unix.AT_REMOVEDIR
	case seccomp.FSUnlinkat:
		f.aflag = int(int32(a[2]))
		e = first(str(0, a[1]), dir(0, a[0]))
	case seccomp.FSRename, seccomp.FSLink:
		e = first(str(0, a[0]), str(1, a[1]))
	case seccomp.FSRenameat, seccomp.FSRenameat2, seccomp.FSLinkat:
		if f.op != seccomp.FSRenameat {
			f.aflag = int(int32(a[4]))
		}
		e = first(str(0, a[1]), str(1, a[3]), dir(0, a[0]), dir(1, a[2]))
	case seccomp.FSTruncate:
		e = str(0, a[0])
		f.length = int64(a[1])
	}
	if e != 0 && !c.valid(f.cl.n) {
		return gone
	}
	return e
}

// procBase opens the caller's root or working directory (/proc/TID/root,
// /proc/TID/cwd) O_PATH; the caller checks that the call is still pending
// afterwards. A caller with a root of its own (chroot) has no cwd base: a
// relative path could climb out of its root from there (EACCES).
func procBase(cl *call, what string) (int, unix.Errno) {
	dir := "/proc/" + strconv.Itoa(cl.tid) + "/"
	if what == "cwd" {
		if root, err := os.Readlink(dir + "root"); err != nil || root != "/" {
			return -1, unix.EACCES
		}
	}
	fd, err := unix.Open(dir+what, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, unix.EACCES
	}
	return fd, 0
}

// pidfdOf opens a pidfd for the caller when a call first needs one (a
// directory descriptor to duplicate), and checks that the call is still
// pending, so that the pidfd is the caller's.
func (c *Checker) pidfdOf(f *fsCall) unix.Errno {
	if f.pidfd >= 0 {
		return 0
	}
	pidfd, err := seccomp.OpenPidfd(f.cl.tid)
	if err != nil {
		if !c.valid(f.cl.n) {
			return gone
		}
		return unix.EACCES
	}
	f.pidfd = pidfd
	if !c.valid(f.cl.n) {
		return gone
	}
	return 0
}

func first(es ...unix.Errno) unix.Errno {
	for _, e := range es {
		if e != 0 {
			return e
		}
	}
	return 0
}

// readHow copies openat2's struct open_how (flags, mode, resolve), as
// the kernel does: smaller than its first version EINVAL, larger than a
// page E2BIG, and what lies past the fields it knows must be zero.
func (c *Checker) readHow(f *fsCall, addr, size uint64) unix.Errno {
	const ver0 = 24
	if size < ver0 {
		return unix.EINVAL
	}
	if size > 4096 {
		return unix.E2BIG
	}
	buf := make([]byte, size)
	if k, err := seccomp.ReadMemory(f.cl.tid, addr, buf); err != nil || k != len(buf) {
		return unix.EFAULT
	}
	for _, b := range buf[ver0:] {
		if b != 0 {
			return unix.E2BIG
		}
	}
	ne := binary.NativeEndian
	f.flags, f.mode, f.resolve = ne.Uint64(buf), uint32(ne.Uint64(buf[8:])), ne.Uint64(buf[16:])
	if f.flags&^uint64(validOpenFlags|unix.O_LARGEFILE|0x8000|0x20000) != 0 || ne.Uint64(buf[8:])&^0o7777 != 0 {
		return unix.EINVAL
	}
	if f.flags&(unix.O_CREAT|unix.O_TMPFILE) == 0 && f.mode != 0 {
		return unix.EINVAL
	}
	known := uint64(unix.RESOLVE_NO_XDEV | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_SYMLINKS |
		unix.RESOLVE_BENEATH | unix.RESOLVE_IN_ROOT | resolveCached)
	if f.resolve&^known != 0 || (f.resolve&unix.RESOLVE_BENEATH != 0 && f.resolve&unix.RESOLVE_IN_ROOT != 0) {
		return unix.EINVAL
	}
	return 0
}

// node is a resolved folder and a last component in it.
type node struct {
	dir      int    // O_PATH descriptor of the folder
	dirPath  string // the path the kernel names for it
	name     string // the last component ("" for the folder itself)
	trailing bool   // the path ended in "/"
}

func (nd *node) close() {
	if nd.dir >= 0 {
		unix.Close(nd.dir)
		nd.dir = -1
	}
}

// path is the node's path, as the checks compare it.
func (nd *node) path() string {
	if nd.name == "" {
		return nd.dirPath
	}
	if nd.dirPath == "/" {
		return "/" + nd.name
	}
	return nd.dirPath + "/" + nd.name
}

// resolveParent resolves the folder of path (relative to the caller's
// descriptor base, or its working directory when base is -1) in the
// caller's view, with the caller's credentials; extra are openat2
// resolve flags the caller asked for.
func (c *Checker) resolveParent(f *fsCall, base int, path string, extra uint64) (*node, unix.Errno) {
	if path == "" {
		return nil, unix.ENOENT
	}
	nd := &node{dir: -1}
	trimmed := strings.TrimRight(path, "/")
	nd.trailing = len(trimmed) != len(path)
	if trimmed == "" { // "/" itself
		trimmed, nd.trailing = "/.", true
	}
	dir, name := ".", trimmed
	if i := strings.LastIndexByte(trimmed, '/'); i >= 0 {
		dir, name = trimmed[:i+1], trimmed[i+1:]
	}
	nd.name = name
	if dir[0] == '/' {
		dir = selfPath(f, dir)
	}
	resolve := extra | unix.RESOLVE_NO_MAGICLINKS
	var bfd int
	if dir[0] == '/' && extra&(unix.RESOLVE_BENEATH|unix.RESOLVE_IN_ROOT) == 0 {
		fd, rest, ok, e := c.throughFD(f, dir) // fdpath.go
		if e != 0 {
			return nil, e
		}
		if ok {
			defer unix.Close(fd)
			base, dir = fd, rest
		}
	}
	switch {
	case dir[0] == '/' && extra&unix.RESOLVE_BENEATH != 0:
		return nil, unix.EXDEV
	case dir[0] == '/' && extra&unix.RESOLVE_IN_ROOT != 0 && base >= 0:
		bfd = base // the caller's root for this call is its descriptor
	case dir[0] == '/':
		resolve |= unix.RESOLVE_IN_ROOT
		fallthrough
	case base < 0:
		what, have := "cwd", f.cwd
		if dir[0] == '/' {
			what, have = "root", f.root
		}
		if have >= 0 {
			bfd = have
			break
		}
		var e unix.Errno
		if err := f.cl.w.withOwn(func() { bfd, e = c.openBase(f.cl, what, dir) }); err != nil {
			return nil, unix.EACCES
		}
		if e != 0 {
			return nil, e
		}
		defer unix.Close(bfd)
	default:
		bfd = base
	}
	fd, err := unix.Openat2(bfd, dir, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: resolve})
	if err != nil {
		return nil, errnoOr(err, unix.EACCES)
	}
	nd.dir = fd
	where, e := fdPath(fd)
	if e != 0 {
		nd.close()
		return nil, e
	}
	nd.dirPath = where
	return nd, 0
}

// fdPath is the path the kernel names for an open file; a folder
// removed meanwhile is ENOENT.
func fdPath(fd int) (string, unix.Errno) {
	where, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil || !strings.HasPrefix(where, "/") {
		return "", unix.EACCES
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", unix.EACCES
	}
	if st.Nlink == 0 {
		return "", unix.ENOENT
	}
	return where, 0
}

func errnoOr(err error, dflt unix.Errno) unix.Errno {
	if e, ok := errnoOf(err); ok {
		return e
	}
	return dflt
}

// The ways a call touches a path, for decide.
const (
	touchWrite  = iota // its contents (an open for writing, truncate)
	touchCreate        // a new name (mkdir, mknod, symlink, link's new name, an open that creates)
	touchRemove        // a name removed or replaced (unlink, rmdir, either side of a rename)
	touchSource        // a hard link's existing file
)

// decide holds one path a call touches to the policy, and names what it
// refuses: EACCES where the runner's Landlock policy would refuse it,
// EROFS for a protected path, EXDEV for a link whose file would gain
// rights (Landlock's answer).
//
// nd, when not nil, is where path lies (its folder and last component):
// a refusal is named only when the runner's own permissions (DAC) would
// have let the call through, since one they refuse anyway is not the
// policy's (SPEC, "Refusals are named").
func (c *Checker) decideFS(f *fsCall, nd *node, path string, how int) unix.Errno {
	p := c.pol.Writes
	refuse := func(e unix.Errno, reason string) unix.Errno {
		if !dacRefuses(nd, how) {
			c.reportWrite(f, path, reason)
		}
		return e
	}
	if c.pol.hidden(path) {
		return refuse(unix.EACCES, "beneath a --hide path")
	}
	if how == touchWrite && p.device(path) {
		return 0
	}
	if !p.writable(path) || (how != touchWrite && how != touchSource && isTop(p, path)) {
		if how == touchSource {
			return unix.EXDEV
		}
		return refuse(unix.EACCES, "not beneath a --writable path")
	}
	if e, ok := p.Protects(path); ok {
		return refuse(unix.EROFS, "a protected path ("+e+")")
	}
	if how == touchRemove || how == touchCreate {
		for _, pin := range p.Pinned {
			if path == pin {
				return refuse(unix.EROFS, "a protected path (a repository's .git cannot be removed or replaced)")
			}
		}
	}
	if how == touchRemove {
		if e, ok := p.holds(path); ok {
			return refuse(unix.EROFS, "a protected path ("+e+" lies beneath it)")
		}
	}
	return 0
}

// isTop: path is a --writable path itself, whose own name lies in a
// folder that is not writable.
func isTop(p *WritePolicy, path string) bool {
	for _, w := range p.Writable {
		if path == w {
			return !p.writable(parentOf(path))
		}
	}
	return false
}

func parentOf(path string) string {
	i := strings.LastIndexByte(path, '/')
	if i <= 0 {
		return "/"
	}
	return path[:i]
}

// reportWrite names a refused write.
func (c *Checker) reportWrite(f *fsCall, path, reason string) {
	if c.pol.Report != nil {
		c.pol.Report(Refusal{Tid: f.cl.tid, Call: f.op.String(), Kind: "fs", Path: path, Reason: reason})
	}
}

// dots answers a call whose last component is "." or "..": nothing is
// created or written there (the errno is the kernel's).
func dots(f *fsCall) unix.Errno {
	switch f.op {
	case seccomp.FSOpen, seccomp.FSCreat, seccomp.FSOpenat, seccomp.FSOpenat2, seccomp.FSTruncate:
		return unix.EISDIR
	case seccomp.FSUnlink, seccomp.FSRmdir, seccomp.FSUnlinkat:
		return unix.EINVAL
	case seccomp.FSRename, seccomp.FSRenameat, seccomp.FSRenameat2:
		return unix.EBUSY
	}
	return unix.EEXIST
}

// exists: nd's last component names something (a dangling symlink
// included).
func exists(nd *node) bool {
	var st unix.Stat_t
	return nd.dir >= 0 && unix.Fstatat(nd.dir, nd.name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
}

func isDots(name string) bool { return name == "." || name == ".." }

// fsCreate makes mkdir, mknod and symlink.
func (c *Checker) fsCreate(f *fsCall) (int64, unix.Errno) {
	nd, e := c.resolveParent(f, f.dirfd[0], f.path[0], 0)
	if e != 0 {
		return 0, e
	}
	defer nd.close()
	if isDots(nd.name) {
		return 0, dots(f)
	}
	if exists(nd) {
		return 0, unix.EEXIST // as the kernel says first, even on a read-only mount (mkdir -p)
	}
	if e := c.decideFS(f, nd, nd.path(), touchCreate); e != 0 {
		return 0, e
	}
	var err error
	switch f.op {
	case seccomp.FSMkdir, seccomp.FSMkdirat:
		err = unix.Mkdirat(nd.dir, nd.name, f.cl.w.createMode(f.mode))
	case seccomp.FSMknod, seccomp.FSMknodat:
		if nd.trailing {
			return 0, unix.ENOENT
		}
		err = unix.Mknodat(nd.dir, nd.name, f.cl.w.createMode(f.mode), int(f.dev))
	default:
		if nd.trailing {
			return 0, unix.ENOENT
		}
		err = unix.Symlinkat(f.target, nd.dir, nd.name)
	}
	if err != nil {
		return 0, errnoOr(err, unix.EACCES)
	}
	return 0, 0
}

// fsRemove makes unlink and rmdir.
func (c *Checker) fsRemove(f *fsCall) (int64, unix.Errno) {
	if f.aflag&^unix.AT_REMOVEDIR != 0 {
		return 0, unix.EINVAL
	}
	nd, e := c.resolveParent(f, f.dirfd[0], f.path[0], 0)
	if e != 0 {
		return 0, e
	}
	defer nd.close()
	if isDots(nd.name) {
		if nd.name == ".." && f.aflag&unix.AT_REMOVEDIR != 0 {
			return 0, unix.ENOTEMPTY
		}
		return 0, dots(f)
	}
	if e := c.decideFS(f, nd, nd.path(), touchRemove); e != 0 {
		return 0, e
	}
	if nd.trailing && f.aflag&unix.AT_REMOVEDIR == 0 {
		// unlink("x/"): the kernel refuses a trailing slash here.
		var st unix.Stat_t
		if unix.Fstatat(nd.dir, nd.name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return 0, unix.EISDIR
		}
		return 0, unix.ENOTDIR
	}
	if err := unix.Unlinkat(nd.dir, nd.name, f.aflag); err != nil {
		return 0, errnoOr(err, unix.EACCES)
	}
	return 0, 0
}

// fsTwo makes rename and link.
func (c *Checker) fsTwo(f *fsCall) (int64, unix.Errno) {
	link := f.op == seccomp.FSLink || f.op == seccomp.FSLinkat
	if link && f.aflag&^(unix.AT_SYMLINK_FOLLOW|unix.AT_EMPTY_PATH) != 0 {
		return 0, unix.EINVAL
	}
	var src *node
	if link && f.aflag&unix.AT_EMPTY_PATH != 0 && f.path[0] == "" {
		// linkat(fd, "", ..., AT_EMPTY_PATH): the file is the descriptor.
		if f.dirfd[0] < 0 {
			return 0, unix.ENOENT
		}
		where, e := fdPath(f.dirfd[0])
		if e != 0 {
			return 0, e
		}
		src = &node{dir: -1, dirPath: where}
	} else {
		var e unix.Errno
		if src, e = c.resolveParent(f, f.dirfd[0], f.path[0], 0); e != 0 {
			return 0, e
		}
	}
	defer src.close()
	dst, e := c.resolveParent(f, f.dirfd[1], f.path[1], 0)
	if e != 0 {
		return 0, e
	}
	defer dst.close()
	if (src.dir >= 0 && isDots(src.name)) || isDots(dst.name) {
		return 0, dots(f)
	}
	if link {
		if src.dir >= 0 && f.aflag&unix.AT_SYMLINK_FOLLOW != 0 {
			// The file a symlink leads to is what would be linked: decide
			// on it, and link it from its own folder.
			if e := c.follow(f, src, 0); e != 0 {
				return 0, e
			}
		}
		if e := c.decideFS(f, nil, src.path(), touchSource); e != 0 {
			return 0, e
		}
		if exists(dst) {
			return 0, unix.EEXIST
		}
		if e := c.decideFS(f, dst, dst.path(), touchCreate); e != 0 {
			return 0, e
		}
		var err error
		if src.dir < 0 {
			err = unix.Linkat(f.dirfd[0], "", dst.dir, dst.name, unix.AT_EMPTY_PATH)
		} else {
			err = unix.Linkat(src.dir, src.name, dst.dir, dst.name, 0)
		}
		if err != nil {
			return 0, errnoOr(err, unix.EACCES)
		}
		return 0, 0
	}
	if f.aflag&^(unix.RENAME_NOREPLACE|unix.RENAME_EXCHANGE|unix.RENAME_WHITEOUT) != 0 {
		return 0, unix.EINVAL
	}
	if e := c.decideFS(f, src, src.path(), touchRemove); e != 0 {
		return 0, e
	}
	if e := c.decideFS(f, dst, dst.path(), touchRemove); e != 0 {
		return 0, e
	}
	sname, dname := src.name, dst.name
	if src.trailing {
		sname += "/"
	}
	if dst.trailing {
		dname += "/"
	}
	if err := unix.Renameat2(src.dir, sname, dst.dir, dname, uint(f.aflag)); err != nil {
		return 0, errnoOr(err, unix.EACCES)
	}
	return 0, 0
}

// maxHops bounds the symlinks followed (the kernel's MAXSYMLINKS).
const maxHops = 40

// follow resolves nd's last component while it is a symlink, in place:
// the link is read and its target's folder resolved from nd's folder (an
// absolute one in the caller's root), as the kernel would. extra are the
// caller's openat2 resolve flags. A descriptor's magic link in /proc is
// left to procFD.
func (c *Checker) follow(f *fsCall, nd *node, extra uint64) unix.Errno {
	for range maxHops {
		var st unix.Stat_t
		if err := unix.Fstatat(nd.dir, nd.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFLNK {
			return 0
		}
		if procFDDir(nd.dirPath) {
			return 0
		}
		if extra&unix.RESOLVE_NO_SYMLINKS != 0 {
			return unix.ELOOP
		}
		buf := make([]byte, maxPath)
		k, err := unix.Readlinkat(nd.dir, nd.name, buf)
		if err != nil {
			return errnoOr(err, unix.EACCES)
		}
		target := string(buf[:k])
		base := nd.dir
		if target != "" && target[0] == '/' {
			base = -1
			if extra&unix.RESOLVE_IN_ROOT != 0 {
				base = f.dirfd[0]
			}
		}
		next, e := c.resolveParent(f, base, target, extra)
		if e != 0 {
			return e
		}
		nd.close()
		*nd = *next
	}
	return unix.ELOOP
}

// fsTruncate makes truncate: the file is opened for writing as the
// caller would reach it (following symlinks), decided on, and truncated
// through that descriptor.
func (c *Checker) fsTruncate(f *fsCall) (int64, unix.Errno) {
	fd, e := c.openChecked(f, unix.O_WRONLY, 0, 0)
	if e != 0 {
		return 0, e
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, f.length); err != nil {
		return 0, errnoOr(err, unix.EACCES)
	}
	return 0, 0
}

// fsOpen makes open, creat, openat and openat2, and gives the new
// descriptor to the caller.
func (c *Checker) fsOpen(f *fsCall) (int64, unix.Errno) {
	flags := f.flags & validOpenFlags
	if flags&unix.O_PATH != 0 && f.op != seccomp.FSOpenat2 {
		// open ignores every other flag with O_PATH (openat2 refuses
		// them, readHow): nothing is written.
		flags &= unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	}
	mode := f.cl.w.createMode(f.mode & 0o7777)
	if flags&(unix.O_CREAT|unix.O_TMPFILE) == 0 {
		mode = 0
	}
	fd, e := c.openChecked(f, flags, mode, f.resolve)
	if e != 0 {
		return 0, e
	}
	defer unix.Close(fd)
	nfd, err := seccomp.AnswerWithFD(c.listener, f.cl.n.ID, fd, flags&unix.O_CLOEXEC != 0)
	if err == seccomp.ErrGone {
		return 0, gone
	}
	if err != nil {
		return 0, errnoOr(err, unix.EMFILE)
	}
	_ = nfd
	return 0, answered
}

// openChecked opens f's path with flags as the caller would, deciding
// on the file it reaches; a symlink at the last component is followed
// (unless O_NOFOLLOW, or O_CREAT|O_EXCL) by reading it, never by the
// kernel: the final open refuses a symlink, and one swapped in after the
// look is looked at again.
func (c *Checker) openChecked(f *fsCall, flags uint64, mode uint32, resolve uint64) (int, unix.Errno) {
	nd, e := c.resolveParent(f, f.dirfd[0], f.path[0], resolve&^resolveCached)
	if e != 0 {
		return -1, e
	}
	defer func() { nd.close() }()
	nofollow := flags&unix.O_NOFOLLOW != 0 || flags&(unix.O_CREAT|unix.O_EXCL) == unix.O_CREAT|unix.O_EXCL
	for range maxHops {
		if isDots(nd.name) {
			if flags&unix.O_TMPFILE == unix.O_TMPFILE {
				// An unnamed file in the folder the path names ("." or
				// ".."): that folder is decided on.
				d, err := unix.Openat2(nd.dir, nd.name, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_MAGICLINKS})
				if err != nil {
					return -1, errnoOr(err, unix.EACCES)
				}
				where, e := fdPath(d)
				if e != 0 {
					unix.Close(d)
					return -1, e
				}
				nd.close()
				nd.dir, nd.dirPath, nd.name = d, where, ""
				if e := c.decideFS(f, nil, where, touchWrite); e != 0 { // a file in it, as for any open beneath
					return -1, e
				}
				fd, err := unix.Openat2(d, ".", &unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Mode: uint64(mode)})
				if err != nil {
					return -1, errnoOr(err, unix.EACCES)
				}
				return fd, 0
			}
			if flags&(unix.O_WRONLY|unix.O_RDWR|unix.O_CREAT) != 0 {
				return -1, dots(f)
			}
			nd.name = "."
		}
		if !nofollow {
			if e := c.follow(f, nd, resolve); e != 0 {
				return -1, e
			}
			if fd, ok, e := c.procFD(f, nd, flags); ok {
				return fd, e
			}
		}
		var st unix.Stat_t
		exists := unix.Fstatat(nd.dir, nd.name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
		if exists && flags&(unix.O_CREAT|unix.O_EXCL) == unix.O_CREAT|unix.O_EXCL {
			return -1, unix.EEXIST
		}
		how := touchWrite
		switch {
		case flags&unix.O_TMPFILE == unix.O_TMPFILE:
			how = touchWrite // the folder itself may be a --writable path
		case !exists && flags&unix.O_CREAT != 0:
			how = touchCreate
		case flags&(unix.O_WRONLY|unix.O_RDWR|unix.O_TRUNC) == 0:
			how = -1 // a read (openat2, or O_CREAT of a file that exists)
		}
		if how >= 0 {
			if e := c.decideFS(f, nd, nd.path(), how); e != 0 {
				return -1, e
			}
		}
		name := nd.name
		if nd.trailing {
			name += "/"
		}
		if exists && st.Mode&unix.S_IFMT == unix.S_IFCHR && nd.path() == "/dev/tty" {
			return c.openTTY(f, flags)
		}
		fl := flags | unix.O_CLOEXEC | unix.O_NOCTTY
		if !nofollow {
			fl |= unix.O_NOFOLLOW
		}
		fifo := exists && st.Mode&unix.S_IFMT == unix.S_IFIFO && flags&unix.O_ACCMODE == unix.O_WRONLY && flags&unix.O_NONBLOCK == 0
		if fifo {
			return c.openFIFO(f, nd.dir, name, fl, mode)
		}
		fd, err := unix.Openat2(nd.dir, name, &unix.OpenHow{Flags: fl, Mode: uint64(mode), Resolve: unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_BENEATH})
		if err == unix.ELOOP && !nofollow {
			continue // a symlink swapped in after the look: look again
		}
		if err != nil {
			return -1, errnoOr(err, unix.EACCES)
		}
		return fd, 0
	}
	return -1, unix.ELOOP
}

// openFIFO opens a FIFO for writing, which waits for a reader: without
// blocking, again every few milliseconds while the caller still waits,
// so that a caller interrupted or killed frees the worker.
func (c *Checker) openFIFO(f *fsCall, dir int, name string, fl uint64, mode uint32) (int, unix.Errno) {
	for {
		fd, err := unix.Openat2(dir, name, &unix.OpenHow{Flags: fl | unix.O_NONBLOCK, Mode: uint64(mode), Resolve: unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_BENEATH})
		if err == nil {
			if fl&unix.O_NONBLOCK == 0 {
				if cur, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil {
					unix.FcntlInt(uintptr(fd), unix.F_SETFL, cur&^unix.O_NONBLOCK)
				}
			}
			return fd, 0
		}
		if err != unix.ENXIO {
			return -1, errnoOr(err, unix.EACCES)
		}
		if !c.valid(f.cl.n) {
			return -1, gone
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// procFD opens a descriptor of the caller's through /proc (/dev/stdout,
// /dev/fd/N, /proc/self/fd/N): resolved here, /proc/self is the
// checker's, so the folder /proc/<checker>/fd is taken for the caller's
// own, and the caller's descriptor N is reopened from a duplicate of it,
// decided on by the file it is. ok is false for any other path.
func (c *Checker) procFD(f *fsCall, nd *node, flags uint64) (int, bool, unix.Errno) {
	if !procFDDir(nd.dirPath) {
		return -1, false, 0
	}
	parts := strings.Split(nd.dirPath[len("/proc/"):], "/")
	tgid, err := threadGroupOf(f.cl.tid)
	if err != nil {
		return -1, true, unix.EACCES
	}
	if parts[0] != strconv.Itoa(os.Getpid()) && parts[0] != strconv.Itoa(tgid) {
		return -1, false, 0 // another process's: decided as any path
	}
	num, err := strconv.Atoi(nd.name)
	if err != nil || num < 0 {
		return -1, true, unix.ENOENT
	}
	var dup int
	var e unix.Errno
	if werr := f.cl.w.withOwn(func() {
		if e = c.pidfdOf(f); e == 0 {
			dup, err = seccomp.GetFD(f.pidfd, num)
		}
	}); werr != nil || e != 0 || err != nil {
		if e == gone {
			return -1, true, gone
		}
		return -1, true, unix.ENOENT
	}
	defer unix.Close(dup)
	var st unix.Stat_t
	if err := unix.Fstat(dup, &st); err != nil {
		return -1, true, unix.EACCES
	}
	if t := st.Mode & unix.S_IFMT; t == unix.S_IFREG || t == unix.S_IFDIR {
		where, e := fdPath(dup)
		if e != 0 {
			return -1, true, e
		}
		if flags&(unix.O_WRONLY|unix.O_RDWR|unix.O_TRUNC) != 0 {
			if e := c.decideFS(f, nil, where, touchWrite); e != 0 {
				return -1, true, e
			}
		}
	}
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(dup), int(flags&^unix.O_CREAT&^unix.O_EXCL)|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return -1, true, errnoOr(err, unix.EACCES)
	}
	return fd, true, 0
}

// procFDDir: dir is a process's or a thread's fd folder in /proc.
func procFDDir(dir string) bool {
	rest, ok := strings.CutPrefix(dir, "/proc/")
	if !ok {
		return false
	}
	parts := strings.Split(rest, "/")
	return (len(parts) == 2 && parts[1] == "fd") || (len(parts) == 4 && parts[1] == "task" && parts[3] == "fd")
}

// resolveCached is RESOLVE_CACHED (Linux 5.12), which x/sys lacks: the
// checker resolves without it (it only makes a lookup fail with EAGAIN).
const resolveCached = 0x20

// selfPath names the caller's own /proc folder for /proc/self,
// /proc/thread-self and /dev/fd (a link to /proc/self/fd): resolved
// here, they would be the checker's.
func selfPath(f *fsCall, dir string) string {
	for _, p := range []string{"/proc/self/", "/proc/thread-self/", "/dev/fd/"} {
		rest, ok := strings.CutPrefix(dir, p)
		if !ok {
			continue
		}
		tgid, err := threadGroupOf(f.cl.tid)
		if err != nil {
			return dir
		}
		switch p {
		case "/proc/thread-self/":
			return "/proc/" + strconv.Itoa(tgid) + "/task/" + strconv.Itoa(f.cl.tid) + "/" + rest
		case "/dev/fd/":
			return "/proc/" + strconv.Itoa(tgid) + "/fd/" + rest
		}
		return "/proc/" + strconv.Itoa(tgid) + "/" + rest
	}
	return dir
}

// openTTY opens the caller's controlling terminal for /dev/tty, which,
// opened here, would be the checker's: the same device when the two
// share it, else the caller's pseudo-terminal by its number; a caller
// without one gets ENXIO, as from the kernel.
func (c *Checker) openTTY(f *fsCall, flags uint64) (int, unix.Errno) {
	theirs, err := ttyOf(strconv.Itoa(f.cl.tid))
	if err != nil {
		return -1, unix.EACCES
	}
	if theirs == 0 {
		return -1, unix.ENXIO
	}
	path := "/dev/tty"
	if ours, err := ttyOf("thread-self"); err != nil || ours != theirs {
		major, minor := unix.Major(theirs), unix.Minor(theirs)
		if major < 136 || major > 143 { // the Unix98 pty slaves
			return -1, unix.ENXIO
		}
		path = "/dev/pts/" + strconv.Itoa(int((major-136)*256+minor))
	}
	fd, err := unix.Open(path, int(flags&^(unix.O_CREAT|unix.O_EXCL|unix.O_TRUNC))|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return -1, errnoOr(err, unix.EACCES)
	}
	return fd, 0
}

// ttyOf reads the controlling terminal (tty_nr) of /proc/WHO/stat.
func ttyOf(who string) (uint64, error) {
	b, err := os.ReadFile("/proc/" + who + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, os.ErrInvalid
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 5 {
		return 0, os.ErrInvalid
	}
	v, err := strconv.ParseInt(fields[4], 10, 64) // state ppid pgrp session tty_nr
	return uint64(uint32(v)), err
}
