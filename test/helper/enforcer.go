package main

// enforcer: a runner that turns on corral (test/enforcer_test.go). Each
// argument is one attempt, tried in order; its result is printed at once
// as OP=ERRNO ("ok" on success), so a run stopped midway still says what
// came before:
//
//	kill-parent:SIG     kill(getppid(), SIG) (SIG a number; 0 tests permission)
//	kill-group:SIG      kill(0, SIG)
//	tgkill-parent:SIG   tgkill(getppid(), getppid(), SIG)
//	pidfd-parent:SIG    pidfd_open(getppid()), then pidfd_send_signal(SIG)
//	procfd-parent:SIG   open("/proc/PPID", O_DIRECTORY), then pidfd_send_signal(SIG)
//	setsig-parent:SIG   F_SETOWN getppid() and F_SETSIG SIG on a pipe, then make it readable
//	io-uring            io_uring_setup(1, {}) by its number
//	abstract-stream:N   connect a stream socket to the abstract name N
//	abstract-dgram:N    sendto a datagram socket at the abstract name N
//	own-abstract        bind a stream and a datagram socket to fresh abstract names, then reach them
//	pidfd-child         start /bin/sleep, pidfd_open it and SIGKILL it through the pidfd
//	go-kill-child       start /bin/sleep and end it with os.Process.Kill (a pidfd since Go 1.23)
//	helper              start a "sleep -ignore-term" child in a session of its own (setsid)
//	sleep               sleep until killed
//
// With -code, the helper exits with that status after the last one.

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func cmdEnforcer(fs *flag.FlagSet) func(*common) error {
	code := fs.Int("code", 0, "exit status")
	return func(c *common) error {
		if err := c.setup(false); err != nil {
			return err
		}
		for _, op := range c.args {
			if op == "sleep" {
				if err := c.becomeReady(); err != nil {
					return err
				}
				sleepForever()
			}
			res := errnoName(enforcerTry(op))
			fmt.Fprintf(os.Stdout, "%s=%s\n", op, res)
		}
		if err := c.becomeReady(); err != nil {
			return err
		}
		os.Exit(*code)
		return nil
	}
}

func enforcerTry(op string) error {
	verb, arg, _ := strings.Cut(op, ":")
	sig := func() unix.Signal {
		n, _ := strconv.Atoi(arg)
		return unix.Signal(n)
	}
	ppid := os.Getppid()
	switch verb {
	case "kill-parent":
		return unix.Kill(ppid, sig())
	case "kill-group":
		return unix.Kill(0, sig())
	case "tgkill-parent":
		return unix.Tgkill(ppid, ppid, sig())
	case "pidfd-parent":
		fd, err := unix.PidfdOpen(ppid, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.PidfdSendSignal(fd, sig(), nil, 0)
	case "procfd-parent":
		fd, err := unix.Open("/proc/"+strconv.Itoa(ppid), unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.PidfdSendSignal(fd, sig(), nil, 0)
	case "setsig-parent":
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			return err
		}
		defer unix.Close(p[0])
		defer unix.Close(p[1])
		if _, err := unix.FcntlInt(uintptr(p[0]), unix.F_SETOWN, ppid); err != nil {
			return err
		}
		if _, err := unix.FcntlInt(uintptr(p[0]), unix.F_SETSIG, int(sig())); err != nil {
			return err
		}
		fl, err := unix.FcntlInt(uintptr(p[0]), unix.F_GETFL, 0)
		if err != nil {
			return err
		}
		if _, err := unix.FcntlInt(uintptr(p[0]), unix.F_SETFL, fl|unix.O_ASYNC); err != nil {
			return err
		}
		_, err = unix.Write(p[1], []byte{1})
		time.Sleep(100 * time.Millisecond) // the signal goes out as the data arrives
		return err
	case "io-uring":
		var params [120]byte // struct io_uring_params
		fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params[0])), 0)
		if errno != 0 {
			return errno
		}
		unix.Close(int(fd))
		return nil
	case "abstract-stream", "abstract-dgram":
		typ := unix.SOCK_STREAM
		if verb == "abstract-dgram" {
			typ = unix.SOCK_DGRAM
		}
		fd, err := unix.Socket(unix.AF_UNIX, typ|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		to := &unix.SockaddrUnix{Name: "@" + arg}
		if typ == unix.SOCK_DGRAM {
			return unix.Sendto(fd, []byte("x"), 0, to)
		}
		return unix.Connect(fd, to)
	case "own-abstract":
		name := fmt.Sprintf("corral-own-%d-%d", os.Getpid(), time.Now().UnixNano())
		ls, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(ls)
		if err := unix.Bind(ls, &unix.SockaddrUnix{Name: "@" + name + "-s"}); err != nil {
			return fmt.Errorf("bind: %w", err)
		}
		if err := unix.Listen(ls, 1); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		ld, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(ld)
		if err := unix.Bind(ld, &unix.SockaddrUnix{Name: "@" + name + "-d"}); err != nil {
			return fmt.Errorf("bind: %w", err)
		}
		if err := enforcerTry("abstract-stream:" + name + "-s"); err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		if err := enforcerTry("abstract-dgram:" + name + "-d"); err != nil {
			return fmt.Errorf("sendto: %w", err)
		}
		return nil
	case "pidfd-child", "go-kill-child":
		cmd := exec.Command("/bin/sleep", "100")
		if err := cmd.Start(); err != nil {
			return err
		}
		var err error
		if verb == "go-kill-child" {
			err = cmd.Process.Kill()
		} else {
			var fd int
			if fd, err = unix.PidfdOpen(cmd.Process.Pid, 0); err == nil {
				err = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
				unix.Close(fd)
			}
		}
		if err != nil {
			cmd.Process.Signal(unix.SIGKILL) // by pid: the child must not outlive this
			cmd.Wait()
			return err
		}
		if st, _ := cmd.Process.Wait(); st == nil || st.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			return fmt.Errorf("the child did not die of SIGKILL: %v", st)
		}
		return nil
	case "helper":
		_, err := spawnOptions{count: 1, setsid: true}.start([]string{"sleep", "-ignore-term"})
		return err
	}
	return fmt.Errorf("unknown op %q", op)
}
