package sockcheck

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/internal/seccomp"
)

// sunPathMax is the size of sockaddr_un's sun_path.
const sunPathMax = 108

// unixCall checks a call with a Unix address: a path, an abstract name,
// or the autobind (nothing but the family).
func (c *Checker) unixCall(w *workerState, cl *call) (int64, unix.Errno) {
	a := cl.addr
	if len(a) < 2 {
		return 0, unix.EINVAL
	}
	if family(a) == unix.AF_UNSPEC && cl.kind == seccomp.CallConnect {
		return c.perform(cl, a[:2]) // a datagram socket's disconnect
	}
	if family(a) != unix.AF_UNIX || len(a) > 2+sunPathMax {
		return 0, unix.EINVAL
	}
	if len(a) == 2 {
		// bind: the autobind, to a fresh abstract name; connect and
		// sendto: EINVAL from the kernel.
		val, e := c.perform(cl, a)
		if e == 0 && cl.kind == seccomp.CallBind {
			c.recordUnixName(w, cl.fd)
		}
		return val, e
	}
	if a[2] == 0 {
		name := string(a[3:])
		if cl.kind == seccomp.CallBind {
			if c.full() {
				c.report(Refusal{Tid: cl.tid, Call: "bind", Kind: "abstract", Path: name, Reason: "too many sockets bound"})
				return 0, unix.EACCES
			}
			val, e := c.perform(cl, a)
			if e == 0 {
				c.recordAbstract(name)
			}
			return val, e
		}
		if c.pol.IsolateIPC {
			c.mu.Lock()
			_, ok := c.boundAbstract[name]
			c.mu.Unlock()
			if !ok {
				c.report(Refusal{Tid: cl.tid, Call: cl.kind.String(), Kind: "abstract", Path: name,
					Reason: "an abstract socket the command's tree did not bind"})
				return 0, unix.EACCES
			}
		}
		return c.perform(cl, a)
	}
	path := a[2:]
	if i := bytes.IndexByte(path, 0); i >= 0 {
		path = path[:i]
	}
	if cl.kind == seccomp.CallBind {
		return c.bindPath(w, cl, string(path))
	}
	return c.connectPath(w, cl, string(path))
}

func (c *Checker) full() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.boundUnix)+len(c.boundAbstract)+len(c.pending) >= maxBound ||
		len(c.pending) >= maxPending || c.abstractBytes >= maxAbstractBytes
}

// recordAbstract remembers an abstract name the tree bound. Past the caps
// (full) the name is not kept: the bind was refused before it ran, or,
// for an autobind by listen, the tree cannot reach its own name — a
// refusal, never memory without bound.
func (c *Checker) recordAbstract(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.boundAbstract[name]; ok || len(c.boundAbstract) >= maxBound || c.abstractBytes+len(name) > maxAbstractBytes {
		return
	}
	c.boundAbstract[name] = struct{}{}
	c.abstractBytes += len(name)
}

// connectPath resolves path once in the caller's view, checks the inode it
// reached, and connects (or sends) through /proc/self/fd/N to that inode.
func (c *Checker) connectPath(w *workerState, cl *call, path string) (int64, unix.Errno) {
	fd, e := c.openInView(cl, path, 0)
	if e != 0 {
		return 0, e
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, unix.EACCES
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return 0, unix.ECONNREFUSED // as the kernel says
	}
	refuse := func(reason string) (int64, unix.Errno) {
		c.report(Refusal{Tid: cl.tid, Call: cl.kind.String(), Kind: "unix", Path: path, Reason: reason})
		return 0, unix.EACCES
	}
	if where, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); err != nil || c.pol.hidden(where) {
		return refuse("a socket beneath a --hide path")
	}
	if c.pol.Net {
		id := devIno{st.Dev, st.Ino}
		_, allowed := c.pol.allowUnix[id]
		if !allowed {
			c.mu.Lock()
			_, allowed = c.boundUnix[unixKey(st.Dev, st.Ino)]
			pending := len(c.pending) > 0
			c.mu.Unlock()
			if !allowed && pending {
				c.resolvePending(w)
				c.mu.Lock()
				_, allowed = c.boundUnix[unixKey(st.Dev, st.Ino)]
				c.mu.Unlock()
			}
		}
		if !allowed {
			return refuse("a Unix socket neither bound by the command's tree nor named by --allow-unix")
		}
	}
	return c.perform(cl, sockaddrUnix("/proc/self/fd/"+strconv.Itoa(fd)))
}

