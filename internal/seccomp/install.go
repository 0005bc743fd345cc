package seccomp

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"unsafe"

	"github.com/corral-sh/corral/internal/proc"

	"golang.org/x/sys/unix"
)

// InstallOnThread attaches prog to the calling OS thread, and to nothing
// else: no SECCOMP_FILTER_FLAG_TSYNC, because corral's other threads are the
// engine's and must stay unfiltered. The caller must have locked its
// goroutine to the thread (runtime.LockOSThread) and keep it locked until
// the execve the filter is meant for; the filter survives fork and execve
// and cannot be removed.
//
// The kernel accepts a filter only from a thread with no_new_privs
// (prctl(PR_SET_NO_NEW_PRIVS, 1) on this same thread) or with CAP_SYS_ADMIN
// in its user namespace; without either the error wraps unix.EACCES.
func InstallOnThread(prog []unix.SockFilter) error {
	if len(prog) == 0 || len(prog) > maxInsns {
		return fmt.Errorf("install seccomp filter: a program needs 1 to %d instructions, this one has %d", maxInsns, len(prog))
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog)))
	if errno == unix.ENOSYS {
		// seccomp(2) came in Linux 3.17; the prctl form is older, and an
		// outer filter that refuses one may allow the other.
		_, _, errno = unix.Syscall6(unix.SYS_PRCTL, unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER,
			uintptr(unsafe.Pointer(&fprog)), 0, 0, 0)
	}
	runtime.KeepAlive(prog)
	if errno == 0 {
		return nil
	}
	return fmt.Errorf("install seccomp filter: %s: %w", installReason(errno), errno)
}

func installReason(errno unix.Errno) string {
	switch errno {
	case unix.EACCES:
		return "this thread has neither no_new_privs nor CAP_SYS_ADMIN; set PR_SET_NO_NEW_PRIVS on the same thread first"
	case unix.EINVAL:
		return "the kernel refused the program, or has no seccomp filter support (CONFIG_SECCOMP_FILTER)"
	case unix.ENOMEM:
		return "the filters attached to this thread would exceed the kernel's 32768 instructions in total"
	case unix.EFAULT:
		return "the program is not readable memory"
	case unix.ENOSYS:
		return "the kernel has no seccomp, or an outer seccomp filter refuses seccomp(2) and prctl(PR_SET_SECCOMP)"
	case unix.EPERM:
		return "refused (an outer seccomp filter or a security module denies installing filters)"
	}
	return "unexpected error"
}

// Status is what Probe learns about the calling thread. Like the filter, it
// is per thread: lock the goroutine first if that matters.
type Status struct {
	// NoNewPrivs: this thread already has no_new_privs, so it may install a
	// filter without CAP_SYS_ADMIN.
	NoNewPrivs bool
	// Filters is the number of seccomp filters already attached (a
	// container runtime's profile counts as one), or -1 when the kernel
	// does not say (before Linux 5.9).
	Filters int
	// UserNotif: filters may return SECCOMP_RET_USER_NOTIF and have a
	// listener (Linux 5.0), with notification structures this package
	// knows.
	UserNotif bool
	// PidfdGetfd: pidfd_open and pidfd_getfd work (Linux 5.6);
	// PidfdOpen: pidfd_open alone does (Linux 5.3), so that what is
	// missing is named for what it is.
	PidfdGetfd, PidfdOpen bool
	// ProcessVMReadv: process_vm_readv works (an outer filter may refuse
	// it).
	ProcessVMReadv bool
}

// Probe reports whether a seccomp filter can be installed here, changing
// nothing and forking nothing. A nil error means: the kernel has seccomp
// filtering with the ERRNO action, seccomp(2) is reachable, and this thread
// is not in strict mode. Probe cannot know whether an outer filter refuses
// SECCOMP_SET_MODE_FILTER while allowing the query it makes, whether the
// thread's instruction budget has room, nor whether the thread that will
// install a filter will have no_new_privs or CAP_SYS_ADMIN then.
//
// It also learns whether a supervisor could check socket addresses by user
// notification (Status.UserNotif, PidfdGetfd, ProcessVMReadv;
// Status.NotifyMissing names what is missing), by asking the kernel and by
// using pidfd_getfd and process_vm_readv on this process itself: a few
// fds opened and closed, nothing installed.
func Probe() (Status, error) {
	st := Status{Filters: -1}
	fields, err := proc.ReadStatus("/proc/thread-self/status")
	if err != nil {
		fields, err = proc.ReadStatus("/proc/self/status")
	}
	if err != nil {
		return st, fmt.Errorf("seccomp probe: %w", err)
	}
	if v, ok := fields["NoNewPrivs"]; ok {
		st.NoNewPrivs = v == "1"
	}
	if v, ok := fields["Seccomp_filters"]; ok {
		if n, err := strconv.Atoi(v); err == nil {
			st.Filters = n
		}
	}
	mode, ok := fields["Seccomp"]
	if !ok {
		return st, errors.New("seccomp is not available: the kernel is built without CONFIG_SECCOMP (/proc/self/status has no Seccomp field)")
	}
	if mode == "1" {
		return st, errors.New("seccomp is in strict mode on this thread: no filter can be added")
	}
	// SECCOMP_GET_ACTION_AVAIL (Linux 4.14) needs filter support and
	// installs nothing.
	action := uint32(unix.SECCOMP_RET_ERRNO)
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&action)))
	switch errno {
	case 0:
		probeNotify(&st)
		return st, nil
	case unix.ENOSYS:
		return st, fmt.Errorf("seccomp(2) is not available: an outer seccomp filter refuses it, or the kernel predates 3.17 (%w)", errno)
	case unix.EINVAL:
		return st, fmt.Errorf("seccomp filters are not available: the kernel lacks CONFIG_SECCOMP_FILTER or predates 4.14 (%w)", errno)
	case unix.EOPNOTSUPP:
		return st, fmt.Errorf("the kernel's seccomp lacks the ERRNO action (%w)", errno)
	}
	return st, fmt.Errorf("seccomp(SECCOMP_GET_ACTION_AVAIL): %w", errno)
}
