package proc

import (
	"errors"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Signal sends sig to the process with this pid and start time, and does
// nothing when that process has gone or its pid now belongs to another
// process. A pidfd pins the process between the identity check and the
// signal, so a pid reused in that window cannot be hit.
func Signal(pid int, start uint64, sig syscall.Signal) error {
	fd, err := unix.PidfdOpen(pid, 0)
	switch {
	case errors.Is(err, unix.ESRCH):
		return nil
	case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
		// Before Linux 5.3 (or under a seccomp filter that refuses it):
		// check, then kill; the window is as small as we can make it.
		return signalByCheck(pid, start, sig)
	case err != nil:
		return err
	}
	defer unix.Close(fd)
	if !sameProcess(pid, start) {
		return nil
	}
	err = unix.PidfdSendSignal(fd, sig, nil, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	return err
}

func signalByCheck(pid int, start uint64, sig syscall.Signal) error {
	if !sameProcess(pid, start) {
		return nil
	}
	err := unix.Kill(pid, sig)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	return err
}

// sameProcess reports whether pid is alive (or a zombie) and started at start.
func sameProcess(pid int, start uint64) bool {
	st, err := ReadStat(pid)
	return err == nil && st.StartTime == start
}

// SignalDescendants walks the tree below root as Descendants does and
// signals every live process as it finds it, with SIGCONT to stopped ones
// unless sig is SIGKILL. It returns the number of live processes found.
//
// It opens each child's pidfd first and reads its stat second: the stat
// that proves the process is the parent's child then also proves the pidfd
// is that process (a pid reused before pidfd_open shows another parent or
// is gone), so one stat read serves both the walk and the identity check.
func SignalDescendants(root int, sig syscall.Signal) int {
	src := System()
	n := 0
	if !pidfdWorks() {
		for _, st := range Descendants(src, root) {
			if !st.Zombie() {
				n++
				_ = Signal(st.PID, st.StartTime, sig)
				if st.Stopped() && sig != unix.SIGKILL {
					_ = Signal(st.PID, st.StartTime, unix.SIGCONT)
				}
			}
		}
		return n
	}
	walk(src, root, func(pid, parent int) (Stat, bool) {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			return Stat{}, false // gone
		}
		defer unix.Close(fd)
		st, err := src.Stat(pid)
		if err != nil || st.PPID != parent {
			return st, false
		}
		if !st.Zombie() {
			n++
			_ = unix.PidfdSendSignal(fd, sig, nil, 0)
			if st.Stopped() && sig != unix.SIGKILL {
				_ = unix.PidfdSendSignal(fd, unix.SIGCONT, nil, 0)
			}
		}
		return st, true
	})
	return n
}

var pidfdWorks = sync.OnceValue(func() bool {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
})
