package main

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// legacyOp makes the x86-64 calls libc no longer uses (open, creat,
// mkdir, rename, link, symlink, unlink, rmdir) by their raw numbers: a
// filter that names only the *at calls misses them.
func legacyOp(name, a, b string) (error, bool) {
	p := func(s string) uintptr {
		bs, _ := unix.BytePtrFromString(s)
		return uintptr(unsafe.Pointer(bs))
	}
	var r uintptr
	var e unix.Errno
	switch name {
	case "open":
		r, _, e = unix.Syscall(unix.SYS_OPEN, p(a), unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o755)
	case "creat":
		r, _, e = unix.Syscall(unix.SYS_CREAT, p(a), 0o755, 0)
	case "mkdir":
		_, _, e = unix.Syscall(unix.SYS_MKDIR, p(a), 0o755, 0)
	case "rename":
		_, _, e = unix.Syscall(unix.SYS_RENAME, p(a), p(b), 0)
	case "link":
		_, _, e = unix.Syscall(unix.SYS_LINK, p(a), p(b), 0)
	case "symlink":
		_, _, e = unix.Syscall(unix.SYS_SYMLINK, p(a), p(b), 0)
	case "unlink":
		_, _, e = unix.Syscall(unix.SYS_UNLINK, p(a), 0, 0)
	case "rmdir":
		_, _, e = unix.Syscall(unix.SYS_RMDIR, p(a), 0, 0)
	default:
		return nil, false
	}
	if e != 0 {
		return e, true
	}
	if name == "open" || name == "creat" {
		return writeFD(int(r), nil), true
	}
	return nil, true
}
