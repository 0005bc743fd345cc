package stage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"syscall"

	"github.com/corral-sh/corral/internal/setuperr"
	"github.com/corral-sh/corral/internal/stagearg"
	"github.com/corral-sh/corral/internal/wire"
	"golang.org/x/sys/unix"
)

// The argv[0] of each re-executed role: names no user types by accident.
// A stage's argv[1] is its socket's descriptor number.
const (
	InitArg0  = stagearg.Init
	ExecArg0  = stagearg.Exec
	ProbeArg0 = stagearg.Probe
)

// The stage protocol: how corral talks to the copies of itself it starts
// for the roles that need a fresh process (the pidns init, the exec stage,
// the probe child). A stage gets one socket, placed above every descriptor
// the caller passed (Files) and named by its argv[1], so that the caller's
// descriptors keep their numbers; it makes the socket close-on-exec at
// once. Its parent sends one start message; the stage answers with its
// ready kind, with its failed kind, or, for the exec stage, with nothing at
// all: the socket closes when execve succeeds, and the parent reads EOF.
// In terminal mode the init keeps its socket after ready and reports each
// stop of the runner's group. Messages are wire frames, so arguments,
// environment and paths cross byte for byte.

// Link is one end of a stage's socket.
type Link struct {
	rw      io.ReadWriteCloser // the socket (a *unixSock); any stream in tests
	sendMu  sync.Mutex         // one frame at a time: the init reports stops and answers requests from two goroutines
	sendErr error              // the start message did not get through: the stage died first
	// For the stage's end: what it answers with (Ready, Fail).
	ready, failed Kind
	calls         calls // call.go
}

func (l *Link) Close() error { return l.rw.Close() }

// Current returns the role this process was started as (its argv[0]) when
// it is one of the copies corral starts of itself, else "".
func Current() string {
	role := stagearg.Current()
	if role == "" {
		return ""
	}
	if _, err := socketFD(); err != nil {
		return ""
	}
	return role
}

func socketFD() (int, error) {
	fd, err := strconv.Atoi(os.Args[1])
	if err != nil || fd < 3 {
		return 0, fmt.Errorf("stage socket %q is not a descriptor above stderr", os.Args[1])
	}
	return fd, nil
}

// encode checks that payload is what the table says kind k carries, and
// encodes it.
func encode(k Kind, payload any) ([]byte, error) {
	m, ok := Lookup(k)
	if !ok {
		return nil, fmt.Errorf("send message kind %d: not in the table", byte(k))
	}
	if m.New == nil {
		if payload != nil {
			return nil, fmt.Errorf("send %s: it carries no payload, got %T", m.Name, payload)
		}
		return nil, nil
	}
	want := reflect.TypeOf(m.New()).Elem()
	if t := reflect.TypeOf(payload); t != want && t != reflect.PointerTo(want) {
		return nil, fmt.Errorf("send %s: its payload is a %s, got %T", m.Name, want, payload)
	}
	data, err := wire.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", m.Name, err)
	}
	return data, nil
}

