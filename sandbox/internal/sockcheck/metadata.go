package sockcheck

import (
	"bytes"
	"encoding/binary"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/internal/seccomp"
)

// Metadata calls (Policy.Metadata; seccomp RunnerRules.NotifyMetadata):
// chmod, chown, the xattr calls and the time calls change a file without
// any Landlock right, so in subreaper mode, which has no mount namespace
// to make the rest of the filesystem read-only, the checker holds them to
// the filesystem rules (DESIGN.md, "What Landlock does not cover").
//
// As for sockets, a checked call is never let run (no CONTINUE): the
// object is resolved once — a path in the caller's view (openInView:
// beneath /proc/TID/root, from /proc/TID/cwd or from the caller's dirfd
// taken with pidfd_getfd, no magic links, O_PATH), a descriptor by
// pidfd_getfd — the decision is made on the inode reached (where the
// kernel names it: beneath a --writable path and not beneath --hide), and
// the change is made by the checker on that same open file, as the caller
// (creds.go): its fsuid, groups and no capability it lacks. A descriptor
// the caller opened read-only outside the writable set is refused like
// its path: the decision is the file's place, never the open mode.
//
// Refusals: EROFS outside the writable set (what a read-only mount says,
// as in the namespace modes), EACCES beneath --hide (what Landlock says
// there).

// metaCall is one decoded metadata call.
type metaCall struct {
	kind     seccomp.MetaCall
	fd       int // the caller's descriptor (an f-call), or its dirfd (AT_FDCWD: none)
	onFD     bool
	path     string
	noFollow bool
	empty    bool // AT_EMPTY_PATH with an empty path: the dirfd itself
}

const (
	pathMax      = 4096
	xattrNameMax = 255
	xattrSizeMax = 65536
)

