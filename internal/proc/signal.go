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

// SignalTree walks the tree below root as Descendants does and signals
// every live process as it finds it, with SIGCONT to stopped ones unless
// sig is SIGKILL. want, when not nil, is asked about every live process
// found and only those it accepts are signalled. It returns the number of
// live processes found, and an error (see Blinding) when part of the tree
// could not be seen.
//
// It opens each child's pidfd first and reads its stat second: the stat
// that proves the process is the parent's child then also proves the pidfd
// is that process (a pid reused before pidfd_open shows another parent or
// is gone), so one stat read serves both the walk and the identity check.
func SignalTree(root int, sig syscall.Signal, want func(Stat) bool) (int, error) {
	src := System()
	n := 0
	send := func(st Stat, signal func(syscall.Signal)) {
		if st.Zombie() {
			return
		}
		n++
		if want != nil && !want(st) {
			return
		}
		signal(sig)
		if st.Stopped() && sig != unix.SIGKILL {
			signal(unix.SIGCONT)
		}
	}
	if !pidfdWorks() {
		var blind error
		err := walk(src, root, func(pid, parent int) (Stat, bool) {
			st, err := src.Stat(pid)
			if err != nil && Blinding(err) && blind == nil {
				blind = err
			}
			if err != nil || st.PPID != parent {
				return st, false
			}
			send(st, func(s syscall.Signal) { _ = Signal(st.PID, st.StartTime, s) })
			return st, true
		})
		return n, errors.Join(err, blind)
	}
	var blind error
	err := walk(src, root, func(pid, parent int) (Stat, bool) {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			if Blinding(err) && blind == nil {
				blind = err
			}
			return Stat{}, false // gone, or not to be seen
		}
		defer unix.Close(fd)
		st, err := src.Stat(pid)
		if err != nil && Blinding(err) && blind == nil {
			blind = err
		}
		if err != nil || st.PPID != parent {
			return st, false
		}
		send(st, func(s syscall.Signal) { _ = unix.PidfdSendSignal(fd, s, nil, 0) })
		return st, true
	})
	if err == nil {
		err = blind
	}
	return n, err
}

// Prepare settles, while descriptors are plentiful, the one-time choices
// the walks make (whether pidfds work, whether children files exist), so
// that a later walk under a lowered RLIMIT_NOFILE does not settle them
// wrongly.
func Prepare() {
	System()
	pidfdWorks()
}

var pidfdWorks = sync.OnceValue(func() bool {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
})
