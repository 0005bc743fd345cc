package reaper

import (
	"errors"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// watcher reaps the engine's children at the kernel's pace: a goroutine
// blocked in waitid(P_ALL, WEXITED|WNOWAIT) is woken by the kernel
// directly when a child exits, with no signal delivered (SIGCHLD, the edge
// the engine used to wait for, travels the Go runtime's signal handler,
// its signal goroutine and the scheduler: about 90 % of the engine's CPU
// per orphan). It reaps the child it was told of itself, with wait4 on
// that pid, queues the status for the engine and waits again at once.
//
// While the runner runs, an orphan's exit asks nothing of the engine but
// a line in its books, which the state's next refresh needs (observe
// takes the queue first): the watcher wakes the engine only once the
// queue holds queueBatch exits, which bounds its memory. Each wake-up of
// the engine is a switch between threads, and on a virtual machine the
// switches were most of what an orphan still cost. From the teardown on
// (eager), each exit may hand the engine children to signal, and the
// watcher wakes it for every one.
//
// mu makes the engine's reap and the watcher's one wait owner between
// them: the engine holds it while it takes the queue and runs its own
// wait4 loop, so ECHILD there means nothing is left, not that the
// watcher holds a status it has not queued yet.
//
// The runner is the exception: its pid is what the engine signals by
// number (forwarded signals, job control), and it must stay the runner's
// until the engine has accounted its exit, so the watcher leaves it to
// the engine's own wait4 and waits for the engine to say it has reaped
// (WNOWAIT would otherwise report the same zombie again). The same holds
// for the runner's stops in terminal mode, which reap's WUNTRACED
// consumes.
//
// The flags follow reap's: __WALL, and WSTOPPED in terminal mode.
//
// The watcher waits for the first child before its first waitid (ECHILD
// would end it), and ends at ECHILD (the tree is empty: the engine is
// done) or when the engine stops it.
type watcher struct {
	flags     int // waitid's
	reapFlags int // wait4's, for the pid waitid reported
	runner    int // set by begin
	eager     atomic.Bool

	mu      sync.Mutex
	pending []exit // reaped by the watcher, not yet taken by the engine

	start chan struct{} // closed once the runner exists
	ready chan struct{} // something is queued, or the runner is waitable; buffered 1
	ack   chan struct{} // the engine reaped the runner's report
	stop  chan struct{} // closed when Run returns
}

// exit is one wait4 result.
type exit struct {
	pid    int
	status unix.WaitStatus
}

func newWatcher(terminal bool) *watcher {
	w := &watcher{
		flags:     unix.WEXITED | unix.WNOWAIT | unix.WALL,
		reapFlags: unix.WNOHANG | unix.WALL,
		start:     make(chan struct{}),
		ready:     make(chan struct{}, 1),
		ack:       make(chan struct{}, 1),
		stop:      make(chan struct{}),
	}
	if terminal {
		w.flags |= unix.WSTOPPED
		w.reapFlags |= unix.WUNTRACED
	}
	go w.run()
	return w
}

// siginfo is the head of the kernel's siginfo_t for SIGCHLD: waitid
// fills si_pid, which x/sys/unix's Siginfo keeps in an unexported union.
type siginfo struct {
	signo, errno, code, _ int32
	pid                   int32
	_                     [108]byte
}

// The two must have the same size: waitid writes all of unix.Siginfo.
var _ [0]byte = [unsafe.Sizeof(siginfo{}) - unsafe.Sizeof(unix.Siginfo{})]byte{}

func (w *watcher) run() {
	select {
	case <-w.start:
	case <-w.stop:
		return
	}
	var info siginfo
	for {
		err := unix.Waitid(unix.P_ALL, 0, (*unix.Siginfo)(unsafe.Pointer(&info)), w.flags, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			// ECHILD: nothing is left below the engine (it learns so
			// from its own wait4). Anything else is not expected from
			// waitid with these arguments; the engine still has its
			// rescans and SIGCHLD (when not reset) to go on.
			w.notify()
			return
		}
		pid := int(info.pid)
		if pid != w.runner {
			if queued := w.reapOne(pid); queued >= queueBatch || w.eager.Load() {
				w.notify()
			}
			continue
		}
		w.notify()
		select {
		case <-w.ack:
		case <-w.stop:
			return
		}
	}
}

// queueBatch is how many exits the watcher queues before it wakes the
// engine while the runner runs: 4 KiB of queue.
const queueBatch = 256

// reapOne reaps the child waitid reported and queues its status; it
// returns the queue's length. The engine may have reaped the child first
// (its wait4 loop runs between waitid and the lock): then there is
// nothing to reap, and the pid, if a new child took it since, is that
// child's, reaped only if it has exited.
func (w *watcher) reapOne(pid int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(pid, &ws, w.reapFlags, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err == nil && got == pid {
			w.pending = append(w.pending, exit{pid, ws})
		}
		return len(w.pending)
	}
}

func (w *watcher) notify() {
	select {
	case w.ready <- struct{}{}:
	default: // one pending is enough: the engine takes the whole queue
	}
}

// take appends the queued exits to out and empties the queue; the caller
// holds mu.
func (w *watcher) take(out []exit) []exit {
	out = append(out, w.pending...)
	clear(w.pending)
	w.pending = w.pending[:0]
	return out
}

// begin lets the watcher wait, once the runner exists.
func (w *watcher) begin(runner int) {
	w.runner = runner
	close(w.start)
}

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