// metadata checks one metadata call and makes it.
func (c *Checker) metadata(w *workerState, n *seccomp.Notif, kind seccomp.MetaCall) (int64, unix.Errno) {
	if !c.pol.Metadata {
		return 0, unix.ENOSYS
	}
	cl := &call{n: n, tid: int(n.Pid), w: w}
	a := n.Data.Args
	m := metaCall{kind: kind, fd: unix.AT_FDCWD}
	var pathPtr uint64
	var flags uint64 // *at flags
	var flagsOK uint64
	switch kind {
	case seccomp.MetaChmod, seccomp.MetaChown, seccomp.MetaSetxattr, seccomp.MetaRemovexattr, seccomp.MetaUtime, seccomp.MetaUtimes:
		pathPtr = a[0]
	case seccomp.MetaLchown, seccomp.MetaLsetxattr, seccomp.MetaLremovexattr:
		pathPtr, m.noFollow = a[0], true
	case seccomp.MetaFchmod, seccomp.MetaFchown, seccomp.MetaFsetxattr, seccomp.MetaFremovexattr:
		m.fd, m.onFD = int(int32(a[0])), true
	case seccomp.MetaFchmodat, seccomp.MetaFutimesat:
		m.fd, pathPtr = int(int32(a[0])), a[1]
	case seccomp.MetaFchmodat2:
		m.fd, pathPtr, flags = int(int32(a[0])), a[1], a[3]
		flagsOK = unix.AT_SYMLINK_NOFOLLOW | unix.AT_EMPTY_PATH
	case seccomp.MetaFchownat:
		m.fd, pathPtr, flags = int(int32(a[0])), a[1], a[4]
		flagsOK = unix.AT_SYMLINK_NOFOLLOW | unix.AT_EMPTY_PATH
	case seccomp.MetaSetxattrat, seccomp.MetaRemovexattrat:
		m.fd, pathPtr, flags = int(int32(a[0])), a[1], a[2]
		flagsOK = unix.AT_SYMLINK_NOFOLLOW | unix.AT_EMPTY_PATH
	case seccomp.MetaUtimensat:
		m.fd, pathPtr, flags = int(int32(a[0])), a[1], a[3]
		flagsOK = unix.AT_SYMLINK_NOFOLLOW | unix.AT_EMPTY_PATH
		if pathPtr == 0 {
			// utimensat(fd, NULL, ...): futimens, on the descriptor.
			if flags&unix.AT_SYMLINK_NOFOLLOW != 0 {
				return 0, unix.EINVAL
			}
			m.onFD = true
		}
	default:
		return 0, unix.ENOSYS
	}
	if uint32(flags)&^uint32(flagsOK) != 0 {
		return 0, unix.EINVAL
	}
	if flags&unix.AT_SYMLINK_NOFOLLOW != 0 {
		m.noFollow = true
	}

	fail := func(e unix.Errno) (int64, unix.Errno) {
		if e == gone || !c.valid(n) {
			return 0, gone
		}
		return 0, e
	}

	// Everything the call needs from the caller is taken now, once, with
	// the checker's own credentials: the caller's credentials, the path
	// and the other arguments in its memory, and the descriptors it names
	// (its fd or dirfd, its root or cwd). One look afterwards that the
	// notification is still pending says all of it was the caller's.
	cr, err := c.callerCreds(w, cl.n)
	if err != nil {
		return fail(unix.EACCES)
	}
	if !m.onFD {
		p, e := c.readString(cl, pathPtr, pathMax)
		if e != 0 {
			return fail(e)
		}
		m.path = p
		if p == "" {
			if flags&unix.AT_EMPTY_PATH == 0 {
				return fail(unix.ENOENT)
			}
			if m.fd == unix.AT_FDCWD {
				m.path = "." // the cwd itself
			} else {
				m.empty = true // the dirfd itself
			}
		}
	}
	if c.pol.ReportFS && !m.onFD && !m.empty && c.plainPath(m.path) {
		return 0, proceed // report.go: nothing to name
	}
	op, err := c.metaOp(cl, &m)
	if err != nil {
		e, _ := errnoOf(err)
		if e == 0 {
			e = unix.EINVAL
		}
		return fail(e)
	}
	// A pidfd only for a call that names a descriptor: a path needs none.
	pidfd := -1
	defer func() {
		if pidfd >= 0 {
			unix.Close(pidfd)
		}
	}()
	getFD := func(fd int) (int, unix.Errno) {
		if pidfd < 0 {
			p, err := seccomp.OpenPidfd(cl.tid)
			if err != nil {
				return -1, unix.EACCES
			}
			pidfd = p
		}
		nfd, err := seccomp.GetFD(pidfd, fd)
		if err != nil {
			if e, ok := errnoOf(err); ok && e == unix.EBADF {
				return -1, unix.EBADF
			}
			return -1, unix.EACCES
		}
		return nfd, 0
	}
	obj, base := -1, -1
	resolve := uint64(unix.RESOLVE_NO_MAGICLINKS)
	through := func(path string) bool { _, _, ok := procFDThrough(path); return ok }
	var e unix.Errno
	switch {
	case m.onFD || m.empty:
		obj, e = getFD(m.fd)
	case procFD(m.path) >= 0:
		// /proc/self/fd/N, /dev/fd/N: the caller's descriptor N, not
		// the checker's.
		obj, e = getFD(procFD(m.path))
	case through(m.path):
		// /proc/self/fd/N/NAME: NAME from the caller's descriptor N
		// (fdpath.go), not the checker's; a relative path, so not for
		// a caller with a root of its own (below).
		if root, err := os.Readlink("/proc/" + strconv.Itoa(cl.tid) + "/root"); err != nil || root != "/" {
			return fail(unix.EACCES)
		}
		n, rest, _ := procFDThrough(m.path)
		m.path = rest
		base, e = getFD(n)
	case strings.HasPrefix(m.path, "/"):
		resolve |= unix.RESOLVE_IN_ROOT
		base, e = openProc(cl.tid, "root")
	default:
		// Relative: not for a caller with a root of its own (chroot),
		// where a path could climb out of it from here.
		if root, err := os.Readlink("/proc/" + strconv.Itoa(cl.tid) + "/root"); err != nil || root != "/" {
			return fail(unix.EACCES)
		}
		if m.fd == unix.AT_FDCWD {
			base, e = openProc(cl.tid, "cwd")
		} else {
			base, e = getFD(m.fd)
		}
	}
	if obj >= 0 {
		defer unix.Close(obj)
	}
	if base >= 0 {
		defer unix.Close(base)
	}
	if !c.valid(n) {
		return 0, gone
	}
	if e != 0 {
		return 0, e
	}

	// From here on, as the caller: the path is resolved with its search
	// permissions, and the change made with its privileges.
	if err := w.asCaller(cr); err != nil {
		return 0, unix.EACCES
	}
	if obj < 0 {
		oflags := uint64(unix.O_PATH | unix.O_CLOEXEC)
		if m.noFollow {
			oflags |= unix.O_NOFOLLOW
		}
		fd, err := unix.Openat2(base, m.path, &unix.OpenHow{Flags: oflags, Resolve: resolve})
		if err != nil {
			return 0, errno(err)
		}
		defer unix.Close(fd)
		obj = fd
	}
	var st unix.Stat_t
	if err := unix.Fstat(obj, &st); err != nil {
		return 0, unix.EBADF
	}
	if e := c.mayChange(cl, &m, obj, &st); e != 0 || c.pol.ReportFS {
		return 0, e // ReportFS: decide reads it as "let it run"
	}
	return 0, op(obj, st.Mode&unix.S_IFMT == unix.S_IFLNK)
}

