package main

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The inode flags are metadata no Landlock right covers (issue 33): the
// two ways a runner sets one, used by checker-try and mounts-try.

// chattrNoDump is chattr +d: FS_IOC_SETFLAGS with the no-dump flag added,
// on a descriptor opened read-only, as chattr opens it.
func chattrNoDump(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
	if err != nil {
		return err
	}
	return unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, int(flags|0x40)) // FS_NODUMP_FL
}

// fileSetattrNoDump is file_setattr(AT_FDCWD, path, &attr, 24, 0) (6.17)
// with FS_XFLAG_NODUMP.
func fileSetattrNoDump(path string) error {
	p, err := unix.BytePtrFromString(path)
	if err != nil {
		return err
	}
	var attr [24]byte // struct file_attr, FILE_ATTR_SIZE_VER0
	attr[0] = 0x80    // fa_xflags: FS_XFLAG_NODUMP
	atFDCWD := ^uintptr(99)
	_, _, e := unix.Syscall6(469, atFDCWD, uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(&attr[0])), uintptr(len(attr)), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
