package seccomp

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// User notification (Linux 5.0+): a filter that returns
// SECCOMP_RET_USER_NOTIF suspends the calling thread and hands the call to
// whoever holds the filter's listener fd, who answers it with a return
// value or an errno. The types below are the kernel's (include/uapi/
// linux/seccomp.h); golang.org/x/sys has the ioctl numbers but not them.

// Data is struct seccomp_data: the call as the filter saw it.
type Data struct {
	Nr   int32
	Arch uint32
	IP   uint64
	Args [6]uint64
}

// Notif is struct seccomp_notif: one suspended call. Pid is the thread's
// id (a tid, in the listener's PID namespace).
type Notif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Data  Data
}

type notifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// SECCOMP_IOCTL_NOTIF_ID_VALID: _IOW('!', 2, __u64), the same on amd64
// and arm64 (x/sys defines it per architecture only).
const ioctlNotifIDValid = 0x40082102

// ErrGone means the notification is no longer pending: the thread that made
// the call was interrupted by a signal (with SA_RESTART its call comes
// again as a new notification) or died. It is not an error of the
// supervisor: there is no one left to answer.
var ErrGone = errors.New("seccomp notification is gone (the caller was interrupted or died)")

// InstallWithListener attaches prog to the calling OS thread only, like
// InstallOnThread, with SECCOMP_FILTER_FLAG_NEW_LISTENER, and returns the
// filter's listener: a close-on-exec fd on which the calls the filter
// answers with SECCOMP_RET_USER_NOTIF arrive. Only this thread and what it
// forks or execs afterwards are filtered; every other thread of the
// process, the listener's reader included, stays unfiltered. No TSYNC: the
// kernel accepts NEW_LISTENER with TSYNC only with TSYNC_ESRCH, and corral
// never synchronises a filter across its threads.
//
// The caller owns the fd. It must keep it open for as long as the
// filtered threads may make those calls and answer them: while it is open
// and nobody reads, they wait; once every copy is closed they fail with
// ENOSYS. It must not let the filtered thread itself make a call the
// filter notifies if that thread is the listener's only reader.
func InstallWithListener(prog []unix.SockFilter) (int, error) {
	if len(prog) == 0 || len(prog) > maxInsns {
		return -1, fmt.Errorf("install seccomp filter: a program needs 1 to %d instructions, this one has %d", maxInsns, len(prog))
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	fd, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER,
		uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		reason := installReason(errno)
		if errno == unix.EINVAL {
			reason = "the kernel refused the program or SECCOMP_FILTER_FLAG_NEW_LISTENER (user notification needs Linux 5.0)"
		}
		if errno == unix.EBUSY {
			reason = "another filter with a listener is already attached to this thread (one listener per thread)"
		}
		return -1, fmt.Errorf("install seccomp filter with a listener: %s: %w", reason, errno)
	}
	return int(fd), nil
}

// Receive waits for the next notification on listener and fills n. It
// blocks the calling thread in the kernel (the listener ignores
// O_NONBLOCK); to read from the Go runtime's poller, wait for the fd to be
// readable first (Readable). It returns ErrGone when the notification it
// was woken for died before it could be read.
func Receive(listener int, n *Notif) error {
	return notifIoctl(listener, unix.SECCOMP_IOCTL_NOTIF_RECV, unsafe.Pointer(n), func() {
		*n = Notif{} // the kernel refuses a buffer that is not zeroed
	}, "receive")
}