// mayChange decides on the file obj reached: beneath a --writable path and
// not beneath --hide. A file of no filesystem anyone reaches by a path (a
// pipe, a socket, an anonymous inode) or with no name left (a memfd, an
// O_TMPFILE, a deleted file) may change: no one else sees it.
func (c *Checker) mayChange(cl *call, m *metaCall, obj int, st *unix.Stat_t) unix.Errno {
	where, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(obj))
	if err != nil {
		return unix.EACCES
	}
	if !strings.HasPrefix(where, "/") || st.Nlink == 0 {
		return 0
	}
	// Named as the write-intent calls are (reportWrite): one line per
	// path, whichever call changed it.
	refuse := func(e unix.Errno, reason string) unix.Errno {
		if c.pol.Report != nil {
			c.pol.Report(Refusal{Tid: cl.tid, Call: m.kind.String(), Kind: "fs", Path: where, Reason: reason})
		}
		return e
	}
	if c.pol.hidden(where) {
		return refuse(unix.EACCES, "beneath a --hide path")
	}
	if c.pol.writableAt(where) {
		// Beneath a writable path, a protected one keeps its metadata
		// too: a chmod +x is how a planted hook would be made to run.
		if e, ok := c.pol.Writes.Protects(where); ok {
			return refuse(unix.EROFS, "a protected path ("+e+")")
		}
		return 0
	}
	// Metadata (mode, owner, xattrs, times) cannot change there.
	return refuse(unix.EROFS, "not beneath a --writable path")
}

