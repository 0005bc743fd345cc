package sandbox

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// describeErr renders an error with its errno name, e.g.
// "operation not permitted (EPERM)", so a user can search for it.
func describeErr(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if name := unix.ErrnoName(errno); name != "" {
			return err.Error() + " (" + name + ")"
		}
	}
	return err.Error()
}