// Spawn starts the corral binary as the stage arg0, sends it start as a
// message of kind kind, and returns its pid and the parent's end of the
// link. It does not wait for the stage: whoever owns wait4 reaps it. The
// stage's own environment is this process's unless attr.Env is set; what
// the runner gets travels in start. caller says which descriptors must
// keep their numbers in the stage.
func Spawn(arg0 string, kind Kind, start any, attr syscall.ProcAttr, caller Caller) (int, *Link, error) {
	payload, err := encode(kind, start)
	if err != nil {
		return 0, nil, fmt.Errorf("the %s start message: %w", arg0, err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, nil, fmt.Errorf("socketpair for %s: %w", arg0, err)
	}
	sock, err := newUnixSock(fds[0], "stage link")
	if err != nil {
		unix.Close(fds[1])
		return 0, nil, err
	}
	link := &Link{rw: sock}
	fds[1] = liftAbove(fds[1], caller)
	files, at := Files(caller, fds[1])
	attr.Files = files
	if attr.Env == nil {
		attr.Env = os.Environ()
	}
	// /proc/self/exe names the running binary even if its path was
	// replaced or removed since corral started.
	pid, err := syscall.ForkExec("/proc/self/exe", []string{arg0, strconv.Itoa(at)}, &attr)
	unix.Close(fds[1])
	if err != nil {
		link.Close()
		return 0, nil, err
	}
	// The stage reads its start message before anything else, so a message
	// larger than the socket buffer only waits for that; a stage that died
	// first makes this fail with EPIPE, reported by AwaitReply.
	link.sendErr = wire.WriteFrame(link.rw, byte(kind), payload)
	return pid, link, nil
}

// Files places a stage's socket sock where it lands on none of the
// caller's descriptors, and returns the child's descriptor table and the
// socket's number there.
//
// Go's ForkExec puts Files[i] at descriptor i of the child, leaves every
// number past the table as the fork left it, and moves what it must
// shuffle (its error pipe, any Files[i] < i) to numbers past both the
// table's length and the highest descriptor it was given. The caller's
// descriptors are not close-on-exec in this process (Caller), so the
// child inherits each at its number without an entry in the table. So
// when sock is above the caller's highest descriptor (Spawn lifts it
// there), the table is short: 0 to 2 and the caller's descriptors
// below the first free number as they are (Files[i] = i), and the socket
// at that free number; nothing ForkExec moves can land on a caller's
// descriptor, all of which are below sock. The child then makes one
// system call per entry, however high the caller's descriptors go (a
// shell that passed fd 251 cost 246 close(2) calls with a table that ran
// up to it).
//
// With sock at or below the caller's highest descriptor (lifting it
// failed: RLIMIT_NOFILE reaches no higher), the socket goes above the
// caller's highest descriptor instead and the table covers every number
// up to it, the caller's at their numbers and every other closed in the
// child (corral's own, close-on-exec anyway): ForkExec's moves then go
// past the caller's highest too.
func Files(caller Caller, sock int) ([]uintptr, int) {
	high := 2
	if n := len(caller.FDs); n > 0 {
		high = caller.FDs[n-1]
	}
	if sock > high {
		at := 3
		for _, fd := range caller.FDs {
			if fd != at {
				break
			}
			at++
		}
		files := make([]uintptr, at+1)
		for i := range at {
			files[i] = uintptr(i)
		}
		files[at] = uintptr(sock)
		return files, at
	}
	at := high + 1
	files := make([]uintptr, at+1)
	for i := range files {
		files[i] = ^uintptr(0) // closed in the child
	}
	files[0], files[1], files[2] = 0, 1, 2
	for _, fd := range caller.FDs {
		files[fd] = uintptr(fd)
	}
	files[at] = uintptr(sock)
	return files, at
}

// liftAbove returns sock, or a close-on-exec duplicate of it above the
// caller's highest descriptor (closing sock), for Files' short table.
// Where the duplicate cannot be made (the number is past RLIMIT_NOFILE),
// sock stays, and Files falls back to the long table.
func liftAbove(sock int, caller Caller) int {
	n := len(caller.FDs)
	if n == 0 || sock > caller.FDs[n-1] {
		return sock
	}
	up, err := unix.FcntlInt(uintptr(sock), unix.F_DUPFD_CLOEXEC, caller.FDs[n-1]+1)
	if err != nil {
		return sock
	}
	unix.Close(sock)
	return up
}

// Receive reads one message at step s and decodes its payload (nil for a
// kind without one). A clean end of the stream is io.EOF, as it is; a kind
// the table does not know, or one that s does not take, is a *SetupError
// that names it: the launch ends with 125, nothing is skipped. On an end
// that makes Calls, a Reply is handed to the Call that waits for it, and
// Receive reads on: whoever follows the other end need not know who asked
// what.
func (l *Link) Receive(s Step) (Kind, any, error) {
	for {
		k, payload, err := l.receiveOne(s)
		if err != nil {
			l.calls.end(err)
			return k, payload, err
		}
		if r, ok := payload.(Reply); ok && l.calls.answer(r) {
			continue
		}
		return k, payload, nil
	}
}

func (l *Link) receiveOne(s Step) (Kind, any, error) {
	b, data, err := wire.ReadFrame(l.rw)
	if err == io.EOF {
		return 0, nil, io.EOF
	}
	if err != nil {
		return 0, nil, fmt.Errorf("read %s: %w", s, err)
	}
	k := Kind(b)
	m, known := Lookup(k)
	if !known {
		return k, nil, &setuperr.SetupError{Step: "stage protocol: " + s.String(), Err: &ProtocolError{Kind: k}}
	}
	if !slices.Contains(steps[s].Accept, k) {
		return k, nil, &setuperr.SetupError{Step: "stage protocol: " + s.String(), Err: &ProtocolError{Kind: k, Want: steps[s].Accept}}
	}
	if m.New == nil {
		if len(data) != 0 {
			return k, nil, fmt.Errorf("decode %s: %w: it carries no payload, got %d bytes", m.Name, wire.ErrMalformed, len(data))
		}
		return k, nil, nil
	}
	payload := m.New()
	if err := wire.Unmarshal(data, payload); err != nil {
		return k, nil, fmt.Errorf("decode %s: %w", m.Name, err)
	}
	if c, ok := payload.(Carrier); ok {
		if err := l.takeFDs(m, c); err != nil {
			return k, nil, err
		}
	}
	return k, payload, nil
}

// takeFDs gives c the descriptors that came with its frame.
func (l *Link) takeFDs(m Message, c Carrier) error {
	n := c.FDCount()
	if n == 0 {
		return nil
	}
	sock, ok := l.rw.(*unixSock)
	if !ok {
		return fmt.Errorf("decode %s: it carries %d descriptors, and this link is no socket", m.Name, n)
	}
	fds, ok := sock.take(n)
	if !ok {
		return fmt.Errorf("decode %s: %w: it carries %d descriptors, fewer came", m.Name, wire.ErrMalformed, n)
	}
	c.SetFDs(fds)
	return nil
}

// ProtocolError is a message its receiver does not take: a kind the table
// does not know, or one out of order at its step. The launch ends with
// exit status 125 (exitstatus.Setup); no fallback, and nothing is skipped.
type ProtocolError struct {
	Kind Kind
	Want []Kind // nil: the kind is unknown
}

func (e *ProtocolError) Error() string {
	m, known := Lookup(e.Kind)
	if !known {
		return fmt.Sprintf("unknown message kind %d", byte(e.Kind))
	}
	return fmt.Sprintf("message %s (%s → %s) out of order: want %s", m.Name, m.From, m.To, kindNames(e.Want))
}

// IsProtocolError reports whether err is, or wraps, a *ProtocolError.
func IsProtocolError(err error) bool {
	var p *ProtocolError
	return errors.As(err, &p)
}

func kindNames(ks []Kind) string {
	s := ""
	for i, k := range ks {
		if i > 0 {
			s += " or "
		}
		s += k.String()
	}
	return s
}

// AwaitReply reads the stage's answer at s. ready is true after the
// stage's ready kind; its failed kind comes back as its *SetupError.
// Neither, with a nil error, means the stage closed its end without a
// word: for the exec stage, that its execve succeeded; for the others,
// that it died.
func (l *Link) AwaitReply(s Step) (ready bool, err error) {
	return l.AwaitReplyWith(s, nil)
}

// AwaitReplyWith is AwaitReply where the stage may first send messages
// that are not its answer (the step's interim kinds: the init's
// NetListeners, the exec stage's Listener): each goes to interim, whose
// error ends the wait.
func (l *Link) AwaitReplyWith(s Step, interim func(Kind, any) error) (ready bool, err error) {
	k, payload, err := l.Receive(s)
	for err == nil && slices.Contains(steps[s].interim, k) {
		if interim == nil {
			return false, &setuperr.SetupError{Step: "stage protocol: " + s.String(), Err: &ProtocolError{Kind: k, Want: answers(s)}}
		}
		if err = interim(k, payload); err != nil {
			return false, err
		}
		k, payload, err = l.Receive(s)
	}
	switch {
	case err == io.EOF && l.sendErr != nil:
		return false, fmt.Errorf("the stage ended before it read its start message: %w", l.sendErr)
	case err == io.EOF:
		return false, nil
	case err != nil:
		return false, err
	}
	if f, ok := payload.(*Failure); ok {
		return false, f.SetupError()
	}
	return true, nil
}

// Open is the stage's side of Spawn: it takes its socket out of the
// descriptors the runner will get, makes it close-on-exec (so that a
// successful execve reads as EOF on the other end, and no child of the
// stage inherits it), and reads the start message at s. It returns the
// link, what this process inherited less the socket, and the start's
// payload. A nil link means there is no one to report to.
func Open(s Step) (*Link, Caller, any, error) {
	caller := Inherited()
	fd, err := socketFD()
	if err != nil {
		return nil, caller, nil, err
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
		return nil, caller, nil, fmt.Errorf("stage socket %d: %w", fd, err)
	}
	caller = caller.without(fd)
	sock, err := newUnixSock(fd, "stage link")
	if err != nil {
		return nil, caller, nil, err
	}
	link := &Link{rw: sock, ready: steps[s].ready, failed: steps[s].failed}
	_, start, err := link.Receive(s)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		var setup *setuperr.SetupError
		if !errors.As(err, &setup) {
			err = &setuperr.SetupError{Step: "read the start message", Err: err}
		}
		return link, caller, nil, err
	}
	return link, caller, start, nil
}

