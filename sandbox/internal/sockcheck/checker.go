package sockcheck

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/internal/seccomp"
)

// Checker answers the socket calls of a runner's filter (seccomp
// RunnerRules.NotifyAddresses). Make it with New before the runner starts
// (its worker threads are made then), give it the filter's listener with
// Serve, and Close it at teardown.
type Checker struct {
	pol *resolved

	mu            sync.Mutex
	boundUnix     map[devIno]struct{}
	boundAbstract map[string]struct{}
	// abstractBytes is the length of the names in boundAbstract, which
	// maxAbstractBytes bounds.
	abstractBytes int
	boundTCP      map[netip.AddrPort]struct{}

	// inflight holds the blocking connects and sends under way, by the
	// socket's inode: a call interrupted by a signal and restarted
	// (SA_RESTART) takes over the one its first notification started.
	imu      sync.Mutex
	inflight map[uint64]*inflight
	// lost holds, by the socket's inode, a blocking call that completed
	// while its caller was interrupted (its answer found no one): the
	// restarted call (SA_RESTART) gets that result, as the kernel's own
	// restart would, instead of a second connect (EISCONN) or a second
	// send of the same bytes. Bounded (keepLost): a caller interrupted
	// without SA_RESTART never comes back for its entry.
	lost map[uint64]lostCall
	seed maphash.Seed // keys the lostCall digests
	// pending holds duplicates of sockets whose path bind the kernel was
	// let make (bindPath) and that were not bound yet when looked at.
	pending []pendingBind

	// mountNamed: a mounting sandbox was named (report.go), once a run.
	mountNamed atomic.Bool

	// static holds the tree's credentials once read, under
	// Policy.StaticCreds (creds.go).
	static atomic.Pointer[creds]

	stats struct {
		received, gone, adopted atomic.Int64
	}

	listener int           // -1 until Serve
	serve    chan struct{} // closed by Serve (or Close)
	alive    atomic.Int32  // workers not ended
	closing  atomic.Bool
	done     chan struct{}
	once     sync.Once
}

// What the checker keeps per runner action is capped in count and in
// bytes (DESIGN.md, "Memory a runner can make corral hold"; SPEC: no
// corral process grows past 64 MiB whatever the runner does):
//
//   - each set of what the tree bound holds at most maxBound entries, past
//     which a bind is refused: an inode (16 bytes) or an address (32) per
//     entry, an abstract name (at most 107 bytes) too, with their length
//     summed below maxAbstractBytes — at most ~10 MiB for the three, map
//     overhead included;
//   - sockets let bind a path and not looked at yet (pending) hold a
//     descriptor each, at most maxPending, and go after pendingFor;
//   - a blocking call whose answer found no one (lost) keeps a digest of
//     what it sent, never the bytes, at most maxLost entries, each gone
//     after lostFor;
//   - the blocking calls under way (inflight) are one per worker at most;
//   - a call's copied data lives in its worker's buffer, reused from call
//     to call: at most maxSend per worker.
const (
	maxBound         = 1 << 16
	maxAbstractBytes = 1 << 20
	maxPending       = 1 << 10
	maxLost          = 1 << 8
)

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
		boundUnix:     map[devIno]struct{}{},
		boundAbstract: map[string]struct{}{},
		boundTCP:      map[netip.AddrPort]struct{}{},
		inflight:      map[uint64]*inflight{},
		lost:          map[uint64]lostCall{},
		seed:          maphash.MakeSeed(),
		listener:      -1,
		serve:         make(chan struct{}),
		done:          make(chan struct{}),
	}
	ready := make(chan error, n)
	c.alive.Store(int32(n))
	for range n {
		go c.worker(ready)
	}
	var first error
	for range n {
		if err := <-ready; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		c.Close()
		return nil, first
	}
	return c, nil
}

// Serve takes ownership of listener (a filter's listener fd) and answers
// its notifications until the filter has no thread left, or Close. It
// returns at once; Done is closed when every worker has stopped reading.
func (c *Checker) Serve(listener int) error {
	if c.listener >= 0 {
		return errors.New("sockcheck: Serve called twice")
	}
	c.listener = listener
	// Best effort: a kernel before 6.6 lacks it.
	_ = seccomp.SetSyncWakeUp(listener)
	close(c.serve)
	return nil
}

