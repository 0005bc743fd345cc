package sandbox

// --die-with-parent. corral's parent is held through a pidfd taken at
// corral's first instruction, and the pidfd becomes readable when that
// process exits, whichever of its threads forked corral (PR_SET_PDEATHSIG
// fires when the forking *thread* exits, bubblewrap #692, and would also
// have to be set on corral by its parent to be race-free). The parent is
// whichever process corral finds as its parent then, PID 1 of its
// namespace included: a container's init (catatonit, tini, docker and
// podman --init) and bubblewrap's are live parents, watched like any
// other. A parent that exited before that instant has already handed
// corral to a reaper, which cannot be told from one of those: that instant
// is the window docs/sandbox.md documents.
//
// The watch costs no OS thread: the pidfd is an os.File in the Go
// runtime's netpoller, and a goroutine parked on it waits in the epoll the
// runtime already does when it is idle. When the parent exits, the process
// that holds the watch (the engine's in subreaper mode, the host side in
// pidns mode, which the init's parent is) sends itself SIGTERM: the run is
// cancelled exactly as by SIGTERM, held until the runner exists, forwarded
// to the init in pidns mode. The Go runtime always catches SIGTERM (it
// keeps an inherited SIG_IGN only for SIGHUP and SIGINT), so a caller's
// nohup cannot make corral deaf to it.

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/corral-sh/corral/internal/proc"
	"github.com/corral-sh/corral/internal/setuperr"
	"github.com/corral-sh/corral/sandbox/internal/stage"
	"golang.org/x/sys/unix"
)

// ParentWatch is corral's parent process as found at corral's start.
type ParentWatch struct {
	pid  int      // getppid() at start
	file *os.File // pidfd on the parent, in the netpoller; nil when gone or err
	gone bool     // the parent had exited by the time its pidfd was opened
	err  error    // why the parent cannot be watched
}

// WatchParent takes hold of the calling process's parent. Call it first
// thing in main: anything before it is a window in which the parent may
// exit unseen.
func WatchParent() *ParentWatch {
	w := &ParentWatch{pid: unix.Getppid()}
	switch {
	case proc.PID1():
		w.err = errors.New("corral is PID 1 of its namespace: its parent is outside it and cannot be watched")
		return w
	case w.pid == 0:
		w.err = errors.New("corral's parent is outside its PID namespace (getppid() is 0), where corral cannot name it")
		return w
	}
	fd, err := unix.PidfdOpen(w.pid, 0)
	if errors.Is(err, unix.ESRCH) {
		w.gone = true
		return w
	}
	if err != nil {
		w.err = &setuperr.SetupError{Step: "pidfd_open on corral's parent", Err: err, Hint: "--die-with-parent needs pidfds (Linux 5.3 or later)"}
		return w
	}
	// The parent may have exited between getppid and pidfd_open, and its
	// pid been reused: only a parent that is still ours after the open is
	// the one the pidfd holds.
	if unix.Getppid() != w.pid {
		unix.Close(fd)
		w.gone = true
		return w
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		w.err = &setuperr.SetupError{Step: "watch corral's parent (pidfd)", Err: err}
		return w
	}
	w.file = os.NewFile(uintptr(fd), "pidfd of corral's parent")
	return w
}

// Close releases the pidfd when the watch is not wanted.
func (w *ParentWatch) Close() {
	if w != nil && w.file != nil {
		w.file.Close()
		w.file = nil
	}
}

// pollable checks that the Go runtime polls the pidfd: only such a
// descriptor can be waited on without a thread, and a deadline is refused
// for one it does not poll.
func (w *ParentWatch) pollable() error {
	if err := w.file.SetReadDeadline(time.Time{}); err != nil {
		return fmt.Errorf("the Go runtime cannot poll the pidfd of corral's parent: %w", err)
	}
	return nil
}

// watch starts the watch of --die-with-parent, in the process p.
func (w *ParentWatch) watch(p *stage.Proc) error {
	if w.err != nil {
		var s *setuperr.SetupError
		if errors.As(w.err, &s) {
			return s
		}
		return &setuperr.SetupError{Step: "--die-with-parent", Err: setuperr.Plain(w.err.Error())}
	}
	p.Signals() // SIGTERM must be caught before it is sent
	cancel := func(why string) {
		p.Logf("%s: cancelling the run as by SIGTERM", why)
		_ = unix.Kill(os.Getpid(), unix.SIGTERM)
	}
	if w.gone {
		cancel(fmt.Sprintf("corral's parent (pid %d) exited as corral started", w.pid))
		return nil
	}
	if err := w.pollable(); err != nil {
		return &setuperr.SetupError{Step: "watch corral's parent", Err: err}
	}
	rc, err := w.file.SyscallConn()
	if err != nil {
		return &setuperr.SetupError{Step: "watch corral's parent", Err: err}
	}
	p.Logf("--die-with-parent: watching corral's parent, pid %d", w.pid)
	go func() {
		exited := false
		err := rc.Read(func(fd uintptr) bool {
			// A pidfd has nothing to read; it polls readable once the
			// process has exited. Not readable yet: back to the poller.
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(pfd, 0)
			if errors.Is(err, unix.EINTR) {
				return false
			}
			exited = n > 0
			if err != nil {
				p.Logf("--die-with-parent: poll the parent's pidfd: %v; no longer watching", err)
				return true
			}
			return exited
		})
		if err != nil {
			p.Logf("--die-with-parent: wait for the parent's pidfd: %v; no longer watching", err)
		}
		if exited {
			cancel(fmt.Sprintf("corral's parent (pid %d) exited", w.pid))
		}
	}()
	return nil
}
