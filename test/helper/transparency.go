package main

// Commands for the transparency tests (docs/signals-and-teardown.md, "What
// the runner inherits"): what the
// runner received, reported byte for byte, and a caller that blocks signals.

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

func cmdFDs(fs *flag.FlagSet) func(*common) error {
	return func(c *common) error {
		if err := c.setup(false); err != nil {
			return err
		}
		entries, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			return err
		}
		var out strings.Builder
		for _, ent := range entries {
			fd, err := strconv.Atoi(ent.Name())
			if err != nil {
				continue
			}
			flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
			if err != nil || flags&unix.FD_CLOEXEC != 0 {
				continue // the directory's own descriptor, or the runtime's
			}
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil {
				return fmt.Errorf("fstat %d: %w", fd, err)
			}
			fmt.Fprintf(&out, "fd=%d dev=%d ino=%d\n", fd, st.Dev, st.Ino)
		}
		if _, err := os.Stdout.WriteString(out.String()); err != nil {
			return err
		}
		return c.becomeReady()
	}
}

func cmdAccept(fs *flag.FlagSet) func(*common) error {
	return func(c *common) error {
		if err := c.setup(false); err != nil {
			return err
		}
		n, err := strconv.Atoi(os.Getenv("LISTEN_FDS"))
		if err != nil || n < 1 {
			return fmt.Errorf("LISTEN_FDS=%q: want a count of 1 or more", os.Getenv("LISTEN_FDS"))
		}
		if err := c.becomeReady(); err != nil {
			return err
		}
		for fd := 3; fd < 3+n; fd++ {
			l, err := net.FileListener(os.NewFile(uintptr(fd), "listen"))
			if err != nil {
				return fmt.Errorf("fd %d is not a listening socket: %w", fd, err)
			}
			conn, err := l.Accept()
			if err != nil {
				return fmt.Errorf("accept on fd %d: %w", fd, err)
			}
			_, err = conn.Write([]byte("x"))
			conn.Close()
			l.Close()
			if err != nil {
				return err
			}
		}
		os.Exit(0)
		return nil
	}
}

func cmdBytes(fs *flag.FlagSet) func(*common) error {
	return func(c *common) error {
		if err := c.setup(false); err != nil {
			return err
		}
		var out strings.Builder
		for _, a := range os.Args {
			fmt.Fprintf(&out, "arg %x\n", a)
		}
		for _, kv := range os.Environ() {
			fmt.Fprintf(&out, "env %x\n", kv)
		}
		exe, err := os.Readlink("/proc/self/exe")
		if err != nil {
			return err
		}
		// getcwd(2) itself: os.Getwd would believe $PWD.
		cwd, err := unix.Getwd()
		if err != nil {
			return err
		}
		fmt.Fprintf(&out, "exe %x\ncwd %x\n", exe, cwd)
		if _, err := os.Stdout.WriteString(out.String()); err != nil {
			return err
		}
		return c.becomeReady()
	}
}

func cmdSigmask(fs *flag.FlagSet) func(*common) error {
	block := fs.String("block", "", "signals to block, comma-separated")
	return func(c *common) error {
		if len(c.args) == 0 {
			return errors.New("sigmask: no program")
		}
		var set unix.Sigset_t
		for _, name := range strings.Split(*block, ",") {
			sig, err := parseSignal(name)
			if err != nil {
				return err
			}
			bit := uint(sig) - 1
			set.Val[bit/64] |= 1 << (bit % 64)
		}
		// The mask belongs to the thread, and execve keeps the calling
		// thread's: block and exec on the same one.
		runtime.LockOSThread()
		if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, nil); err != nil {
			return fmt.Errorf("sigprocmask: %w", err)
		}
		return unix.Exec(c.args[0], c.args, os.Environ())
	}
}
