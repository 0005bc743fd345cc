package cgroup

// Who is in the run's cgroup, for teardown's signal at grace 0: a list
// read through a descriptor opened before the runner started (Procs), and
// a check, for one process held by a pidfd, that it is a member now
// (Holds). Together they reach the runner's tree without a /proc walk,
// and never a process that merely took over a listed pid.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrNested is wrapped by Procs' error when cgroups exist beneath the
// run's (a runner with the right to make them did): cgroup.procs lists
// only the cgroup's own processes, so the list would miss theirs.
var ErrNested = errors.New("cgroups exist beneath it")

// Procs appends the pids of the processes in the cgroup to buf, sorted,
// each once, and returns it. It fails (ErrNested) when cgroups exist
// beneath: reading theirs too would need a descriptor per cgroup at
// teardown, which a runner that lowered corral's RLIMIT_NOFILE can deny,
// and a runner that makes cgroups is rare enough for the caller's /proc
// walk to serve it. Like Kill it needs no new descriptor and no new
// thread.
//
// A pid in the list may belong to another process by the time it is
// used (the member exited and the pid was reused): Holds tells.
func (c *Cgroup) Procs(buf []int) ([]int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return buf, fmt.Errorf("read %s/cgroup.procs: %w", c.path, os.ErrClosed)
	}
	data, err := c.readProcs()
	if err != nil {
		return buf, fmt.Errorf("read %s/cgroup.procs: %w", c.path, err)
	}
	n := len(buf)
	if buf, err = parseProcs(data, buf); err != nil {
		return buf[:n], fmt.Errorf("%s/%w", c.path, err)
	}
	// After the list, not before: a process moved into a cgroup made
	// before the list was read is then missing from it, and that cgroup
	// shows here. One moved after the read is listed, and Holds refuses
	// it (its cgroup id is the new one's), which the caller sees.
	nested, err := c.hasChildren()
	switch {
	case err != nil:
		return buf[:n], fmt.Errorf("list %s: %w", c.path, err)
	case nested:
		return buf[:n], fmt.Errorf("%s: %w", c.path, ErrNested)
	}
	// The kernel may list a process twice when it moves during the read.
	slices.Sort(buf[n:])
	return buf[:n+len(slices.Compact(buf[n:]))], nil
}

// readProcs reads cgroup.procs whole into c.procBuf. Like cgroup.events
// it is regenerated from the start by a read at offset 0.
func (c *Cgroup) readProcs() ([]byte, error) {
	if len(c.procBuf) == 0 {
		c.procBuf = make([]byte, 4096)
	}
	n := 0
	for {
		if n == len(c.procBuf) {
			c.procBuf = append(c.procBuf, make([]byte, len(c.procBuf))...)
		}
		m, _, errno := unix.RawSyscall6(unix.SYS_PREAD64, uintptr(c.procs), uintptr(unsafe.Pointer(&c.procBuf[n])), uintptr(len(c.procBuf)-n), uintptr(n), 0, 0)
		switch {
		case errno == unix.EINTR:
			continue
		case errno != 0:
			return nil, errno
		case m == 0:
			return c.procBuf[:n], nil
		}
		n += int(m)
	}
}

// hasChildren reports whether any directory (a cgroup) exists in the
// cgroup's own, listed through the directory descriptor New opened.
func (c *Cgroup) hasChildren() (bool, error) {
	if _, _, errno := unix.RawSyscall(unix.SYS_LSEEK, uintptr(c.dir), 0, uintptr(unix.SEEK_SET)); errno != 0 {
		return false, errno
	}
	var buf [4096]byte
	for {
		n, _, errno := unix.RawSyscall(unix.SYS_GETDENTS64, uintptr(c.dir), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
		switch {
		case errno == unix.EINTR:
			continue
		case errno != 0:
			return false, errno
		case n == 0:
			return false, nil
		}
		if direntsHoldDir(buf[:n]) {
			return true, nil
		}
	}
}

// direntsHoldDir reports whether a getdents64 buffer holds a directory
// other than . and .., or an entry of unknown type (kernfs gives every
// type, but a guess must not hide a cgroup).
func direntsHoldDir(buf []byte) bool {
	// struct linux_dirent64: u64 ino, s64 off, u16 reclen, u8 type, name.
	const nameAt = 19
	for len(buf) >= nameAt {
		reclen := int(binary.NativeEndian.Uint16(buf[16:]))
		if reclen < nameAt || reclen > len(buf) {
			return true // not the kernel's shape: assume the worst
		}
		typ, name := buf[18], buf[nameAt:reclen]
		if i := slices.Index(name, 0); i >= 0 {
			name = name[:i]
		}
		dot := string(name) == "." || string(name) == ".."
		if !dot && (typ == unix.DT_DIR || typ == unix.DT_UNKNOWN) {
			return true
		}
		buf = buf[reclen:]
	}
	return false
}

// Holds reports whether the process behind pidfd is in the cgroup itself
// (a process beneath it is not), from the kernel's own record of the
// process the pidfd pins: a pid that Procs listed and another process
// took over since is refused. A process already reaped is not a member.
// An error wrapping errors.ErrUnsupported means the kernel cannot say
// (PIDFD_GET_INFO came with Linux 6.13): the caller must not guess.
func (c *Cgroup) Holds(pidfd int) (bool, error) {
	id, err := PidfdCgroupID(pidfd)
	switch {
	case errors.Is(err, unix.ESRCH):
		return false, nil
	case err != nil:
		return false, err
	}
	return id == c.id, nil
}

// PidfdCgroupID returns the id of the cgroup v2 the process behind pidfd
// is in (ioctl PIDFD_GET_INFO, PIDFD_INFO_CGROUPID). ESRCH: the process
// has been reaped. An error wrapping errors.ErrUnsupported: the kernel
// has no such ioctl (ENOTTY, or EINVAL from 6.9 to 6.12, whose pidfd
// ioctls take no argument), or did not fill the id in.
func PidfdCgroupID(pidfd int) (uint64, error) {
	info := unix.PidfdInfo{Mask: unix.PIDFD_INFO_CGROUPID}
	for {
		// A raw call, like Kill's: it does not block.
		_, _, errno := unix.RawSyscall(unix.SYS_IOCTL, uintptr(pidfd), uintptr(unix.PIDFD_GET_INFO), uintptr(unsafe.Pointer(&info)))
		switch errno {
		case 0:
		case unix.EINTR:
			continue
		case unix.ENOTTY, unix.EINVAL:
			return 0, fmt.Errorf("ioctl PIDFD_GET_INFO: %w (%s; Linux 6.13 or later has it)", errors.ErrUnsupported, unix.ErrnoName(errno))
		default:
			return 0, fmt.Errorf("ioctl PIDFD_GET_INFO: %w", errno)
		}
		break
	}
	if info.Mask&unix.PIDFD_INFO_CGROUPID == 0 {
		return 0, fmt.Errorf("ioctl PIDFD_GET_INFO: %w (no cgroup id in the answer)", errors.ErrUnsupported)
	}
	return info.Cgroupid, nil
}
