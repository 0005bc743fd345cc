package main

// Commands for the tests of the socket checker as a runner that turns on
// corral (issue 33): sendflood (interrupted blocking sends that each leave
// a completed call whose answer finds no one) and checker-try (calls corral
// makes for the runner: privileged binds, metadata changes).
//
//	sendflood [-n N] [-threads T] [-size BYTES] [-done F]
//	                               N times (over T threads at once): connect a
//	                               fresh TCP socket to a loopback listener of
//	                               its own that never reads, sendto BYTES with
//	                               the listener's address on the blocking
//	                               socket, and interrupt the call after 20 ms
//	                               with a SIGALRM whose handler has no
//	                               SA_RESTART. Print "eintr=E done=D", become
//	                               ready, then wait until F exists.
//	checker-try OP...              attempt each OP, print "OP=ok" or
//	                               "OP=ERRNO" a line each, become ready. OPs:
//	                                 bind:PORT (TCP bind on 127.0.0.1:PORT and
//	                                 listen), bind6:PORT (on ::1),
//	                                 chmod:MODE:P (octal), fchmod-ro:MODE:P
//	                                 (fchmod on a descriptor opened O_RDONLY),
//	                                 chown:P (to its own uid and gid: no change
//	                                 of owner, allowed to the owner),
//	                                 setxattr:P (user.corral-test=x),
//	                                 touch:P (utimensat to 2001-01-01, as
//	                                 touch -d), utimes:P (the legacy call)

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// kernelSigaction is the kernel's struct sigaction on amd64 and arm64.
type kernelSigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

const saRestart = 0x10000000

// noRestart takes SA_RESTART off the handler of sig that the Go runtime
// installed (signal.Notify): a call it interrupts then fails with EINTR
// instead of being made again, as in a C program whose sigaction has no
// SA_RESTART.
func noRestart(sig unix.Signal) error {
	var sa kernelSigaction
	if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), 0, uintptr(unsafe.Pointer(&sa)), 8, 0, 0); e != 0 {
		return fmt.Errorf("rt_sigaction: %w", e)
	}
	sa.flags &^= saRestart
	if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&sa)), 0, 8, 0, 0); e != 0 {
		return fmt.Errorf("rt_sigaction: %w", e)
	}
	return nil
}

func cmdSendFlood(fs *flag.FlagSet) func(*common) error {
	n := fs.Int("n", 64, "interrupted sends")
	threads := fs.Int("threads", 4, "sends at once")
	size := fs.Int("size", 4<<20, "bytes per send")
	done := fs.String("done", "", "wait until this file exists before exiting")
	return func(c *common) error {
		if err := c.setup(false); err != nil {
			return err
		}
		sigs := make(chan os.Signal, 1024)
		signal.Notify(sigs, unix.SIGALRM)
		go func() {
			for range sigs {
			}
		}()
		if err := noRestart(unix.SIGALRM); err != nil {
			return err
		}
		ln, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		if err := unix.Bind(ln, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			return fmt.Errorf("bind: %w", err)
		}
		if err := unix.Listen(ln, 4096); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		sa, err := unix.Getsockname(ln)
		if err != nil {
			return err
		}
		port := sa.(*unix.SockaddrInet4).Port
		// The listener's end of each connection never reads: the sends
		// fill the buffers and block.
		var accepted sync.Mutex
		var open []int
		go func() {
			for {
				fd, _, err := unix.Accept4(ln, unix.SOCK_CLOEXEC)
				if err != nil {
					return
				}
				accepted.Lock()
				open = append(open, fd)
				accepted.Unlock()
			}
		}()
		var addr [unix.SizeofSockaddrInet4]byte
		*(*uint16)(unsafe.Pointer(&addr[0])) = unix.AF_INET
		addr[2], addr[3] = byte(port>>8), byte(port)
		copy(addr[4:], []byte{127, 0, 0, 1})
		data := make([]byte, *size)
		var eintr, sent atomic.Int64
		var next atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, *threads)
		for range *threads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := floodThread(&next, *n, data, addr[:], &eintr, &sent); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			return err
		}
		fmt.Printf("eintr=%d done=%d\n", eintr.Load(), sent.Load())
		if err := c.becomeReady(); err != nil {
			return err
		}
		for *done != "" {
			if _, err := os.Stat(*done); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		accepted.Lock()
		for _, fd := range open {
			unix.Close(fd)
		}
		accepted.Unlock()
		return nil
	}
}

