package main

import (
	"errors"
	"flag"
	"fmt"

	"golang.org/x/sys/unix"
)

// pidfdThread is PIDFD_THREAD (O_EXCL), pidfd_open's flag for a thread's
// own pidfd (Linux 6.9).
const pidfdThread = unix.O_EXCL

// cmdDenyPidfdThread execs a program under a seccomp filter that fails
// pidfd_open(2) with EPERM when its flags (args[1]) hold PIDFD_THREAD, as
// a container profile written before the flag, that admits pidfd_open
// with the flags it knew only, does. Everything else is allowed.
func cmdDenyPidfdThread(fs *flag.FlagSet) func(*common) error {
	return func(c *common) error {
		if len(c.args) == 0 {
			return errors.New("deny-pidfd-thread: no program")
		}
		arch, err := seccompArch()
		if err != nil {
			return fmt.Errorf("deny-pidfd-thread: %w", err)
		}
		// struct seccomp_data: nr at 0, arch at 4, args[1] (low word) at
		// 24. Jump offsets count from the next instruction.
		filter := []unix.SockFilter{
			/* 0 */ {Code: ld, K: 4},
			/* 1 */ {Code: jeq, K: arch, Jt: 0, Jf: 4}, // another arch: allow (6)
			/* 2 */ {Code: ld, K: 0},
			/* 3 */ {Code: jeq, K: unix.SYS_PIDFD_OPEN, Jt: 0, Jf: 2}, // flags (4) or allow (6)
			/* 4 */ {Code: ld, K: 24},
			/* 5 */ {Code: jset, K: pidfdThread, Jt: 1, Jf: 0}, // EPERM (7) or allow (6)
			/* 6 */ {Code: ret, K: unix.SECCOMP_RET_ALLOW},
			/* 7 */ {Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		}
		return execFiltered(filter, c.args)
	}
}

// openat2(2) fails with ENOSYS, as under a container profile written
// before Linux 5.6: corral's checker resolves paths with it.
var cmdDenyOpenat2 = denyCall("deny-openat2", unix.SYS_OPENAT2, anyArg, unix.ENOSYS)

// unshare(2) fails with EPERM whatever its flags, as under Docker's
// default profile for a container without CAP_SYS_ADMIN: the checker's
// threads cannot have a umask of their own.
var cmdDenyUnshare = denyCall("deny-unshare", unix.SYS_UNSHARE, anyArg, unix.EPERM)
