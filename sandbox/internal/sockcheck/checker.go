package sockcheck

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/internal/seccomp"
)

// Checker answers the socket calls of a runner's filter (seccomp
// RunnerRules.NotifyAddresses). Make it with New before the runner starts
// (its worker threads are made then), give it the filter's listener with
// Serve, and Close it at teardown.
type Checker struct {
	pol  *resolved
	work chan *seccomp.Notif
	wg   sync.WaitGroup

	mu            sync.Mutex
	boundUnix     map[devIno]struct{}
	boundAbstract map[string]struct{}
	boundTCP      map[netip.AddrPort]struct{}

	// inflight holds the blocking connects and sends under way, by the
	// socket's inode: a call interrupted by a signal and restarted
	// (SA_RESTART) takes over the one its first notification started.
	imu      sync.Mutex
	inflight map[uint64]*inflight
	// pending holds duplicates of sockets whose path bind the kernel was
	// let make (bindPath) and that were not bound yet when looked at.
	pending []pendingBind

	stats struct {
		received, gone, adopted atomic.Int64
	}

	listener int // -1 until Serve
	file     *os.File
	done     chan struct{}
	once     sync.Once
	closed   chan struct{}
}

// maxBound caps each of the sets of what the tree bound, so a runner that
// binds without end cannot grow corral's memory without end: past it, a
// bind is refused.
const maxBound = 1 << 16

// New resolves p (each AllowUnix socket must exist now) and starts its
// workers, each on an OS thread of its own that it keeps until Close: made
// now, before the runner exists, so that checking never needs a new thread
// (DESIGN.md, Trap 14).
func New(p Policy) (*Checker, error) {
	r, err := resolve(p)
	if err != nil {
		return nil, err
	}
	n := p.Workers
	if n <= 0 {
		n = DefaultWorkers
	}
	c := &Checker{
		pol:           r,
		work:          make(chan *seccomp.Notif, n),
		boundUnix:     map[devIno]struct{}{},
		boundAbstract: map[string]struct{}{},
		boundTCP:      map[netip.AddrPort]struct{}{},
		inflight:      map[uint64]*inflight{},
		listener:      -1,
		done:          make(chan struct{}),
		closed:        make(chan struct{}),
	}
	ready := make(chan error, n)
	for range n {
		c.wg.Add(1)
		go c.worker(ready)
	}
	for range n {
		if err := <-ready; err != nil {
			c.stopWorkers()
			return nil, err
		}
	}
	return c, nil
}

// Serve takes ownership of listener (a filter's listener fd) and answers
// its notifications until the filter has no thread left or Close. It
// returns at once; Done is closed when it stops. The listener is read
// through the Go runtime's poller: waiting for a call costs no thread.
func (c *Checker) Serve(listener int) error {
	if c.listener >= 0 {
		return errors.New("sockcheck: Serve called twice")
	}
	if err := unix.SetNonblock(listener, true); err != nil {
		return fmt.Errorf("sockcheck: listener: %w", err)
	}
	c.listener = listener
	c.file = os.NewFile(uintptr(listener), "seccomp-listener")
	rc, err := c.file.SyscallConn()
	if err != nil {
		return fmt.Errorf("sockcheck: listener: %w", err)
	}
	go c.dispatch(rc)
	return nil
}

// Done is closed when Serve has stopped reading: every thread under the
// filter is gone, or Close was called.
func (c *Checker) Done() <-chan struct{} { return c.done }

// Close stops reading the listener, closes it (a filtered thread still
// running then gets ENOSYS for the calls the filter notifies), and ends
// the workers once they have answered what they hold. Their threads end
// with them.
func (c *Checker) Close() error {
	c.once.Do(func() {
		close(c.closed)
		if c.file != nil {
			c.file.Close()
			<-c.done
		}
		c.stopWorkers()
		c.mu.Lock()
		for _, p := range c.pending {
			unix.Close(p.fd)
		}
		c.pending = nil
		c.mu.Unlock()
	})
	return nil
}

func (c *Checker) stopWorkers() {
	close(c.work)
	c.wg.Wait()
}

func (c *Checker) dispatch(rc interface {
	Read(func(uintptr) bool) error
}) {
	defer close(c.done)
	for {
		var n *seccomp.Notif
		var stop bool
		err := rc.Read(func(fd uintptr) bool {
			ready, hangup, err := seccomp.Readable(int(fd))
			if err != nil || (hangup && !ready) {
				stop = true
				return true
			}
			if !ready {
				return false // wait for the poller
			}
			m := new(seccomp.Notif)
			switch err := seccomp.Receive(int(fd), m); {
			case err == nil:
				n = m
			case errors.Is(err, seccomp.ErrGone):
			default:
				stop = true
			}
			return true
		})
		if err != nil || stop {
			return
		}
		if n == nil {
			continue
		}
		c.stats.received.Add(1)
		select {
		case c.work <- n:
		case <-c.closed:
			return
		}
	}
}

// worker owns its OS thread for its whole life: locked before New
// returns, never handed back (it does nothing a thread could keep, but a
// thread returned to the runtime would be one more it may hand a P to
// while the runner fills pids.max, and one fewer the checker has).
func (c *Checker) worker(ready chan<- error) {
	defer c.wg.Done()
	runtime.LockOSThread()
	w, err := newWorkerState()
	ready <- err
	if err != nil {
		return
	}
	defer w.close()
	for n := range c.work {
		c.handle(w, n)
	}
}

// workerState is what one worker keeps open: its sock_diag socket.
type workerState struct {
	diag int
}

func newWorkerState() (*workerState, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, fmt.Errorf("sockcheck: sock_diag socket: %w", err)
	}
	return &workerState{diag: fd}, nil
}

func (w *workerState) close() { unix.Close(w.diag) }

// gone is the answer not to send: the notification died. answered: the
// notification was answered already (or will be, by the worker whose
// blocking call it took over).
const (
	gone     = unix.Errno(^uintptr(0) >> 1)
	answered = gone - 1
)

func (c *Checker) handle(w *workerState, n *seccomp.Notif) {
	val, errno := c.decide(w, n)
	if errno == answered {
		return
	}
	if errno == gone {
		c.stats.gone.Add(1)
		return
	}
	// ErrGone: the caller was interrupted or died meanwhile; any other
	// error leaves nothing to do either.
	if err := seccomp.Respond(c.listener, n.ID, val, errno); errors.Is(err, seccomp.ErrGone) {
		c.stats.gone.Add(1)
	}
}

func (c *Checker) report(r Refusal) {
	if c.pol.Report != nil {
		r.Reason = "corral's network policy: " + r.Reason
		c.pol.Report(r)
	}
}

func (c *Checker) valid(n *seccomp.Notif) bool { return seccomp.IDValid(c.listener, n.ID) }

func (c *Checker) validID(id uint64) bool { return seccomp.IDValid(c.listener, id) }