// metaOp copies the rest of the call's arguments from the caller and
// returns the change to make on the object once checked: obj is an O_PATH
// descriptor of what a path reached, or the duplicate of the caller's own
// descriptor (an f-call, made on it as the kernel would: EBADF for an
// O_PATH one). symlink: obj is a symbolic link (a no-follow call on one).
func (c *Checker) metaOp(cl *call, m *metaCall) (func(obj int, symlink bool) unix.Errno, error) {
	a := cl.n.Data.Args
	proc := func(obj int) string { return "/proc/self/fd/" + strconv.Itoa(obj) }
	switch m.kind {
	case seccomp.MetaChmod, seccomp.MetaFchmod, seccomp.MetaFchmodat, seccomp.MetaFchmodat2:
		mode := uint32(a[1])
		if m.kind == seccomp.MetaFchmodat || m.kind == seccomp.MetaFchmodat2 {
			mode = uint32(a[2])
		}
		mode &= 0o7777
		return func(obj int, symlink bool) unix.Errno {
			if m.onFD {
				return errno(unix.Fchmod(obj, mode))
			}
			if symlink {
				return unix.EOPNOTSUPP // as fchmodat2 on a link
			}
			return errno(unix.Fchmodat(unix.AT_FDCWD, proc(obj), mode, 0))
		}, nil
	case seccomp.MetaChown, seccomp.MetaFchown, seccomp.MetaLchown, seccomp.MetaFchownat:
		uid, gid := int(int32(a[1])), int(int32(a[2]))
		if m.kind == seccomp.MetaFchownat {
			uid, gid = int(int32(a[2])), int(int32(a[3]))
		}
		return func(obj int, symlink bool) unix.Errno {
			if m.onFD {
				return errno(unix.Fchown(obj, uid, gid))
			}
			// On the O_PATH descriptor itself: a link (no-follow) is
			// changed as lchown changes it.
			return errno(unix.Fchownat(obj, "", uid, gid, unix.AT_EMPTY_PATH))
		}, nil
	case seccomp.MetaSetxattr, seccomp.MetaLsetxattr, seccomp.MetaFsetxattr, seccomp.MetaSetxattrat:
		nameAt, valueAt, size, xflags := a[1], a[2], a[3], int(int32(a[4]))
		if m.kind == seccomp.MetaSetxattrat {
			// struct xattr_args { __aligned_u64 value; __u32 size; __u32 flags; }
			usize := a[5]
			if usize < 16 {
				return nil, unix.EINVAL
			}
			if usize > 4096 {
				return nil, unix.E2BIG
			}
			b := make([]byte, usize)
			if e := c.read(cl, a[4], b); e != 0 {
				return nil, e
			}
			if bytes.IndexFunc(b[16:], func(r rune) bool { return r != 0 }) >= 0 {
				return nil, unix.E2BIG
			}
			nameAt = a[3]
			valueAt = binary.NativeEndian.Uint64(b[0:])
			size = uint64(binary.NativeEndian.Uint32(b[8:]))
			xflags = int(binary.NativeEndian.Uint32(b[12:]))
		}
		name, e := c.readXattrName(cl, nameAt)
		if e != 0 {
			return nil, e
		}
		if xflags&^(unix.XATTR_CREATE|unix.XATTR_REPLACE) != 0 {
			return nil, unix.EINVAL
		}
		if size > xattrSizeMax {
			return nil, unix.E2BIG
		}
		value := make([]byte, size)
		if size > 0 {
			if e := c.read(cl, valueAt, value); e != 0 {
				return nil, e
			}
		}
		return func(obj int, symlink bool) unix.Errno {
			if m.onFD {
				return errno(unix.Fsetxattr(obj, name, value, xflags))
			}
			if symlink {
				return unix.EPERM // as the kernel for user.* on a link; the rest needs a capability
			}
			return errno(unix.Setxattr(proc(obj), name, value, xflags))
		}, nil
	case seccomp.MetaRemovexattr, seccomp.MetaLremovexattr, seccomp.MetaFremovexattr, seccomp.MetaRemovexattrat:
		nameAt := a[1]
		if m.kind == seccomp.MetaRemovexattrat {
			nameAt = a[3]
		}
		name, e := c.readXattrName(cl, nameAt)
		if e != 0 {
			return nil, e
		}
		return func(obj int, symlink bool) unix.Errno {
			if m.onFD {
				return errno(unix.Fremovexattr(obj, name))
			}
			if symlink {
				return unix.EPERM
			}
			return errno(unix.Removexattr(proc(obj), name))
		}, nil
	case seccomp.MetaUtime, seccomp.MetaUtimes, seccomp.MetaFutimesat, seccomp.MetaUtimensat:
		timesAt := a[1]
		if m.kind == seccomp.MetaFutimesat || m.kind == seccomp.MetaUtimensat {
			timesAt = a[2]
		}
		var ts []unix.Timespec // nil: now
		if timesAt != 0 {
			var b [32]byte
			switch m.kind {
			case seccomp.MetaUtime: // struct utimbuf { time_t actime, modtime; }
				if e := c.read(cl, timesAt, b[:16]); e != 0 {
					return nil, e
				}
				ts = []unix.Timespec{{Sec: int64(binary.NativeEndian.Uint64(b[0:]))}, {Sec: int64(binary.NativeEndian.Uint64(b[8:]))}}
			case seccomp.MetaUtimes, seccomp.MetaFutimesat: // struct timeval[2]
				if e := c.read(cl, timesAt, b[:]); e != 0 {
					return nil, e
				}
				for i := range 2 {
					sec, usec := int64(binary.NativeEndian.Uint64(b[16*i:])), int64(binary.NativeEndian.Uint64(b[16*i+8:]))
					if usec < 0 || usec >= 1000000 {
						return nil, unix.EINVAL
					}
					ts = append(ts, unix.Timespec{Sec: sec, Nsec: usec * 1000})
				}
			default: // struct timespec[2], checked by the kernel
				if e := c.read(cl, timesAt, b[:]); e != 0 {
					return nil, e
				}
				for i := range 2 {
					ts = append(ts, unix.Timespec{Sec: int64(binary.NativeEndian.Uint64(b[16*i:])), Nsec: int64(binary.NativeEndian.Uint64(b[16*i+8:]))})
				}
			}
		}
		return func(obj int, symlink bool) unix.Errno {
			var p unsafe.Pointer
			if ts != nil {
				p = unsafe.Pointer(&ts[0])
			}
			if m.onFD {
				// futimens: the descriptor itself (EBADF for O_PATH, as
				// the kernel's).
				_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(obj), 0, uintptr(p), 0, 0, 0)
				return e
			}
			empty := [1]byte{}
			fl := unix.AT_EMPTY_PATH
			if symlink {
				fl |= unix.AT_SYMLINK_NOFOLLOW
			}
			_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(obj), uintptr(unsafe.Pointer(&empty[0])), uintptr(p), uintptr(fl), 0, 0)
			return e
		}, nil
	}
	return nil, unix.ENOSYS
}