// Send writes one message of kind k; a Carrier payload's descriptors go
// with it (its FDs, as many as its FDCount).
func (l *Link) Send(k Kind, payload any) error {
	data, err := encode(k, payload)
	if err != nil {
		return err
	}
	l.sendMu.Lock()
	defer l.sendMu.Unlock()
	c, carries := payload.(Carrier)
	if !carries || c.FDCount() == 0 {
		return wire.WriteFrame(l.rw, byte(k), data)
	}
	fds := c.Carried()
	sock, ok := l.rw.(*unixSock)
	if !ok || len(fds) != c.FDCount() {
		return fmt.Errorf("send %s: %d descriptors on a link that cannot carry them, or not %d", k, len(fds), c.FDCount())
	}
	var frame bytes.Buffer
	if err := wire.WriteFrame(&frame, byte(k), data); err != nil {
		return err
	}
	return sock.writeFDs(frame.Bytes(), fds)
}

// Ready tells the parent the stage is set up.
func (l *Link) Ready() error { return l.Send(l.ready, nil) }

// Fail reports err, a *SetupError or any error, to the parent. Nothing is
// left to do when even that fails: the stage's exit status still says 125.
func (l *Link) Fail(err error) {
	if l == nil {
		fmt.Fprintf(os.Stderr, "corral: %s: %v\n", os.Args[0], err)
		return
	}
	_ = l.Send(l.failed, FailureOf(err))
}

// answers are the kinds that end a wait at s: what it accepts but for
// its interim kinds.
func answers(s Step) []Kind {
	return slices.DeleteFunc(slices.Clone(steps[s].Accept), func(k Kind) bool { return slices.Contains(steps[s].interim, k) })
}
