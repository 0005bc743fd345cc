package cgroup

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Cgroup is one run's cgroup, with everything teardown needs opened when
// it was made: a runner that lowers corral's NOFILE limit or exhausts
// pids.max cannot deny Kill, Populated or Remove anything.
//
// Methods may be called from several goroutines, but WaitEmpty from one at
// a time.
type Cgroup struct {
	path string // for messages and tests
	name string // beneath parent

	mu     sync.Mutex // guards closing the descriptors, and procBuf
	closed bool
	parent int      // the parent directory, for rmdir
	dir    int      // the cgroup's directory, for CLONE_INTO_CGROUP
	kill   int      // cgroup.kill, write-only
	events int      // cgroup.events, read-only, non-blocking
	poller *os.File // events in the runtime poller, for WaitEmpty
	procs  int      // cgroup.procs, read-only, for Procs

	id      uint64 // the cgroup's id, as PIDFD_GET_INFO names it (Holds)
	procBuf []byte // Procs' read buffer, grown to the largest list read
}

// removeBound caps how long Remove waits for the cgroup to empty after it
// killed what was left: only a process stuck in uninterruptible sleep
// (a dead NFS server) takes longer than the kernel's exit path.
const removeBound = 5 * time.Second

// New makes a cgroup for one run beneath p, named corral-PID-RANDOM, and
// opens what teardown needs. The caller starts the runner into it with
// SysProcAttr{UseCgroupFD: true, CgroupFD: c.FD()} and calls Remove when
// the run is over. An error wrapping ErrUnavailable means this place
// cannot be used (and nothing was left behind).
//
// The new cgroup is a leaf with no controllers of its own, so cgroup v2's
// "no internal processes" rule never refuses a process moving into it;
// the caller stays in p, whose subtree_control a process in it could not
// have filled with domain controllers anyway.
func (p *Parent) New() (*Cgroup, error) {
	parent, err := openDir(unix.AT_FDCWD, p.Dir)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", p.Dir, err)
	}
	c := &Cgroup{parent: parent, dir: -1, kill: -1, events: -1, procs: -1}
	owner := p.Owner
	if owner <= 0 {
		owner = os.Getpid()
	}
	if err := c.create(p.Dir, owner); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.open(); err != nil {
		// Empty and never used: rmdir cannot be refused with EBUSY.
		if rerr := unix.Unlinkat(parent, c.name, unix.AT_REMOVEDIR); rerr != nil {
			err = fmt.Errorf("%w (and rmdir %s: %v)", err, c.path, rerr)
		}
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Cgroup) create(parentDir string, owner int) error {
	// A clash is only possible with a directory another corral of this
	// pid made and left behind; a fresh random part avoids it.
	for range 3 {
		// math/rand: crypto/rand may start a timer (its slow-getrandom
		// warning) and so the runtime poller, which costs a descriptor.
		c.name = fmt.Sprintf("corral-%d-%08x", owner, rand.Uint32())
		c.path = filepath.Join(parentDir, c.name)
		err := ignoringEINTR(func() error { return unix.Mkdirat(c.parent, c.name, 0o755) })
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EEXIST):
			continue
		case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM), errors.Is(err, unix.EROFS):
			return notWritable(parentDir, err)
		case errors.Is(err, unix.EAGAIN):
			return unavailable("mkdir %s: %v: cgroup.max.descendants or cgroup.max.depth of an ancestor is reached", c.path, err)
		default:
			return fmt.Errorf("mkdir %s: %w", c.path, err)
		}
	}
	return fmt.Errorf("mkdir beneath %s: three random names were taken", parentDir)
}

