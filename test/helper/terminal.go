package main

// Commands for the terminal tests (test/terminal_test.go).

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// cmdSigint counts the SIGINTs it gets, printing "sigint N" for each, and
// reads lines from stdin; at the line "exit" it prints "sigint total N" and
// exits with N.
func cmdSigint(fs *flag.FlagSet) func(*common) error {
	return func(c *common) error {
		if err := c.setup(false); err != nil {
			return err
		}
		var mu sync.Mutex
		count := 0
		ints := make(chan os.Signal, 16)
		signal.Notify(ints, syscall.SIGINT)
		go func() {
			for range ints {
				mu.Lock()
				count++
				fmt.Printf("sigint %d\n", count)
				mu.Unlock()
			}
		}()
		fmt.Println("sigint ready")
		if err := c.becomeReady(); err != nil {
			return err
		}
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			if strings.TrimSpace(in.Text()) == "exit" {
				break
			}
		}
		mu.Lock()
		fmt.Printf("sigint total %d\n", count)
		os.Exit(count)
		return nil
	}
}

// cmdTiocsti tries to push TEXT into the input of its terminal with
// ioctl(TIOCSTI), one byte at a time: on stdin, or with -tty on /dev/tty
// (the controlling terminal, whatever stdin is). It prints "tiocsti:
// refused: ERRNO" and exits 0 when the first byte is refused, and prints
// "tiocsti: injected" and exits 1 when the kernel took it.
func cmdTiocsti(fs *flag.FlagSet) func(*common) error {
	devTTY := fs.Bool("tty", false, "use /dev/tty instead of stdin")
	return func(c *common) error {
		if len(c.args) != 1 {
			return errors.New("tiocsti: want one TEXT argument")
		}
		if err := c.setup(false); err != nil {
			return err
		}
		fd := 0
		if *devTTY {
			f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
			if err != nil {
				return fmt.Errorf("open /dev/tty: %w", err)
			}
			defer f.Close()
			fd = int(f.Fd())
		}
		if err := c.becomeReady(); err != nil {
			return err
		}
		text := []byte(c.args[0])
		for i := range text {
			_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCSTI, uintptr(unsafe.Pointer(&text[i])))
			if errno != 0 {
				if i > 0 {
					return fmt.Errorf("tiocsti: %d bytes injected, then %v", i, errno)
				}
				fmt.Printf("tiocsti: refused: %s\n", unix.ErrnoName(errno))
				os.Exit(0)
			}
		}
		fmt.Println("tiocsti: injected")
		os.Exit(1)
		return nil
	}
}

// cmdTTYCaller is a caller without job control: it runs PATH ARG... as a
// plain child that stays in the caller's process group, as `bash -c` or
// make does, then prints "caller: status=S pgrp=P tpgid=T" (T is its
// terminal's foreground group), reads a line from the terminal and prints
// "caller: got LINE". A caller that lost the foreground stops at that read
// (SIGTTIN).
func cmdTTYCaller(fs *flag.FlagSet) func(*common) error {
	return func(c *common) error {
		if len(c.args) == 0 {
			return errors.New("tty-caller: no program")
		}
		if err := c.setup(false); err != nil {
			return err
		}
		cmd := exec.Command(c.args[0], c.args[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		if err := c.becomeReady(); err != nil {
			return err
		}
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			return err
		}
		tpgid, err := unix.IoctlGetInt(0, unix.TIOCGPGRP)
		if err != nil {
			return fmt.Errorf("tcgetpgrp: %w", err)
		}
		fmt.Printf("caller: status=%d pgrp=%d tpgid=%d\n", cmd.ProcessState.ExitCode(), unix.Getpgrp(), tpgid)
		line, err := bufio.NewReader(os.Stdin).ReadString('\n')
		if err != nil {
			return fmt.Errorf("read the terminal: %w", err)
		}
		fmt.Printf("caller: got %s\n", strings.TrimSpace(line))
		return nil
	}
}