// Readable reports, without waiting, whether a notification is pending on
// listener, and whether the filter has no thread left (hangup: no
// notification can come any more).
func Readable(listener int) (ready, hangup bool, err error) {
	fds := []unix.PollFd{{Fd: int32(listener), Events: unix.POLLIN}}
	for {
		_, err = unix.Poll(fds, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return false, false, fmt.Errorf("poll seccomp listener: %w", err)
	}
	return fds[0].Revents&unix.POLLIN != 0, fds[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0, nil
}

// IDValid reports whether notification id is still pending. Check it after
// reading the caller's memory or opening a pidfd for its pid: only a
// pending notification guarantees the thread (and so the pid) is the one
// that made the call.
func IDValid(listener int, id uint64) bool {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(listener), ioctlNotifIDValid, uintptr(unsafe.Pointer(&id)))
	return errno == 0
}

// Respond answers notification id: the call returns val, or fails with
// errno when it is not 0. It never lets the call run (no
// SECCOMP_USER_NOTIF_FLAG_CONTINUE: a pointer the caller passed could be
// rewritten after a check). ErrGone means the caller is no longer
// waiting.
func Respond(listener int, id uint64, val int64, errno unix.Errno) error {
	r := notifResp{ID: id, Val: val}
	if errno != 0 {
		r.Val, r.Error = 0, -int32(errno)
	}
	return send(listener, &r)
}

// send answers a notification; ErrGone when its caller no longer waits.
func send(listener int, r *notifResp) error {
	return notifIoctl(listener, unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(r), nil, "respond")
}

// notifIoctl makes a notification ioctl on listener, again after EINTR
// (before each try, reset, if set, prepares the buffer arg points to);
// ENOENT, the notification died, is ErrGone.
func notifIoctl(listener int, req uint, arg unsafe.Pointer, reset func(), what string) error {
	for {
		if reset != nil {
			reset()
		}
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(listener), uintptr(req), uintptr(arg))
		switch e {
		case 0:
			return nil
		case unix.EINTR:
			continue
		case unix.ENOENT:
			return ErrGone
		}
		return fmt.Errorf("seccomp notification %s: %w", what, e)
	}
}

// ReadMemory copies len(buf) bytes at addr of process (or thread) pid into
// buf with process_vm_readv, and returns how many it could read (a short
// count at the end of a mapping). The caller needs ptrace-attach rights on
// pid (an ancestor under Yama 1, the same uid, a dumpable target).
func ReadMemory(pid int, addr uint64, buf []byte) (int, error) {
	if len(buf) == 0 {
		return 0, nil
	}
	local := []unix.Iovec{{Base: &buf[0]}}
	local[0].SetLen(len(buf))
	remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: len(buf)}}
	n, err := unix.ProcessVMReadv(pid, local, remote, 0)
	if err != nil {
		return 0, fmt.Errorf("read memory of %d: %w", pid, err)
	}
	return n, nil
}

// pidfdThread is PIDFD_THREAD (O_EXCL, Linux 6.9): a pidfd for a thread.
const pidfdThread = unix.O_EXCL

// OpenPidfd returns a close-on-exec pidfd for the process of thread tid (a
// notification's Pid). It asks for a thread pidfd first (Linux 6.9) and
// falls back to the thread group leader's (OpenProcessPidfd) where there
// is none: EINVAL from an older kernel, or any refusal but ESRCH (a
// container profile written before PIDFD_THREAD, that admits pidfd_open
// with the flags it knew only, says EPERM). Check IDValid afterwards: tid
// may have been reused.
func OpenPidfd(tid int) (int, error) {
	fd, err := OpenThreadPidfd(tid)
	if err == nil || errors.Is(err, unix.ESRCH) {
		return fd, err
	}
	return OpenProcessPidfd(tid)
}

// OpenProcessPidfd returns a close-on-exec pidfd for the thread group
// leader of thread tid, whose tid it reads from /proc/TID/status.
func OpenProcessPidfd(tid int) (int, error) {
	tgid, err := threadGroup(tid)
	if err != nil {
		return -1, err
	}
	fd, err := unix.PidfdOpen(tgid, 0)
	if err != nil {
		return -1, fmt.Errorf("pidfd_open %d: %w", tgid, err)
	}
	return fd, nil
}

