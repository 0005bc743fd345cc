package sockcheck

import (
	"bytes"
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/internal/seccomp"
)

// pidfdSignal checks pidfd_send_signal(2) with SIGKILL or SIGSTOP, which
// the enforcer's guard hands over where Landlock has no signal scope
// (seccomp.EnforcerGuard; SPEC.md, --isolate-ipc): the descriptor, a
// pidfd or a /proc/PID directory, names no pid the filter could compare.
// The checker takes the caller's descriptor (the same open file: a
// runner thread that swaps the number afterwards changes nothing), finds
// the process it names, and sends the signal itself on that copy, with a
// copy of the caller's siginfo, only to a process of the runner's tree:
// never to corral, which runs this checker, and never outside the tree,
// as Landlock's scope would refuse too (and as corral's own privileges
// must not be lent to reach another uid's process).
func (c *Checker) pidfdSignal(cl *call) (int64, unix.Errno) {
	n := cl.n
	pidfd, err := seccomp.OpenPidfd(cl.tid)
	if err != nil {
		if !c.valid(n) {
			return 0, gone
		}
		return 0, unix.EPERM
	}
	defer unix.Close(pidfd)
	if !c.valid(n) {
		return 0, gone
	}
	fd, err := seccomp.GetFD(pidfd, int(int32(n.Data.Args[0])))
	if err != nil {
		if e, ok := errnoOf(err); ok && e == unix.EBADF {
			return 0, unix.EBADF
		}
		return 0, unix.EPERM
	}
	defer unix.Close(fd)
	// The caller's siginfo, copied once (the kernel copies it once too).
	var info *unix.Siginfo
	if addr := n.Data.Args[2]; addr != 0 {
		info = new(unix.Siginfo)
		buf := unsafe.Slice((*byte)(unsafe.Pointer(info)), unsafe.Sizeof(*info))
		if got, err := seccomp.ReadMemory(cl.tid, addr, buf); err != nil || got != len(buf) {
			if !c.valid(n) {
				return 0, gone
			}
			return 0, unix.EFAULT
		}
		if !c.valid(n) {
			return 0, gone
		}
	}
	target, e := pidOfFD(fd)
	if e != 0 {
		return 0, e
	}
	if !inTree(target, os.Getpid()) {
		return 0, unix.EPERM
	}
	_, _, errno := unix.Syscall6(unix.SYS_PIDFD_SEND_SIGNAL, uintptr(fd), uintptr(n.Data.Args[1]),
		uintptr(unsafe.Pointer(info)), uintptr(uint32(n.Data.Args[3])), 0, 0)
	return 0, errno
}

// pidOfFD is the pid (in the checker's namespace) of the process a pidfd
// or a /proc/PID directory descriptor names: fdinfo's "Pid:" for a pidfd
// (-1 once the process is gone), the link's /proc/PID for a directory.
// Anything else is not a pidfd (EBADF, as the kernel says).
func pidOfFD(fd int) (int, unix.Errno) {
	b, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return 0, unix.EBADF
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("Pid:")); ok {
			pid, err := strconv.Atoi(string(bytes.TrimSpace(v)))
			if err != nil || pid == 0 {
				return 0, unix.EPERM // not in this namespace
			}
			if pid < 0 {
				return 0, unix.ESRCH
			}
			return pid, 0
		}
	}
	link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return 0, unix.EBADF
	}
	rest, ok := bytes.CutPrefix([]byte(link), []byte("/proc/"))
	pid, err := strconv.Atoi(string(rest))
	if !ok || err != nil || pid <= 0 {
		return 0, unix.EBADF
	}
	return pid, 0
}

// inTree reports whether pid descends from root (and is not root): its
// parent chain, read from /proc, reaches root. A pid the chain names can
// change only when a process dies; the signal then goes to the copied
// descriptor, whose process is gone (ESRCH), not to the new one.
func inTree(pid, root int) bool {
	for i := 0; i < 4096 && pid > 1; i++ {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return false
		}
		// The parent is the second field after the last ')': comm may
		// hold spaces and parentheses.
		end := bytes.LastIndexByte(b, ')')
		if end < 0 {
			return false
		}
		f := bytes.Fields(b[end+1:])
		if len(f) < 2 {
			return false
		}
		ppid, err := strconv.Atoi(string(f[1]))
		if err != nil {
			return false
		}
		if ppid == root {
			return true
		}
		pid = ppid
	}
	return false
}