// bindPath lets the kernel make a path bind as the caller asked
// (CONTINUE), and learns the inode it made from the socket itself
// (sock_diag) afterwards. Nothing is decided on the path: the bind runs
// with the caller's own credentials, Landlock domain, root and working
// directory, so it creates a socket file only where the caller itself may
// (a bind made here, with corral's rights, would create one where the
// runner's Landlock policy forbids it), and getsockname gives the caller
// the name it asked for. A thread that rewrites the path meanwhile binds
// elsewhere, where it may, and the inode recorded is still the one its
// socket is bound to: the tree may then connect to its own socket only.
//
// The --hide check here is a courtesy (a clear EACCES and a report): the
// authority for a path beneath --hide is the runner's Landlock policy,
// which refuses to make a socket there.
func (c *Checker) bindPath(w *workerState, cl *call, path string) (int64, unix.Errno) {
	dir := "."
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		dir = path[:i+1]
	}
	if len(c.pol.hide) > 0 {
		if dfd, e := c.openInView(cl, dir, unix.O_DIRECTORY); e == gone {
			return 0, gone
		} else if e == 0 {
			where, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(dfd))
			unix.Close(dfd)
			if err != nil || c.pol.hidden(where) {
				c.report(Refusal{Tid: cl.tid, Call: "bind", Kind: "unix", Path: path, Reason: "a socket beneath a --hide path"})
				return 0, unix.EACCES
			}
		}
	}
	if c.full() {
		c.report(Refusal{Tid: cl.tid, Call: "bind", Kind: "unix", Path: path, Reason: "too many sockets bound"})
		return 0, unix.EACCES
	}
	dup, err := unix.FcntlInt(uintptr(cl.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return 0, unix.EACCES
	}
	// Pending before the bind may run: a connect by another thread that
	// looks right after it must find it.
	c.resolvePending(w)
	c.mu.Lock()
	c.pending = append(c.pending, pendingBind{fd: dup, since: time.Now()})
	c.mu.Unlock()
	if err := seccomp.RespondContinue(c.listener, cl.n.ID); err != nil {
		return 0, gone // the entry ends at a later look
	}
	return 0, answered
}

// pendingBind is a socket let bind whose address was not known yet.
type pendingBind struct {
	fd    int
	since time.Time
}

// pendingFor is how long a socket let bind stays pending unbound before
// it is taken for one whose bind failed. The bind runs microseconds
// after the answer; a connect to it before it ran finds no socket file.
const pendingFor = 2 * time.Second

// resolvePending looks at the sockets let bind again: a bound one is
// recorded; one still unbound after pendingFor is dropped (its bind
// failed, or never ran).
func (c *Checker) resolvePending(w *workerState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := c.pending[:0]
	for _, p := range c.pending {
		if dev, ino, err := w.boundInode(p.fd); err == nil {
			c.boundUnix[unixKey(dev, ino)] = struct{}{}
			unix.Close(p.fd)
			continue
		}
		if time.Since(p.since) > pendingFor {
			unix.Close(p.fd)
			continue
		}
		keep = append(keep, p)
	}
	c.pending = keep
}

// unixKey is how a bound socket's inode is remembered and compared:
// sock_diag reports only 32 bits of the inode number.
func unixKey(dev, ino uint64) devIno { return devIno{dev, ino & 0xffffffff} }

// openInView opens path O_PATH as the calling thread would find it: an
// absolute path beneath its root (/proc/TID/root, RESOLVE_IN_ROOT), a
// relative one from its working directory (/proc/TID/cwd). Magic links
// (/proc/self/fd/...) are not followed: they would be the checker's.
func (c *Checker) openInView(cl *call, path string, flags uint64) (int, unix.Errno) {
	if path == "" {
		return -1, unix.ENOENT
	}
	base, resolve := "cwd", uint64(unix.RESOLVE_NO_MAGICLINKS)
	if path[0] == '/' {
		base, resolve = "root", resolve|unix.RESOLVE_IN_ROOT
	}
	// The caller's root and cwd are reached through /proc/TID, which the
	// kernel lets corral's credentials open (a caller that made itself
	// non-dumpable included); the path itself is resolved from them as
	// the caller (cl.w.asCaller), its own search permissions in force.
	var bfd int
	var e unix.Errno
	if err := cl.w.withOwn(func() { bfd, e = c.openBase(cl, base, path) }); err != nil {
		return -1, unix.EACCES
	}
	if e != 0 {
		return -1, e
	}
	defer unix.Close(bfd)
	fd, err := unix.Openat2(bfd, path, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC | flags, Resolve: resolve})
	if err != nil {
		if e, ok := err.(unix.Errno); ok {
			return -1, e
		}
		return -1, unix.EACCES
	}
	return fd, 0
}