// OpenThreadPidfd returns a close-on-exec pidfd for thread tid itself
// (PIDFD_THREAD, Linux 6.9), or an error wrapping EINVAL where the kernel
// has none. Unlike a process's pidfd, it never comes to mean another
// thread: once its thread is gone, pidfd_getfd through it fails with
// ESRCH, whoever gets the tid next.
func OpenThreadPidfd(tid int) (int, error) {
	fd, err := unix.PidfdOpen(tid, pidfdThread)
	if err != nil {
		return -1, fmt.Errorf("pidfd_open %d: %w", tid, err)
	}
	return fd, nil
}

func threadGroup(tid int) (int, error) {
	b := make([]byte, 4096)
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/status", tid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("thread group of %d: %w", tid, err)
	}
	n, err := unix.Read(fd, b)
	unix.Close(fd)
	if err != nil {
		return 0, fmt.Errorf("thread group of %d: %w", tid, err)
	}
	var tgid int
	for _, line := range splitLines(b[:n]) {
		if _, err := fmt.Sscanf(line, "Tgid:\t%d", &tgid); err == nil {
			return tgid, nil
		}
	}
	return 0, fmt.Errorf("thread group of %d: no Tgid in /proc/%d/status", tid, tid)
}

func splitLines(b []byte) []string {
	var out []string
	start := 0
	for i, c := range b {
		if c == '\n' {
			out = append(out, string(b[start:i]))
			start = i + 1
		}
	}
	return out
}

// GetFD duplicates fd fd of the process behind pidfd into this process
// (pidfd_getfd, Linux 5.6), close-on-exec. The copy is the same open
// file: a connect or bind made on it is made on the caller's socket.
func GetFD(pidfd, fd int) (int, error) {
	nfd, err := unix.PidfdGetfd(pidfd, fd, 0)
	if err != nil {
		return -1, fmt.Errorf("pidfd_getfd %d: %w", fd, err)
	}
	return nfd, nil
}

// probeNotify fills what Probe learns about user notification.
func probeNotify(st *Status) {
	action := uint32(unix.SECCOMP_RET_USER_NOTIF)
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&action)))
	if errno == 0 {
		var sizes struct{ Notif, Resp, Data uint16 }
		_, _, errno = unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_NOTIF_SIZES, 0, uintptr(unsafe.Pointer(&sizes)))
		st.UserNotif = errno == 0 && int(sizes.Notif) >= int(unsafe.Sizeof(Notif{})) &&
			int(sizes.Resp) >= int(unsafe.Sizeof(notifResp{})) && int(sizes.Data) >= int(unsafe.Sizeof(Data{}))
	}
	// pidfd_getfd on our own pidfd: the syscall exists and an outer
	// filter lets it through.
	if pfd, err := unix.PidfdOpen(unix.Getpid(), 0); err == nil {
		st.PidfdOpen = true
		if nfd, err := unix.PidfdGetfd(pfd, pfd, 0); err == nil {
			st.PidfdGetfd = true
			unix.Close(nfd)
		}
		unix.Close(pfd)
	}
	var word [8]byte
	if n, err := ReadMemory(unix.Getpid(), uint64(uintptr(unsafe.Pointer(&st.Filters))), word[:]); err == nil && n == len(word) {
		st.ProcessVMReadv = true
	}
}

// NotifyMissing names what the kernel (or an outer filter) lacks for a
// supervisor to check socket addresses by user notification, or "" when
// nothing is missing.
func (st Status) NotifyMissing() string {
	var missing []string
	if !st.UserNotif {
		missing = append(missing, "seccomp user notification (Linux 5.0)")
	}
	if !st.PidfdOpen {
		missing = append(missing, "pidfd_open (Linux 5.3)")
	} else if !st.PidfdGetfd {
		missing = append(missing, "pidfd_getfd (Linux 5.6)")
	}
	if !st.ProcessVMReadv {
		missing = append(missing, "process_vm_readv")
	}
	s := ""
	for i, m := range missing {
		if i > 0 {
			s += ", "
		}
		s += m
	}
	return s
}

