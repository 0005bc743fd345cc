package proc

import (
	"errors"
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

// SameProcess is sameProcess for callers outside the package.
func SameProcess(pid int, start uint64) bool { return sameProcess(pid, start) }
