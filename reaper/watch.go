package reaper

import (
	"errors"
	"unsafe"

	"golang.org/x/sys/unix"
)

// watcher tells the engine that a child has something to report, at the
// kernel's pace: a goroutine blocked in waitid(P_ALL, WEXITED|WNOWAIT)
// is woken by the kernel directly when a child exits, with no signal
// delivered (SIGCHLD, the edge the engine used to wait for, travels the
// Go runtime's signal handler, its signal goroutine and the scheduler:
// about 90 % of the engine's CPU per orphan). WNOWAIT leaves the child
// waitable: the engine's loop stays the one wait owner (reap, wait4(-1,
// WNOHANG) until nothing is left), and tells the watcher when it has
// reaped, so that waitid does not report the same zombie again.
//
// The flags follow reap's: __WALL, and WSTOPPED in terminal mode, where
// reap's WUNTRACED consumes a stop the watcher reported (without it, a
// stopped child would never be reported, and never spin the watcher).
//
// The watcher waits for the first child before its first waitid (ECHILD
// would end it), and ends at ECHILD (the tree is empty: the engine is
// done) or when the engine stops it.
type watcher struct {
	flags int
	start chan struct{} // closed once the runner exists
	ready chan struct{} // a child is waitable, or none is left; buffered 1
	ack   chan struct{} // the engine reaped what ready announced
	stop  chan struct{} // closed when Run returns
}

func newWatcher(terminal bool) *watcher {
	w := &watcher{
		flags: unix.WEXITED | unix.WNOWAIT | unix.WALL,
		start: make(chan struct{}),
		ready: make(chan struct{}, 1),
		ack:   make(chan struct{}, 1),
		stop:  make(chan struct{}),
	}
	if terminal {
		w.flags |= unix.WSTOPPED
	}
	go w.run()
	return w
}

func (w *watcher) run() {
	select {
	case <-w.start:
	case <-w.stop:
		return
	}
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_ALL, 0, &info, w.flags, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		select {
		case w.ready <- struct{}{}:
		default: // one pending is enough: the engine reaps everything
		}
		if err != nil {
			// ECHILD: nothing is left below the engine (it learns so
			// from its own wait4). Anything else is not expected from
			// waitid with these arguments; the engine still has its
			// rescans and SIGCHLD (when not reset) to go on.
			return
		}
		select {
		case <-w.ack:
		case <-w.stop:
			return
		}
	}
}

// begin lets the watcher wait, once the runner exists.
func (w *watcher) begin() { close(w.start) }

// reaped tells the watcher the engine has reaped what it reported.
func (w *watcher) reaped() {
	select {
	case w.ack <- struct{}{}:
	default:
	}
}

// end stops the watcher when Run returns.
func (w *watcher) end() { close(w.stop) }

// defaultChildSignal sets SIGCHLD back to its default action once the
// watcher tells the engine about its children: the kernel then discards
// it at the sender, and an orphan's exit costs this process nothing but
// the watcher's wake-up and the wait4 that reaps it. Only a process that
// exists for the run does it (Config.OwnsProcess): a library caller may
// read Signals.Children. After the registration, which registers SIGCHLD:
// the Go runtime installed its handler at its start and does not install
// it again (os/signal's Notify only enables delivery to channels), so the
// default stays; SIGCHLD is reset to the default in the runner anyway.
func defaultChildSignal(s *Signals) {
	s.Wait()
	// struct kernel_sigaction: handler, flags, restorer, mask; SIG_DFL
	// is 0. rt_sigaction with sigsetsize 8, as the runtime does.
	var act [4]uint64
	_, _, _ = unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(unix.SIGCHLD), uintptr(unsafe.Pointer(&act[0])), 0, 8, 0, 0)
}