func errno(err error) unix.Errno {
	if err == nil {
		return 0
	}
	if e, ok := errnoOf(err); ok {
		return e
	}
	return unix.EACCES
}

// read copies len(b) bytes at addr of the caller.
func (c *Checker) read(cl *call, addr uint64, b []byte) unix.Errno {
	if k, err := seccomp.ReadMemory(cl.tid, addr, b); err != nil || k != len(b) {
		if !c.valid(cl.n) {
			return gone
		}
		return unix.EFAULT
	}
	return 0
}

// readString copies a NUL-terminated string of at most max bytes at addr
// of the caller, a page at a time (a string may end just before an
// unmapped page): ENAMETOOLONG past max, as the kernel's getname.
func (c *Checker) readString(cl *call, addr uint64, max int) (string, unix.Errno) {
	if addr == 0 {
		return "", unix.EFAULT
	}
	var out []byte
	var page [4096]byte // on the stack: a path per write-intent call, no garbage
	for len(out) < max {
		chunk := 4096 - int(addr%4096)
		if chunk > max-len(out) {
			chunk = max - len(out)
		}
		b := page[:chunk]
		if e := c.read(cl, addr, b); e != 0 {
			return "", e
		}
		if i := bytes.IndexByte(b, 0); i >= 0 {
			if out == nil {
				return string(b[:i]), 0
			}
			return string(append(out, b[:i]...)), 0
		}
		out = append(out, b...)
		addr += uint64(chunk)
	}
	return "", unix.ENAMETOOLONG
}

func (c *Checker) readXattrName(cl *call, addr uint64) (string, unix.Errno) {
	name, e := c.readString(cl, addr, xattrNameMax+1)
	if e == unix.ENAMETOOLONG {
		return "", unix.ERANGE
	}
	if e != 0 {
		return "", e
	}
	if name == "" {
		return "", unix.ERANGE
	}
	return name, 0
}

// procFD tells a path naming one of the caller's own descriptors through
// /proc/self/fd/N, /proc/thread-self/fd/N, /dev/fd/N or /dev/stdin,
// stdout, stderr (the checker's /proc/self is not the caller's): N, or
// -1.
func procFD(path string) int {
	switch path {
	case "/dev/stdin":
		return 0
	case "/dev/stdout":
		return 1
	case "/dev/stderr":
		return 2
	}
	for _, p := range []string{"/proc/self/fd/", "/proc/thread-self/fd/", "/dev/fd/"} {
		if rest, ok := strings.CutPrefix(path, p); ok {
			if n, err := strconv.Atoi(rest); err == nil && n >= 0 {
				return n
			}
		}
	}
	return -1
}

// openProc opens /proc/TID/WHAT (root or cwd) O_PATH.
func openProc(tid int, what string) (int, unix.Errno) {
	fd, err := unix.Open("/proc/"+strconv.Itoa(tid)+"/"+what, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, unix.EACCES
	}
	return fd, 0
}
