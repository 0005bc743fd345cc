package main

// Commands for the tests of protected paths beneath a writable one (issue
// 33, finding 7): fswrite (each write-intent call, through every entry
// point the runner may use) and swaprace (a thread that swaps a symlink
// while another opens it for writing).
//
//	fswrite OP...                  attempt each OP, print "OP=ok" or
//	                               "OP=ERRNO" a line each. OP is NAME:ARG or
//	                               NAME:ARG1,ARG2; NAME one of open, creat,
//	                               mkdir, rename, link, symlink, unlink,
//	                               rmdir (the legacy calls, raw numbers on
//	                               amd64), openat, openat2 (each O_WRONLY|
//	                               O_CREAT, writing "planted"), mkdirat,
//	                               renameat2, linkat, symlinkat, unlinkat,
//	                               truncate, mknod (a FIFO).
//	swaprace -link L -harmless H -target T [-n N]
//	                               one thread flips symlink L between H and T
//	                               while another opens L for writing and
//	                               writes "planted", N times; print
//	                               "opens=O" (the opens that succeeded)

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

func cmdFSWrite(fs *flag.FlagSet) func(*common) error {
	return func(c *common) error {
		for _, op := range c.args {
			name, arg, _ := strings.Cut(op, ":")
			a, b, _ := strings.Cut(arg, ",")
			err := fsOp(name, a, b)
			res := "ok"
			if err != nil {
				if e, ok := err.(unix.Errno); ok {
					res = unix.ErrnoName(e)
				} else {
					res = err.Error()
				}
			}
			fmt.Printf("%s=%s\n", op, res)
		}
		return nil
	}
}

func writeFD(fd int, err error) error {
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	_, err = unix.Write(fd, []byte("planted\n"))
	return err
}

func fsOp(name, a, b string) error {
	if err, ok := legacyOp(name, a, b); ok { // protect_amd64.go
		return err
	}
	switch name {
	case "openat":
		return writeFD(unix.Openat(unix.AT_FDCWD, a, unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o755))
	case "openat2":
		return writeFD(unix.Openat2(unix.AT_FDCWD, a, &unix.OpenHow{Flags: unix.O_WRONLY | unix.O_CREAT | unix.O_CLOEXEC, Mode: 0o755}))
	case "mkdirat":
		return unix.Mkdirat(unix.AT_FDCWD, a, 0o755)
	case "renameat2":
		return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, 0)
	case "linkat":
		return unix.Linkat(unix.AT_FDCWD, a, unix.AT_FDCWD, b, 0)
	case "symlinkat":
		return unix.Symlinkat(a, unix.AT_FDCWD, b)
	case "unlinkat":
		return unix.Unlinkat(unix.AT_FDCWD, a, 0)
	case "truncate":
		return unix.Truncate(a, 0)
	case "mknod":
		return unix.Mknodat(unix.AT_FDCWD, a, unix.S_IFIFO|0o755, 0)
	}
	return fmt.Errorf("unknown op %q", name)
}

func cmdSwapRace(fs *flag.FlagSet) func(*common) error {
	link := fs.String("link", "", "the symlink to flip")
	harmless := fs.String("harmless", "", "a target it may write")
	target := fs.String("target", "", "a target it must never write")
	n := fs.Int("n", 2000, "opens")
	return func(c *common) error {
		var stop atomic.Bool
		done := make(chan struct{})
		tmp := filepath.Join(filepath.Dir(*link), ".swap-"+filepath.Base(*link))
		go func() {
			runtime.LockOSThread()
			defer close(done)
			for i := 0; !stop.Load(); i++ {
				t := *harmless
				if i%2 == 1 {
					t = *target
				}
				os.Remove(tmp)
				if err := os.Symlink(t, tmp); err != nil {
					continue
				}
				os.Rename(tmp, *link) // atomic: the link always exists
			}
		}()
		opens := 0
		for range *n {
			fd, err := unix.Open(*link, unix.O_WRONLY|unix.O_CREAT|unix.O_APPEND|unix.O_CLOEXEC, 0o755)
			if err != nil {
				continue
			}
			opens++
			unix.Write(fd, []byte("planted\n"))
			unix.Close(fd)
		}
		stop.Store(true)
		<-done
		fmt.Printf("opens=%d\n", opens)
		return nil
	}
}
