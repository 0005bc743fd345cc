//go:build !(linux && (amd64 || arm64))

package main

import "syscall"

// The assembly forks exist for linux/amd64 and linux/arm64 only.

func orphan() (pid int, errno int)                               { return -1, int(syscall.ENOSYS) }
func detached(handler uintptr, readyFD int) (pid int, errno int) { return -1, int(syscall.ENOSYS) }
func sleeper() (pid int, errno int)                              { return -1, int(syscall.ENOSYS) }

const forkSupported = false