// floodThread makes interrupted sends from one OS thread, which a timer
// goroutine interrupts with tgkill (a process-wide timer could wake any
// thread of the Go runtime instead).
func floodThread(next *atomic.Int64, n int, data, addr []byte, eintr, sent *atomic.Int64) error {
	runtime.LockOSThread()
	tid := unix.Gettid()
	pid := os.Getpid()
	for next.Add(1) <= int64(n) {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		// Small buffers: the send fills them at once, then waits.
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4096)
		if _, _, e := unix.Syscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&addr[0])), uintptr(len(addr))); e != 0 {
			unix.Close(fd)
			return fmt.Errorf("connect: %w", e)
		}
		stop := make(chan struct{})
		go func() {
			select {
			case <-time.After(20 * time.Millisecond):
				unix.Tgkill(pid, tid, unix.SIGALRM)
			case <-stop:
			}
		}()
		_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)), 0,
			uintptr(unsafe.Pointer(&addr[0])), uintptr(len(addr)))
		close(stop)
		switch e {
		case unix.EINTR:
			eintr.Add(1)
		case 0:
			sent.Add(1)
		default:
			unix.Close(fd)
			return fmt.Errorf("sendto: %w", e)
		}
		unix.Close(fd)
	}
	return nil
}

func cmdCheckerTry(fs *flag.FlagSet) func(*common) error {
	return func(c *common) error {
		if err := c.setup(false); err != nil {
			return err
		}
		var out strings.Builder
		for _, op := range c.args {
			fmt.Fprintf(&out, "%s=%s\n", op, errnoName(checkerTry(op)))
		}
		if _, err := os.Stdout.WriteString(out.String()); err != nil {
			return err
		}
		return c.becomeReady()
	}
}

func checkerTry(op string) error {
	verb, arg, _ := strings.Cut(op, ":")
	switch verb {
	case "bind", "bind6":
		port, err := strconv.Atoi(arg)
		if err != nil {
			return err
		}
		family := unix.AF_INET
		var sa unix.Sockaddr = &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}
		if verb == "bind6" {
			family = unix.AF_INET6
			sa = &unix.SockaddrInet6{Port: port, Addr: [16]byte{15: 1}}
		}
		fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Bind(fd, sa); err != nil {
			return err
		}
		return unix.Listen(fd, 1)
	case "chmod", "fchmod-ro":
		modeText, path, _ := strings.Cut(arg, ":")
		mode, err := strconv.ParseUint(modeText, 8, 32)
		if err != nil {
			return err
		}
		if verb == "chmod" {
			return unix.Chmod(path, uint32(mode))
		}
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Fchmod(fd, uint32(mode))
	case "chattr":
		return chattrNoDump(arg)
	case "file-setattr":
		return fileSetattrNoDump(arg)
	case "chown":
		return unix.Chown(arg, os.Getuid(), os.Getgid())
	case "setxattr":
		return unix.Setxattr(arg, "user.corral-test", []byte("x"), 0)
	case "touch":
		t := unix.NsecToTimespec(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
		return unix.UtimesNanoAt(unix.AT_FDCWD, arg, []unix.Timespec{t, t}, 0)
	case "utimes":
		tv := unix.NsecToTimeval(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
		p, err := unix.BytePtrFromString(arg)
		if err != nil {
			return err
		}
		tvs := [2]unix.Timeval{tv, tv}
		_, _, e := unix.Syscall(unix.SYS_UTIMES, uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(&tvs[0])), 0)
		if e != 0 {
			return e
		}
		return nil
	}
	return fmt.Errorf("unknown op %q", op)
}
