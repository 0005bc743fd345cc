package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// cmdMeta is cmdTry with the metadata calls and the ways a file is put in
// place besides a write (the read-only mounts of namespace modes, issue
// 33), one "OP=RESULT" line each:
//
//	chmod:PATH:MODE       chmod(2), MODE octal
//	fchmod-ro:PATH:MODE   fchmod(2) on a descriptor opened O_RDONLY
//	chown:PATH:UID:GID    chown(2) (-1 keeps one)
//	setxattr:PATH         setxattr(2) of user.corral
//	setcap:PATH           setxattr(2) of security.capability
//	utimes:PATH           utimensat(2) to 2000-01-01
//	link:FROM:TO          link(2)
//	symlink:TARGET:LINK   symlink(2)
//	swapwrite:LINK:A:B    write through LINK 2000 times while another
//	                      thread swaps it between a link to A and one to B
//
// and every op of try.
func cmdMeta(fs *flag.FlagSet) func(*common) error {
	code := fs.Int("code", 0, "exit status")
	return func(c *common) error {
		if err := c.setup(false); err != nil {
			return err
		}
		var out strings.Builder
		for _, op := range c.args {
			fmt.Fprintf(&out, "%s=%s\n", op, errnoName(tryMeta(op)))
		}
		if _, err := os.Stdout.WriteString(out.String()); err != nil {
			return err
		}
		os.Exit(*code)
		return nil
	}
}

func tryMeta(op string) error {
	verb, arg, _ := strings.Cut(op, ":")
	parts := strings.Split(arg, ":")
	need := func(n int) error {
		if len(parts) != n {
			return fmt.Errorf("op %q: want %d arguments", op, n)
		}
		return nil
	}
	switch verb {
	case "chmod", "fchmod-ro":
		if err := need(2); err != nil {
			return err
		}
		mode, err := strconv.ParseUint(parts[1], 8, 32)
		if err != nil {
			return err
		}
		if verb == "chmod" {
			return unix.Chmod(parts[0], uint32(mode))
		}
		fd, err := unix.Open(parts[0], unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Fchmod(fd, uint32(mode))
	case "chown":
		if err := need(3); err != nil {
			return err
		}
		uid, err1 := strconv.Atoi(parts[1])
		gid, err2 := strconv.Atoi(parts[2])
		if err1 != nil || err2 != nil {
			return fmt.Errorf("op %q: bad ids", op)
		}
		return unix.Chown(parts[0], uid, gid)
	case "chattr":
		return chattrNoDump(arg)
	case "file-setattr":
		return fileSetattrNoDump(arg)
	case "setxattr":
		return unix.Setxattr(arg, "user.corral", []byte("x"), 0)
	case "setcap":
		// A file capability (security.capability, VFS_CAP_REVISION_2
		// with CAP_SETUID permitted and effective): a privileged xattr.
		v := []byte{0x01, 0x00, 0x00, 0x02, 0x80, 0, 0, 0, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
		return unix.Setxattr(arg, "security.capability", v, 0)
	case "utimes":
		t := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
		ts := []unix.Timespec{unix.NsecToTimespec(t.UnixNano()), unix.NsecToTimespec(t.UnixNano())}
		return unix.UtimesNano(arg, ts)
	case "link":
		if err := need(2); err != nil {
			return err
		}
		return unix.Link(parts[0], parts[1])
	case "symlink":
		if err := need(2); err != nil {
			return err
		}
		return unix.Symlink(parts[0], parts[1])
	case "swapwrite":
		if err := need(3); err != nil {
			return err
		}
		return swapWrite(parts[0], parts[1], parts[2])
	}
	return try(op)
}

// swapWrite writes through link while another thread keeps replacing it
// (rename of a fresh symlink over it) by one to a, then one to b: the
// check of a path and its use are two moments, and a swap between them is
// the runner's oldest trick. It reports the first error other than the
// refusals a link to b earns (every write may reach a, none b).
func swapWrite(link, a, b string) error {
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		tmp := link + ".swap"
		for i := 0; !stop.Load(); i++ {
			target := a
			if i%2 == 1 {
				target = b
			}
			_ = unix.Unlink(tmp)
			if unix.Symlink(target, tmp) == nil {
				_ = unix.Rename(tmp, link)
			}
		}
		_ = unix.Unlink(tmp)
	}()
	defer func() {
		stop.Store(true)
		<-done
	}()
	wrote := 0
	for i := 0; i < 2000; i++ {
		fd, err := unix.Open(link, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_CLOEXEC, 0o755)
		if err != nil {
			continue // EROFS through a link to b, ENOENT mid-swap
		}
		if _, err := unix.Write(fd, []byte("#!/bin/sh\necho PLANTED\n")); err == nil {
			wrote++
		}
		unix.Close(fd)
	}
	if wrote == 0 {
		return fmt.Errorf("no write went through")
	}
	return nil
}