// SocketCall names the calls NotifyAddresses hands to a listener.
type SocketCall uint8

const (
	CallOther SocketCall = iota
	CallConnect
	CallBind
	CallListen
	CallSendto
	// CallSocket is socket(2) of an inet family the socket rules refuse
	// (SocketRules.NotifyInet): the supervisor names it and refuses it.
	CallSocket
	// CallPidfdSignal is pidfd_send_signal(2) with SIGKILL or SIGSTOP
	// under the enforcer's guard (guard.go): the supervisor refuses it
	// when the descriptor names corral.
	CallPidfdSignal
	// CallSendmsg and CallSendmmsg are sendmsg(2) and sendmmsg(2) at the
	// native entry point, under SocketRules.AllowUDP (udp.go): the
	// supervisor reads each msghdr, checks its destination, and makes the
	// call itself.
	CallSendmsg
	CallSendmmsg
)

func (c SocketCall) String() string {
	return [...]string{"other", "connect", "bind", "listen", "sendto", "socket", "pidfd_send_signal", "sendmsg", "sendmmsg"}[c]
}

// Call tells which socket call d is, at whichever entry point of the
// architecture corral runs on it came from (x32 and the compat ones
// included). The argument layout is the same at all of them: connect,
// bind (fd, addr, addrlen), listen (fd, backlog), sendto (fd, buf, len,
// flags, dest_addr, addrlen); a compat caller's pointers are 32 bits,
// zero-extended.
func (d Data) Call() SocketCall {
	p, err := platformFor(runtime.GOARCH)
	if err != nil {
		return CallOther
	}
	for i := -1; i < len(p.compat); i++ {
		a := p.native
		if i >= 0 {
			a = p.compat[i]
		}
		if d.Arch != a.audit {
			continue
		}
		nr := uint32(d.Nr)
		if a.nrMask != 0 {
			nr &= a.nrMask
		}
		switch nr {
		case a.connect:
			return CallConnect
		case a.bind:
			return CallBind
		case a.listen:
			return CallListen
		case a.sendto:
			return CallSendto
		case a.socket:
			return CallSocket
		}
		if i < 0 && len(a.sendmsg) > 0 && nr == a.sendmsg[0] && d.Nr&x32Bit == 0 {
			return CallSendmsg
		}
		if i < 0 && len(a.sendmmsg) > 0 && nr == a.sendmmsg[0] && d.Nr&x32Bit == 0 {
			return CallSendmmsg
		}
		if isPidfdSendSignal(a.audit, nr) {
			return CallPidfdSignal
		}
	}
	return CallOther
}

// RespondContinue lets the call of notification id run in the kernel as
// the caller made it (SECCOMP_USER_NOTIF_FLAG_CONTINUE, Linux 5.5). Only
// for a call whose arguments nothing was decided on: the caller's threads
// can change its memory after any look. ErrGone as for Respond.
func RespondContinue(listener int, id uint64) error {
	r := notifResp{ID: id, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
	return send(listener, &r)
}

// SetSyncWakeUp asks the kernel to switch straight to the listener's
// reader when a call arrives and back when it is answered
// (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP, Linux 6.6): less latency per
// notification when the reader answers at once. An older kernel says
// EINVAL; nothing else changes.
func SetSyncWakeUp(listener int) error {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(listener), unix.SECCOMP_IOCTL_NOTIF_SET_FLAGS, unix.SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP)
	if e != 0 {
		return fmt.Errorf("seccomp listener sync wake-up: %w", e)
	}
	return nil
}

// ProbeNotify is the part of Probe a run with socket checks asks before it
// starts anything: whether user notification, pidfd_getfd and
// process_vm_readv work here (Status.NotifyMissing). A few system calls,
// no filter installed.
func ProbeNotify() Status {
	st := Status{Filters: -1}
	probeNotify(&st)
	return st
}
