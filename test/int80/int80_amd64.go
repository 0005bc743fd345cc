package int80

import "golang.org/x/sys/unix"

// Supported is true on architectures with an int $0x80 entry point.
const Supported = true

func int80(trap, a1, a2, a3 uintptr) uintptr

// Syscall makes i386 system call trap with three arguments. The kernel
// sees only the low 32 bits of each, so pointers must lie below 4 GiB
// (mmap with MAP_32BIT). The result is decoded as the kernel's 32-bit return.
func Syscall(trap, a1, a2, a3 uintptr) (uintptr, unix.Errno) {
	r := int32(int80(trap, a1, a2, a3))
	if r < 0 && r > -4096 {
		return 0, unix.Errno(-r)
	}
	return uintptr(uint32(r)), 0
}

// LowPage maps a page below 4 GiB, where an i386 system call can point.
func LowPage() ([]byte, error) {
	return unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_32BIT)
}
