package egress

import (
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// A direction's pipe is made at the kernel's default size (64 KiB, 16
// pages) and grown to bigPipe once it carries bulk data (a splice filled
// it), which cuts the CPU spent per byte by about a quarter (fewer
// splices, fewer wake-ups). Pipe pages count against the user's
// pipe-user-pages-soft (64 MiB by default), shared with the runner's own
// pipes when it runs as the same user, and a user over it gets 2-page
// pipes everywhere; so only bigPipeBudget bytes of grown pipes exist at
// once over the process, and a pipe the budget or the kernel refuses stays
// as it is, which still works.
const (
	bigPipe       = 1 << 20
	bigPipeBudget = 16 << 20
)

var bigPipeLeft atomic.Int64

func init() { bigPipeLeft.Store(bigPipeBudget) }

// spliceMax is the most one splice(2) into the pipe asks for: the pipe's
// room bounds it anyway.
const spliceMax = bigPipe

// openPipe makes a direction's pipe: both ends close-on-exec and
// non-blocking. A variable so a test can make it fail as EMFILE would.
var openPipe = func() (r, w int, err error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return -1, -1, err
	}
	return fds[0], fds[1], nil
}

// growPipe grows the pipe whose write end is w to bigPipe if the budget
// and the kernel allow, and reports whether it did; a grown pipe gives its
// share back with shrunkPipe when it is closed.
func growPipe(w int) bool {
	if bigPipeLeft.Add(-bigPipe) < 0 {
		bigPipeLeft.Add(bigPipe)
		return false
	}
	if _, err := unix.FcntlInt(uintptr(w), unix.F_SETPIPE_SZ, bigPipe); err != nil {
		bigPipeLeft.Add(bigPipe)
		return false
	}
	return true
}

func shrunkPipe() { bigPipeLeft.Add(bigPipe) }

// spliceStream copies src to dst with splice(2) through a pipe of its own,
// so the bytes never enter user space, and closes the pipe before it
// returns: the descriptors a tunnel holds are its two sockets and at most
// two per direction, all gone when it ends, whatever the garbage collector
// does (unlike io.Copy's splice path, whose pipes go back to a pool only a
// GC empties).
//
// Both ends must be stream sockets (TCP or Unix); the splices are
// non-blocking and wait on the runtime's poller (syscall.RawConn), so a
// tunnel holds no OS thread while idle, and closing either connection
// wakes it. It reports ok=false, having moved nothing, when it cannot
// splice (not two stream sockets, no pipe: EMFILE and the like); the caller
// then copies through a buffer. If the kernel refuses to splice from src
// once started, with the pipe empty, the rest is copied through a buffer
// (fallback).
func spliceStream(dst, src net.Conn, fallback func(dst, src net.Conn) (int64, error)) (written int64, err error, ok bool) {
	return spliceStreamN(dst, src, -1, fallback)
}

// spliceStreamN is spliceStream that stops after limit bytes (limit < 0:
// at EOF, as spliceStream); a src that ends before them ends it early
// with no error, as io.Copy of an io.LimitReader does. fallback then gets
// only what is left of limit to copy.
func spliceStreamN(dst, src net.Conn, limit int64, fallback func(dst, src net.Conn) (int64, error)) (written int64, err error, ok bool) {
	if limit == 0 {
		return 0, nil, true
	}
	if spliceDisabled.Load() || !streamSocket(dst) || !streamSocket(src) {
		return 0, nil, false
	}
	rc, err := src.(syscall.Conn).SyscallConn()
	if err != nil {
		return 0, nil, false
	}
	wc, err := dst.(syscall.Conn).SyscallConn()
	if err != nil {
		return 0, nil, false
	}
	pr, pw, err := openPipe()
	if err != nil {
		return 0, nil, false
	}
	defer unix.Close(pr)
	defer unix.Close(pw)
	grown, tried := false, false
	defer func() {
		if grown {
			shrunkPipe()
		}
	}()

	for {
		ask := spliceMax
		if limit >= 0 {
			if limit-written <= 0 {
				return written, nil, true
			}
			ask = int(min(int64(ask), limit-written))
		}
		// src into the pipe, which is empty: EAGAIN means src has nothing.
		var n int64
		var serr error
		rerr := rc.Read(func(fd uintptr) bool {
			for {
				n, serr = unix.Splice(int(fd), nil, pw, nil, ask, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
				if serr != unix.EINTR {
					return serr != unix.EAGAIN
				}
			}
		})
		switch {
		case rerr != nil:
			return written, rerr, true
		case serr == unix.EINVAL && fallback != nil:
			// This socket cannot be spliced from (nothing was taken
			// from it): copy the rest the ordinary way.
			if limit >= 0 {
				src = limitedConn{src, &io.LimitedReader{R: src, N: limit - written}}
			}
			m, err := fallback(dst, src)
			return written + m, err, true
		case serr != nil:
			return written, os.NewSyscallError("splice", serr), true
		case n == 0:
			return written, nil, true // EOF
		}
		full := n >= defaultPipe
		m, err := drainPipe(wc, pr, n)
		written += m
		if err != nil {
			return written, err, true
		}
		if full && !tried {
			// Bulk data: a bigger pipe, now that it is empty.
			grown, tried = growPipe(pw), true
		}
	}
}

// drainPipe splices the n bytes in the pipe pr out to the connection wc;
// EAGAIN means its send buffer is full, and the poller waits for room.
func drainPipe(wc syscall.RawConn, pr int, n int64) (written int64, err error) {
	for n > 0 {
		var m int64
		var serr error
		werr := wc.Write(func(fd uintptr) bool {
			for {
				m, serr = unix.Splice(pr, nil, int(fd), nil, int(n), unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
				if serr != unix.EINTR {
					return serr != unix.EAGAIN
				}
			}
		})
		if m > 0 {
			written += m
			n -= m
		}
		switch {
		case werr != nil:
			return written, werr
		case serr != nil:
			return written, os.NewSyscallError("splice", serr)
		case m == 0:
			return written, os.NewSyscallError("splice", io.ErrNoProgress)
		}
	}
	return written, nil
}

// defaultPipe is the size a new pipe has (16 pages), unless the user is
// over pipe-user-pages-soft.
const defaultPipe = 16 * 4096

// streamSocket reports whether c is a socket splice(2) can read and write
// as a byte stream.
func streamSocket(c net.Conn) bool {
	switch c := c.(type) {
	case *net.TCPConn:
		return true
	case *net.UnixConn:
		return c.LocalAddr().Network() == "unix"
	}
	return false
}