func (c *Cgroup) open() error {
	var err error
	if c.dir, err = openDir(c.parent, c.name); err != nil {
		return fmt.Errorf("open %s: %w", c.path, err)
	}
	c.kill, err = openAt(c.dir, "cgroup.kill", unix.O_WRONLY)
	if errors.Is(err, unix.ENOENT) {
		return errNoKill()
	}
	if err != nil {
		return fmt.Errorf("open %s/cgroup.kill: %w", c.path, err)
	}
	// Non-blocking so that os.NewFile puts it in the runtime poller:
	// kernfs wakes pollers of cgroup.events on every change, and a
	// goroutine parked in the poller needs no OS thread of its own.
	if c.events, err = openAt(c.dir, "cgroup.events", unix.O_RDONLY|unix.O_NONBLOCK); err != nil {
		return fmt.Errorf("open %s/cgroup.events: %w", c.path, err)
	}
	c.poller = os.NewFile(uintptr(c.events), c.path+"/cgroup.events")
	if c.procs, err = openAt(c.dir, "cgroup.procs", unix.O_RDONLY); err != nil {
		return fmt.Errorf("open %s/cgroup.procs: %w", c.path, err)
	}
	// The kernel's cgroup id is its kernfs node's id, which a 64-bit
	// kernel gives the directory as its inode number; on a 32-bit one
	// the number is truncated, no pidfd's cgroup id matches it, and
	// Holds refuses every process: slower (the caller walks /proc), never
	// wrong.
	var st unix.Stat_t
	if err := unix.Fstat(c.dir, &st); err != nil {
		return fmt.Errorf("stat %s: %w", c.path, err)
	}
	c.id = st.Ino
	return nil
}

// Path is the cgroup's directory, for messages.
func (c *Cgroup) Path() string { return c.path }

// FD is the cgroup's directory descriptor, for SysProcAttr.CgroupFD (with
// UseCgroupFD: clone3's CLONE_INTO_CGROUP, so the process is in the cgroup
// from its first instruction and nothing it forks starts outside). It is
// close-on-exec: no runner inherits it. After Close it is -1.
func (c *Cgroup) FD() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dir
}

// Kill SIGKILLs every process in the cgroup and in any cgroup beneath it,
// with one write to cgroup.kill: the kernel also kills a process forked
// while the write runs, so no fork loop outruns it. It kills the caller
// too if the caller is inside (pidns mode started its init there: the init
// must leave Kill to the host and use kill(-1)).
//
// It needs no new descriptor, and it uses a raw system call: the Go
// runtime cannot hand this thread's P away while it runs, so Kill never
// needs a new OS thread, even under a full pids.max.
func (c *Cgroup) Kill() error {
	one := []byte{'1'}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("kill %s: %w", c.path, os.ErrClosed)
	}
	for {
		_, _, errno := unix.RawSyscall6(unix.SYS_PWRITE64, uintptr(c.kill), uintptr(unsafe.Pointer(&one[0])), 1, 0, 0, 0)
		switch errno {
		case 0:
			return nil
		case unix.EINTR:
			continue
		}
		return fmt.Errorf("write 1 to %s/cgroup.kill: %w", c.path, errno)
	}
}

// Populated reports whether any process is left in the cgroup or beneath
// it, from cgroup.events. A zombie no longer counts: populated turns false
// when the last process has exited, before anyone reaps it. Like Kill it
// needs no descriptor and no new thread.
func (c *Cgroup) Populated() (bool, error) {
	var buf [512]byte
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false, fmt.Errorf("read %s/cgroup.events: %w", c.path, os.ErrClosed)
	}
	for {
		// kernfs regenerates the file at offset 0 on every read.
		n, _, errno := unix.RawSyscall6(unix.SYS_PREAD64, uintptr(c.events), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0, 0)
		switch errno {
		case 0:
			populated, err := parseEvents(buf[:n])
			if err != nil {
				return false, fmt.Errorf("%s/%w", c.path, err)
			}
			return populated, nil
		case unix.EINTR:
			continue
		}
		return false, fmt.Errorf("read %s/cgroup.events: %w", c.path, errno)
	}
}

// WaitEmpty waits until no process is left in the cgroup, or timeout has
// passed, and reports whether it is empty. It sleeps in the runtime's
// poller, woken by the kernel on each change of cgroup.events, so it
// neither spins nor holds an OS thread. timeout ≤ 0 checks once.
func (c *Cgroup) WaitEmpty(timeout time.Duration) (bool, error) {
	populated, err := c.Populated()
	if err != nil || !populated || timeout <= 0 {
		return !populated && err == nil, err
	}
	if err := c.poller.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		// Not in the poller (a kernel whose kernfs cannot be polled):
		// check at a modest rate instead.
		return c.pollEmpty(timeout)
	}
	defer c.poller.SetReadDeadline(time.Time{})
	raw, err := c.poller.SyscallConn()
	if err != nil {
		return false, fmt.Errorf("wait on %s/cgroup.events: %w", c.path, err)
	}
	var empty bool
	var readErr error
	// The first wake-up may be stale (registration reports the file
	// ready); each one only costs a read. Returning false parks until
	// the kernel's next notification or the deadline.
	err = raw.Read(func(uintptr) bool {
		populated, readErr = c.Populated()
		empty = readErr == nil && !populated
		return readErr != nil || empty
	})
	switch {
	case readErr != nil:
		return false, readErr
	case errors.Is(err, os.ErrDeadlineExceeded):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("wait on %s/cgroup.events: %w", c.path, err)
	}
	return empty, nil
}