// Done is closed when the workers have stopped reading: every thread
// under the filter is gone, or Close was called.
func (c *Checker) Done() <-chan struct{} { return c.done }

// Close stops the checker and closes the listener. A worker waiting in
// the kernel for a call ends when the filter's last thread is gone (at
// teardown, when the tree is killed), and Close waits for that up to
// closeWait; past it, it returns and leaves the worker to end with the
// process (a filtered thread still running then gets ENOSYS for the
// calls the filter notifies, once the last worker is gone).
func (c *Checker) Close() error {
	c.once.Do(func() {
		c.closing.Store(true)
		select {
		case <-c.serve:
		default:
			close(c.serve) // never served: the workers end now
		}
		select {
		case <-c.done:
		case <-time.After(closeWait):
		}
		c.mu.Lock()
		for _, p := range c.pending {
			unix.Close(p.fd)
		}
		c.pending = nil
		c.mu.Unlock()
	})
	return nil
}

const closeWait = 2 * time.Second

// worker owns its OS thread for its whole life: locked before New
// returns, and never handed back to the runtime while the runner may
// run. It waits for a call in the kernel itself (SECCOMP_IOCTL_NOTIF_RECV
// on the listener, which the kernel hands to one waiting reader each), so
// a check costs no hop through the Go scheduler, and no goroutine of the
// checker ever sits in the runtime's poller or needs a thread it lacks.
func (c *Checker) worker(ready chan<- error) {
	runtime.LockOSThread()
	w, err := newWorkerState()
	ready <- err
	if err != nil {
		c.workerDone()
		return
	}
	defer c.workerDone()
	defer w.close()
	<-c.serve
	if c.listener < 0 {
		return
	}
	for !c.closing.Load() {
		n := new(seccomp.Notif)
		err := seccomp.Receive(c.listener, n)
		if c.closing.Load() {
			if err == nil { // answer what was taken: refuse it
				seccomp.Respond(c.listener, n.ID, 0, unix.ENOSYS)
			}
			return
		}
		if err != nil {
			// ErrGone: a call died before it was read, or the filter has
			// no thread left (then the kernel says so at once, every
			// time); anything else: the listener is unusable.
			_, hangup, perr := seccomp.Readable(c.listener)
			if !errors.Is(err, seccomp.ErrGone) || hangup || perr != nil {
				return
			}
			continue
		}
		c.stats.received.Add(1)
		if err := c.handleGuarded(w, n); err != nil {
			return // this worker's thread cannot be trusted: it ends
		}
	}
}

// handleGuarded is handle, with a bug of corral's that panics on some
// call the runner made turned into a refusal of that call (EACCES: the
// boundary fails closed), named once on stderr, and the end of this worker
// (its thread may be left as the caller's): without it the panic would
// take corral or the init down, stack trace and all, and the runner's
// tree with them. The other workers go on.
func (c *Checker) handleGuarded(w *workerState, n *seccomp.Notif) (err error) {
	defer func() {
		if r := recover(); r != nil {
			seccomp.Respond(c.listener, n.ID, 0, unix.EACCES)
			if c.pol.Report != nil {
				c.pol.Report(Refusal{Tid: int(n.Pid), Call: fmt.Sprintf("system call %d", n.Data.Nr), Kind: "internal",
					Reason: fmt.Sprintf("corral's socket checker failed on it (%v); the call was refused; please report this", r)})
			}
			err = fmt.Errorf("sockcheck: internal error: %v", r)
		}
	}()
	return c.handle(w, n)
}

// workerDone counts a worker out; the last one closes the listener and
// Done.
func (c *Checker) workerDone() {
	if c.alive.Add(-1) == 0 {
		if c.listener >= 0 {
			unix.Close(c.listener)
		}
		close(c.done)
	}
}

