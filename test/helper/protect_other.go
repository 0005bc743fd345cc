//go:build !amd64

package main

import "golang.org/x/sys/unix"

// legacyOp: this architecture has no legacy calls; the *at ones stand in.
func legacyOp(name, a, b string) (error, bool) {
	switch name {
	case "open", "creat":
		return writeFD(unix.Openat(unix.AT_FDCWD, a, unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o755)), true
	case "mkdir":
		return unix.Mkdirat(unix.AT_FDCWD, a, 0o755), true
	case "rename":
		return unix.Renameat(unix.AT_FDCWD, a, unix.AT_FDCWD, b), true
	case "link":
		return unix.Linkat(unix.AT_FDCWD, a, unix.AT_FDCWD, b, 0), true
	case "symlink":
		return unix.Symlinkat(a, unix.AT_FDCWD, b), true
	case "unlink":
		return unix.Unlinkat(unix.AT_FDCWD, a, 0), true
	case "rmdir":
		return unix.Unlinkat(unix.AT_FDCWD, a, unix.AT_REMOVEDIR), true
	}
	return nil, false
}