func (c *Cgroup) pollEmpty(timeout time.Duration) (bool, error) {
	deadline := time.Now().Add(timeout)
	for {
		populated, err := c.Populated()
		if err != nil || !populated {
			return err == nil, err
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Remove ends the cgroup: it kills whatever is still inside, waits (up to
// a few seconds) for it to empty, removes any cgroups a runner made
// beneath it, removes it, and closes its descriptors. A cgroup already
// gone counts as removed. The error names the directory when it could not
// be removed, so a user can rmdir it once its last process is gone.
func (c *Cgroup) Remove() error {
	defer c.Close()
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return fmt.Errorf("remove %s: %w", c.path, os.ErrClosed)
	}
	deadline := time.Now().Add(removeBound)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		err := ignoringEINTR(func() error { return unix.Unlinkat(c.parent, c.name, unix.AT_REMOVEDIR) })
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("remove %s: %w; remove it with rmdir", c.path, err)
		}
		// Busy: a process is still inside (or still exiting), or a
		// runner made cgroups of its own beneath this one.
		if populated, perr := c.Populated(); perr == nil && populated {
			if err := c.Kill(); err != nil {
				return fmt.Errorf("remove %s: %w", c.path, err)
			}
			if _, err := c.WaitEmpty(time.Until(deadline)); err != nil {
				return fmt.Errorf("remove %s: %w", c.path, err)
			}
		} else {
			removeChildren(c.dir, c.path)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("remove %s: still busy after %v (a process in uninterruptible sleep?); remove it with rmdir once it is empty", c.path, removeBound)
		}
		time.Sleep(pause)
	}
}

// removeChildren removes, deepest first, the cgroups beneath dir: a
// runner with the right to make them may have, and rmdir refuses a cgroup
// that has children. It is best effort (it needs descriptors, unlike the
// rest of teardown); Remove's next rmdir says whether it was enough.
func removeChildren(dir int, path string) {
	fd, err := openDir(dir, ".")
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), path)
	entries, _ := f.ReadDir(-1)
	f.Close()
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if child, err := openDir(dir, e.Name()); err == nil {
			removeChildren(child, filepath.Join(path, e.Name()))
			unix.Close(child)
		}
		_ = unix.Unlinkat(dir, e.Name(), unix.AT_REMOVEDIR)
	}
}

// Close releases the descriptors and leaves the directory; Remove is what
// ends a run. Closing twice is harmless. A WaitEmpty in progress returns
// an error.
func (c *Cgroup) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	fds := []int{c.parent, c.dir, c.kill, c.procs}
	poller, events := c.poller, c.events
	c.parent, c.dir, c.kill, c.events, c.procs = -1, -1, -1, -1, -1
	c.mu.Unlock()
	// Outside the lock: closing the poller waits for a WaitEmpty whose
	// check is running, and that check takes the lock (to find the
	// cgroup closed).
	if poller != nil {
		poller.Close()
	} else if events >= 0 {
		unix.Close(events)
	}
	for _, fd := range fds {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	return nil
}

func openDir(dirfd int, name string) (int, error) {
	return openAt(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY)
}

func openAt(dirfd int, name string, flags int) (int, error) {
	var fd int
	err := ignoringEINTR(func() error {
		var err error
		fd, err = unix.Openat(dirfd, name, flags|unix.O_CLOEXEC, 0)
		return err
	})
	return fd, err
}

func ignoringEINTR(f func() error) error {
	for {
		if err := f(); err != syscall.EINTR {
			return err
		}
	}
}