// workerState is what one worker keeps open: its sock_diag socket.
type workerState struct {
	diag int
	// pidfd is a thread pidfd of pidfdTid, the last thread whose socket
	// call this worker checked (pidfdOf); -1: none.
	pidfd, pidfdTid int
	noThreadPidfd   bool // no PIDFD_THREAD here: an older kernel, or a profile that refuses it
	// buf holds the data a sendto copies, reused from call to call so
	// that a flood of large sends costs each worker one buffer, not a
	// garbage heap (grown to maxSend at most).
	buf []byte
	// The thread's own credentials (creds.go), taken back after each
	// call made as the caller: own, with the permitted and inheritable
	// capability sets capset must repeat; fsOwn: the thread has an
	// fs_struct of its own (its umask is its own); changed: asCaller ran
	// since the last asSelf.
	own                    creds
	permitted, inheritable uint64
	fsOwn, changed         bool
	caller                 *creds // what asCaller took on
	broken                 error  // asSelf failed: the worker must end
	// What asCaller changed, for asSelf to undo.
	groupsChanged, idsChanged, umaskChanged, capsChanged bool
	status                                               []byte // readCreds' buffer
	// done is the blocking call this worker completed for the
	// notification it handles now, if any (blocking).
	done *lostCall
}

func newWorkerState() (*workerState, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, fmt.Errorf("sockcheck: sock_diag socket: %w", err)
	}
	w := &workerState{diag: fd, pidfd: -1}
	if err := w.initCreds(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return w, nil
}

func (w *workerState) close() {
	unix.Close(w.diag)
	w.dropPidfd()
}

// pidfdOf is a pidfd for thread tid's socket calls (decide), the one kept
// from its last call if the same thread calls again, as a client making
// connection after connection does: pidfd_open and its close were two of
// the sixteen system calls of a checked connect. Only a thread's own
// pidfd (PIDFD_THREAD) is kept: it never comes to mean another thread
// (pidfd_getfd through it fails with ESRCH once its thread is gone, and
// getFD then opens a fresh one), where a process's could, should its tid
// go to a thread of another process while it lives. kept says the caller
// must not close it.
func (w *workerState) pidfdOf(tid int) (pidfd int, kept bool, err error) {
	if w.pidfd >= 0 && w.pidfdTid == tid {
		return w.pidfd, true, nil
	}
	if !w.noThreadPidfd {
		fd, err := seccomp.OpenThreadPidfd(tid)
		if err == nil {
			w.dropPidfd()
			w.pidfd, w.pidfdTid = fd, tid
			return fd, true, nil
		}
		if errors.Is(err, unix.ESRCH) {
			return -1, false, err // the thread is gone
		}
		// EINVAL: a kernel before 6.9. Any other error (EPERM from a
		// container's seccomp profile that admits pidfd_open with no
		// flags only, say): a process's pidfd, opened for each call,
		// works where that works.
		w.noThreadPidfd = true
	}
	fd, err := seccomp.OpenProcessPidfd(tid)
	return fd, false, err
}

// dropPidfd closes the kept pidfd.
func (w *workerState) dropPidfd() {
	if w.pidfd >= 0 {
		unix.Close(w.pidfd)
		w.pidfd = -1
	}
}

// getFD duplicates the caller's descriptor fd through pidfd (pidfdOf's):
// through a kept one whose thread is gone (ESRCH: the tid is another
// thread's now), once more through a fresh one.
func (w *workerState) getFD(tid, pidfd int, kept bool, fd int) (int, int, error) {
	nfd, err := seccomp.GetFD(pidfd, fd)
	if err == nil || !kept || !errors.Is(err, unix.ESRCH) {
		return nfd, pidfd, err
	}
	w.dropPidfd()
	pidfd, _, err = w.pidfdOf(tid)
	if err != nil {
		return -1, -1, err
	}
	nfd, err = seccomp.GetFD(pidfd, fd)
	return nfd, pidfd, err
}

