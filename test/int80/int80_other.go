//go:build !amd64

package int80

import "golang.org/x/sys/unix"

// Supported is true on architectures with an int $0x80 entry point.
const Supported = false

// Syscall fails with ENOSYS: this architecture has no int $0x80.
func Syscall(trap, a1, a2, a3 uintptr) (uintptr, unix.Errno) { return 0, unix.ENOSYS }

// LowPage fails with ENOSYS: nothing here could use it.
func LowPage() ([]byte, error) { return nil, unix.ENOSYS }