// openBase opens /proc/TID/BASE (cwd or root) for openInView.
func (c *Checker) openBase(cl *call, base, path string) (int, unix.Errno) {
	if base == "cwd" {
		if root, err := os.Readlink(fmt.Sprintf("/proc/%d/root", cl.tid)); err != nil || root != "/" {
			// A caller with a root of its own (chroot): a relative path
			// could climb out of it from here. Fail closed.
			if !c.valid(cl.n) {
				return -1, gone
			}
			return -1, unix.EACCES
		}
	}
	bfd, err := unix.Open(fmt.Sprintf("/proc/%d/%s", cl.tid, base), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if !c.valid(cl.n) {
			return -1, gone
		}
		return -1, unix.EACCES
	}
	// The tid is still the caller's: its /proc directory was not
	// another's, reused.
	if !c.valid(cl.n) {
		unix.Close(bfd)
		return -1, gone
	}
	return bfd, 0
}

func sockaddrUnix(path string) []byte {
	b := make([]byte, 2+len(path)+1)
	binary.NativeEndian.PutUint16(b, unix.AF_UNIX)
	copy(b[2:], path)
	return b
}

// recordUnixName remembers the abstract name fd is bound to, if any (an
// autobind by bind or listen).
func (c *Checker) recordUnixName(w *workerState, fd int) {
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return
	}
	if u, ok := sa.(*unix.SockaddrUnix); ok && len(u.Name) > 0 && u.Name[0] == '@' {
		c.recordAbstract(u.Name[1:])
	}
}

// sock_diag (linux/unix_diag.h).
const (
	sockDiagByFamily = 20
	udiagShowVFS     = 0x2
	unixDiagVFS      = 1
)

// boundInode asks the kernel which inode the Unix socket fd is bound to
// (UNIX_DIAG_VFS): the file the bind created, whatever the path holds by
// now.
func (w *workerState) boundInode(fd int) (dev, ino uint64, err error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, 0, err
	}
	var req [16 + 24]byte
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], sockDiagByFamily)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST)
	ne.PutUint32(req[8:], uint32(st.Ino)) // seq
	req[16] = unix.AF_UNIX
	ne.PutUint32(req[20:], 0xffffffff)     // every state
	ne.PutUint32(req[24:], uint32(st.Ino)) // the socket's inode
	ne.PutUint32(req[28:], udiagShowVFS)   //
	ne.PutUint32(req[32:], 0xffffffff)     // no cookie
	ne.PutUint32(req[36:], 0xffffffff)     //
	sa := &unix.SockaddrNetlink{Family: unix.AF_NETLINK}
	if err := unix.Sendto(w.diag, req[:], 0, sa); err != nil {
		return 0, 0, fmt.Errorf("sock_diag: %w", err)
	}
	var buf [512]byte
	for {
		n, _, err := unix.Recvfrom(w.diag, buf[:], 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, 0, fmt.Errorf("sock_diag: %w", err)
		}
		b := buf[:n]
		if len(b) < 16 {
			return 0, 0, fmt.Errorf("sock_diag: short reply")
		}
		if ne.Uint32(b[8:]) != uint32(st.Ino) {
			continue // a stale answer to an earlier question
		}
		if ne.Uint16(b[4:]) == unix.NLMSG_ERROR {
			return 0, 0, fmt.Errorf("sock_diag: error %d", int32(ne.Uint32(b[16:])))
		}
		end := int(ne.Uint32(b[0:]))
		if end > len(b) {
			end = len(b)
		}
		for at := 16 + 16; at+4 <= end; {
			l, t := int(ne.Uint16(b[at:])), ne.Uint16(b[at+2:])
			if l < 4 || at+l > end {
				break
			}
			if t == unixDiagVFS && l >= 12 {
				// The device is the kernel's dev_t (major<<20 | minor),
				// not stat's encoding.
				kdev := ne.Uint32(b[at+8:])
				return unix.Mkdev(kdev>>20, kdev&0xfffff), uint64(ne.Uint32(b[at+4:])), nil
			}
			at += (l + 3) &^ 3
		}
		return 0, 0, fmt.Errorf("sock_diag: the socket is not bound to a file")
	}
}

func threadGroupOf(tid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("no Tgid for %d", tid)
}

// Openat2Missing names what the checker lacks to resolve the paths of the
// calls it decides on (openInView, and subreaper mode's writes and
// metadata changes: fswrite.go, metadata.go), or "": openat2(2), Linux
// 5.6, which a container's seccomp profile written before it may refuse
// (ENOSYS, EPERM). Without it every such call would fail with that errno,
// unnamed, where the run should not start at all.
func Openat2Missing() string {
	fd, err := unix.Openat2(unix.AT_FDCWD, "/", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return "openat2 (Linux 5.6)"
	}
	unix.Close(fd)
	return ""
}