// gone is the answer not to send: the notification died. answered: the
// notification was answered already (or will be, by the worker whose
// blocking call it took over).
// proceed: let the call run as the caller made it (CONTINUE), for a
// call the checker only names (Policy.ReportFS, mounts). protected:
// under ReportFS, a write the checker refuses itself (EROFS), since what
// it reaches is a protected path no mount may hold (report.go).
const (
	gone      = unix.Errno(^uintptr(0) >> 1)
	answered  = gone - 1
	proceed   = gone - 2
	protected = gone - 3
)

func (c *Checker) handle(w *workerState, n *seccomp.Notif) error {
	w.done = nil
	val, errno := c.decide(w, n)
	if err := w.asSelf(); err != nil {
		// Refuse this call before the worker ends.
		if errno == proceed {
			seccomp.RespondContinue(c.listener, n.ID)
		} else if errno != answered && errno != gone {
			seccomp.Respond(c.listener, n.ID, 0, unix.EACCES)
		}
		return err
	}
	if errno == answered {
		return nil
	}
	if errno == gone {
		c.stats.gone.Add(1)
		return nil
	}
	if errno == proceed {
		if err := seccomp.RespondContinue(c.listener, n.ID); errors.Is(err, seccomp.ErrGone) {
			c.stats.gone.Add(1)
		}
		return nil
	}
	// ErrGone: the caller was interrupted or died meanwhile; any other
	// error leaves nothing to do either.
	if err := seccomp.Respond(c.listener, n.ID, val, errno); errors.Is(err, seccomp.ErrGone) {
		c.stats.gone.Add(1)
		if d := w.done; d != nil && errno == 0 {
			d.val, d.at = val, time.Now()
			c.keepLost(*d)
		}
	}
	return nil
}

// lostCall is a completed blocking call whose answer found no caller. It
// keeps a digest of the call (kind, address, data), not the data itself:
// a restart is told by the same digest, and an interrupted 4 MiB send
// costs corral some 50 bytes, not 4 MiB. The digest is keyed with a seed
// the runner never sees (maphash, 64 bits), so it cannot make two calls
// that collide; a chance collision would only hand a restart the result
// of the call it repeats. (Not crypto/sha256: its package initialisers
// would run at every launch of corral, test/layout_test.go.)
type lostCall struct {
	ino uint64
	sum uint64
	val int64
	at  time.Time
}

// lostFor is how long a lost result waits for its restarted call: a
// restart follows the signal handler at once.
const lostFor = 5 * time.Second

// callDigest is what tells a restarted call from another: its kind, its
// address and its data.
func (c *Checker) callDigest(kind seccomp.SocketCall, addr, data []byte) uint64 {
	var h maphash.Hash
	h.SetSeed(c.seed)
	var hdr [9]byte
	hdr[0] = byte(kind)
	binary.NativeEndian.PutUint64(hdr[1:], uint64(len(addr)))
	h.Write(hdr[:])
	h.Write(addr)
	h.Write(data)
	return h.Sum64()
}

// keepLost records d for its restart, within maxLost: expired entries go
// first, then, still full, the oldest (a restart that finds nothing makes
// the call again, which is what a caller interrupted without SA_RESTART
// never asks for anyway).
func (c *Checker) keepLost(d lostCall) {
	c.imu.Lock()
	defer c.imu.Unlock()
	if _, ok := c.lost[d.ino]; !ok && len(c.lost) >= maxLost {
		var oldest uint64
		var at time.Time
		for ino, l := range c.lost {
			if d.at.Sub(l.at) >= lostFor {
				delete(c.lost, ino)
				continue
			}
			if at.IsZero() || l.at.Before(at) {
				oldest, at = ino, l.at
			}
		}
		if len(c.lost) >= maxLost {
			delete(c.lost, oldest)
		}
	}
	c.lost[d.ino] = d
}

func (c *Checker) report(r Refusal) {
	if c.pol.Report != nil {
		r.Reason = "corral's network policy: " + r.Reason
		c.pol.Report(r)
	}
}

func (c *Checker) valid(n *seccomp.Notif) bool { return seccomp.IDValid(c.listener, n.ID) }

func (c *Checker) validID(id uint64) bool { return seccomp.IDValid(c.listener, id) }
