package stage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/sys/capability"

	"github.com/corral-sh/corral/internal/setuperr"
	"github.com/corral-sh/corral/internal/wire"
	"github.com/corral-sh/corral/sandbox/internal/plan"
	"golang.org/x/sys/unix"
)

// fill sets every field that travels (see wire.Marshal) to a value that is
// not its zero value, with invalid UTF-8 in every string. A field of a kind
// it does not know fails the test: a new field of the messages must be
// taught to the encoding and to this test, not found missing in pidns mode.
func fill(t *testing.T, v reflect.Value, path string, n *int) {
	t.Helper()
	*n++
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("\xff%d\xc3(", *n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(-int64(*n%100) - 1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(uint64(*n%200) + 1)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := 0; i < 2; i++ {
			fill(t, s.Index(i), fmt.Sprintf("%s[%d]", path, i), n)
		}
		v.Set(s)
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			fill(t, v.Index(i), fmt.Sprintf("%s[%d]", path, i), n)
		}
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(t, p.Elem(), path, n)
		v.Set(p)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if !f.IsExported() || f.Tag.Get("json") == "-" || f.Tag.Get("wire") == "-" {
				continue
			}
			fill(t, v.Field(i), path+"."+f.Name, n)
		}
	default:
		t.Fatalf("%s is a %s: teach internal/wire and this test to carry it", path, v.Type())
	}
}

// Every field of every message in the table crosses the re-exec
// unchanged, bytes that are not UTF-8 included (docs/ARCHITECTURE.md,
// "Linux traps"): through the codec, and through a link from Send to the
// one step that receives it.
func TestEveryKindRoundTrips(t *testing.T) {
	for _, m := range Messages() {
		t.Run(m.Name, func(t *testing.T) {
			var msg any
			if m.New != nil {
				msg = m.New()
				n := 0
				fill(t, reflect.ValueOf(msg).Elem(), m.Name, &n)
				data, err := wire.Marshal(msg)
				if err != nil {
					t.Fatal(err)
				}
				back := m.New()
				if err := wire.Unmarshal(data, back); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(back, msg) {
					t.Errorf("changed on the way:\n got  %#v\n want %#v", back, msg)
				}
			}
			step := receiverOf(t, m.Kind)
			if c, ok := msg.(Carrier); ok {
				carriesThroughSocket(t, m, step, c)
				return
			}
			var buf bytes.Buffer
			if err := (&Link{rw: pipe{&buf}}).Send(m.Kind, msg); err != nil {
				t.Fatal(err)
			}
			kind, got, err := (&Link{rw: pipe{&buf}}).Receive(step)
			if err != nil || kind != m.Kind || !reflect.DeepEqual(got, msg) {
				t.Errorf("through a link at %s: %v %#v %v, want %v %#v", step, kind, got, err, m.Kind, msg)
			}
		})
	}
}

// carriesThroughSocket sends c with real descriptors over a socketpair
// link and checks that each arrives as a descriptor of the same open file.
func carriesThroughSocket(t *testing.T, m Message, step Step, c Carrier) {
	t.Helper()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, err := newUnixSock(pair[0], "a")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := newUnixSock(pair[1], "b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var sent []int
	for range c.FDCount() {
		f, err := os.CreateTemp(t.TempDir(), "fd")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		sent = append(sent, int(f.Fd()))
	}
	c.SetFDs(sent)
	if err := (&Link{rw: a}).Send(m.Kind, c); err != nil {
		t.Fatal(err)
	}
	kind, got, err := (&Link{rw: b}).Receive(step)
	if err != nil || kind != m.Kind {
		t.Fatalf("through a socket at %s: %v %v", step, kind, err)
	}
	back := got.(Carrier)
	recv := back.Carried()
	back.SetFDs(sent)
	if !reflect.DeepEqual(back, c) {
		t.Errorf("changed on the way:\n got  %#v\n want %#v", back, c)
	}
	if len(recv) != len(sent) {
		t.Fatalf("%d descriptors arrived, %d sent", len(recv), len(sent))
	}
	for i := range sent {
		var want, have unix.Stat_t
		if unix.Fstat(sent[i], &want) != nil || unix.Fstat(recv[i], &have) != nil || want.Ino != have.Ino {
			t.Errorf("descriptor %d: arrived as another file", i)
		}
		unix.Close(recv[i])
	}
}

// receiverOf is the one step that takes k.
func receiverOf(t *testing.T, k Kind) Step {
	t.Helper()
	var at []Step
	for _, s := range Steps() {
		if slices.Contains(s.Accepts(), k) {
			at = append(at, s)
		}
	}
	if len(at) != 1 {
		t.Fatalf("%s is taken at %d steps %v, want exactly one", k, len(at), at)
	}
	return at[0]
}

// Every kind has exactly one receiver, the role the table says it goes
// to; every step reads only kinds sent to its role; and a payload of the
// wrong type is refused before it is sent.
func TestEveryKindHasOneReceiver(t *testing.T) {
	seen := map[Kind]bool{}
	for _, m := range Messages() {
		if seen[m.Kind] {
			t.Errorf("kind %d is in the table twice", m.Kind)
		}
		seen[m.Kind] = true
		if m.From == m.To || m.From == "" || m.To == "" {
			t.Errorf("%s: from %q to %q", m.Name, m.From, m.To)
		}
		if s := receiverOf(t, m.Kind); s.Receiver() != m.To {
			t.Errorf("%s goes to the %s but is read at %s, by the %s", m.Name, m.To, s, s.Receiver())
		}
		if err := (&Link{rw: pipe{&bytes.Buffer{}}}).Send(m.Kind, struct{ X int }{1}); err == nil {
			t.Errorf("%s: a payload of the wrong type was sent", m.Name)
		}
	}
	for _, s := range Steps() {
		if len(s.Accepts()) == 0 {
			t.Errorf("step %s takes nothing", s)
		}
		for _, k := range s.Accepts() {
			if !seen[k] {
				t.Errorf("step %s takes %s, which is not in the table", s, k)
			}
		}
	}
}

// An unknown kind, and a known one out of order, end the launch: a
// *SetupError (status 125) that names the kind, at every step.
func TestUnknownAndOutOfOrderKinds(t *testing.T) {
	for _, s := range Steps() {
		var buf bytes.Buffer
		if err := wire.WriteFrame(&buf, 99, nil); err != nil {
			t.Fatal(err)
		}
		_, _, err := (&Link{rw: pipe{&buf}}).Receive(s)
		var setup *setuperr.SetupError
		if !errors.As(err, &setup) || !IsProtocolError(err) || !strings.Contains(err.Error(), "unknown message kind 99") {
			t.Errorf("at %s, kind 99: %T %v", s, err, err)
		}
		for _, m := range Messages() {
			if slices.Contains(s.Accepts(), m.Kind) {
				continue
			}
			var buf bytes.Buffer
			var payload []byte
			if m.New != nil {
				payload, _ = wire.Marshal(m.New())
			}
			if err := wire.WriteFrame(&buf, byte(m.Kind), payload); err != nil {
				t.Fatal(err)
			}
			_, _, err := (&Link{rw: pipe{&buf}}).Receive(s)
			if !errors.As(err, &setup) || !IsProtocolError(err) || !strings.Contains(err.Error(), m.Name+" (") || !strings.Contains(err.Error(), "out of order") {
				t.Errorf("at %s, %s: %T %v", s, m.Name, err, err)
			}
		}
	}
}

// pipe is a link over a buffer: writes land in it, reads come from it.
type pipe struct{ *bytes.Buffer }

func (pipe) Close() error { return nil }

// stream is a link to nowhere: replies come from r, writes are dropped.
type stream struct{ io.Reader }

func (stream) Write(p []byte) (int, error) { return len(p), nil }
func (stream) Close() error                { return nil }

// reply returns what awaitReply makes of a stage that wrote frames.
func reply(t *testing.T, frames ...func(w io.Writer) error) (bool, error) {
	t.Helper()
	var buf bytes.Buffer
	for _, f := range frames {
		if err := f(&buf); err != nil {
			t.Fatal(err)
		}
	}
	return (&Link{rw: stream{&buf}}).AwaitReply(StepInitReply)
}

func failed(err error) func(io.Writer) error {
	return func(w io.Writer) error {
		payload, merr := wire.Marshal(FailureOf(err))
		if merr != nil {
			return merr
		}
		return wire.WriteFrame(w, byte(MsgInitFailed), payload)
	}
}

// A stage's setup error comes back as the same error: the same text, and
// the same errno for errors.Is, whatever wrapped it there.
func TestFailureCrossesWithItsErrno(t *testing.T) {
	overmounted := &setuperr.SetupError{Step: "mount proc on /proc in the new namespace", Err: unix.EPERM, Hint: "parts of /proc are overmounted"}
	for _, tc := range []struct {
		name  string
		err   error
		errno unix.Errno
	}{
		{"refused proc mount", overmounted, unix.EPERM},
		{"refused clone", &setuperr.SetupError{Step: "clone(CLONE_NEWUSER|CLONE_NEWPID|CLONE_NEWNS)", Err: unix.ENOSPC, Hint: "max_user_namespaces"}, unix.ENOSPC},
		{"wrapped", &setuperr.SetupError{Step: "read capabilities", Err: &os.PathError{Op: "open", Path: "/proc/\xffx", Err: unix.ENOENT}}, unix.ENOENT},
		{"exec", &setuperr.SetupError{Step: "runner exec failed: /r\xffunner", Err: unix.EACCES}, unix.EACCES},
		{"no errno", &setuperr.SetupError{Step: "verify privileges", Err: errors.New("CapEff is 1, want 0")}, 0},
		{"not a SetupError", fmt.Errorf("socket: %w", unix.EMFILE), unix.EMFILE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ready, err := reply(t, failed(tc.err))
			if ready {
				t.Fatal("a failure read as ready")
			}
			var setup *setuperr.SetupError
			if !errors.As(err, &setup) {
				t.Fatalf("got %T %v, want a *setuperr.SetupError", err, err)
			}
			var orig *setuperr.SetupError
			if errors.As(tc.err, &orig) && err.Error() != tc.err.Error() {
				t.Errorf("prints\n %q\nwant\n %q", err, tc.err)
			}
			if tc.errno != 0 && !errors.Is(err, tc.errno) {
				t.Errorf("errors.Is(%v, %v) is false", err, unix.ErrnoName(tc.errno))
			}
			if tc.errno != unix.EPERM && errors.Is(err, unix.EPERM) {
				t.Errorf("errors.Is(%v, EPERM) is true", err)
			}
			if tc.errno != 0 && !strings.Contains(err.Error(), "("+unix.ErrnoName(tc.errno)+")") {
				t.Errorf("%q does not name %s", err, unix.ErrnoName(tc.errno))
			}
		})
	}
}

func TestAwaitReply(t *testing.T) {
	ready, err := reply(t, func(w io.Writer) error { return wire.WriteFrame(w, byte(MsgInitReady), nil) })
	if !ready || err != nil {
		t.Errorf("ready: %v %v", ready, err)
	}
	// Nothing at all: the exec stage's execve succeeded.
	if ready, err := reply(t); ready || err != nil {
		t.Errorf("EOF: %v %v", ready, err)
	}
	// Nothing, but the start message never got through: the stage died.
	l := &Link{rw: stream{&bytes.Buffer{}}, sendErr: unix.EPIPE}
	if _, err := l.AwaitReply(StepExecReply); !errors.Is(err, unix.EPIPE) {
		t.Errorf("EOF after a failed send: %v", err)
	}
	for name, frame := range map[string]func(io.Writer) error{
		"unknown kind": func(w io.Writer) error { return wire.WriteFrame(w, 99, nil) },
		"bad failure":  func(w io.Writer) error { return wire.WriteFrame(w, byte(MsgInitFailed), []byte{0xff}) },
		"truncated":    func(w io.Writer) error { _, err := w.Write([]byte{0, 0, 0, 9, byte(MsgInitFailed)}); return err },
	} {
		if ready, err := reply(t, frame); ready || err == nil {
			t.Errorf("%s: %v %v, want an error", name, ready, err)
		}
	}
}

// The stage's socket lands on no inherited descriptor: at the first free
// number when it is above them all (the short table, which leaves the
// caller's higher descriptors as inherited), else above every one, with
// every other number below closed in the child.
func TestStageFiles(t *testing.T) {
	closed := ^uintptr(0)

	files, at := Files(Caller{}, 42)
	if at != 3 || !reflect.DeepEqual(files, []uintptr{0, 1, 2, 42}) {
		t.Errorf("no inherited fds: at %d, files %v", at, files)
	}
	files, at = Files(Caller{FDs: []int{3, 4, 6}}, 5)
	if want := []uintptr{0, 1, 2, 3, 4, closed, 6, 5}; at != 7 || !reflect.DeepEqual(files, want) {
		t.Errorf("fds 3, 4, 6: at %d, files %v, want %v", at, files, want)
	}
	files, at = Files(Caller{FDs: []int{3, 4, 6, 251}}, 300)
	if want := []uintptr{0, 1, 2, 3, 4, 300}; at != 5 || !reflect.DeepEqual(files, want) {
		t.Errorf("fds 3, 4, 6, 251, socket at 300: at %d, files %v, want %v", at, files, want)
	}
	files, at = Files(Caller{FDs: []int{5}}, 9)
	if want := []uintptr{0, 1, 2, 9}; at != 3 || !reflect.DeepEqual(files, want) {
		t.Errorf("fd 5, socket at 9: at %d, files %v, want %v", at, files, want)
	}
}

// Spawn lifts a socket that came out below the caller's highest
// descriptor above it, close-on-exec, so that Files can use its short
// table; it leaves one already above alone.
func TestLiftAbove(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	high := fds[1] + 40
	up := liftAbove(fds[1], Caller{FDs: []int{high}})
	defer unix.Close(up)
	if up <= high {
		t.Fatalf("socket %d not lifted above %d: got %d", fds[1], high, up)
	}
	if flags, err := unix.FcntlInt(uintptr(up), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Errorf("lifted socket %d: flags %d, %v; want close-on-exec", up, flags, err)
	}
	if _, err := unix.FcntlInt(uintptr(fds[1]), unix.F_GETFD, 0); err == nil {
		t.Errorf("the original socket %d is still open", fds[1])
	}
	if same := liftAbove(up, Caller{FDs: []int{3}}); same != up {
		t.Errorf("socket %d above the caller's fds moved to %d", up, same)
	}
}

// What this test process inherited is found, and only that.
func TestScanInheritedFDs(t *testing.T) {
	r, w, err := os.Pipe() // close-on-exec, as everything Go opens
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	plain, err := unix.Dup(int(w.Fd())) // dup(2) clears close-on-exec: as if inherited
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(plain)
	fds := scanInheritedFDs()
	found := false
	for _, fd := range fds {
		if fd == int(r.Fd()) || fd == int(w.Fd()) {
			t.Errorf("close-on-exec fd %d counted as inherited", fd)
		}
		found = found || fd == plain
	}
	if !found {
		t.Errorf("fd %d without FD_CLOEXEC missing from %v", plain, fds)
	}
}

// No reply and no start message, however hostile, makes either side panic.
func FuzzStageMessages(f *testing.F) {
	var buf bytes.Buffer
	payload, _ := wire.Marshal(FailureOf(&setuperr.SetupError{Step: "s", Err: unix.EPERM, Hint: "h"}))
	wire.WriteFrame(&buf, byte(MsgInitFailed), payload)
	f.Add(buf.Bytes())
	start, _ := wire.Marshal(InitStart{Plan: plan.Plan{Args: []string{"\xff"}, Env: []string{"A=\xfe"}}})
	f.Add(start)
	f.Add([]byte{0, 0, 0, 1, byte(MsgInitReady)})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, s := range Steps() {
			(&Link{rw: stream{bytes.NewReader(data)}}).AwaitReply(s)
		}
		for _, m := range Messages() {
			if m.New != nil {
				wire.Unmarshal(data, m.New())
			}
		}
	})
}

func TestArgsHint(t *testing.T) {
	got := ArgsHint([]string{"A=" + strings.Repeat("x", 3<<20)}, []string{"/bin/true"})
	for _, w := range []string{"3.0 MiB in 2 strings", "the longest 3.0 MiB", "128 KiB for one string", "RLIMIT_STACK"} {
		if !strings.Contains(got, w) {
			t.Errorf("hint lacks %q: %q", w, got)
		}
	}
}

// The capability check needs no file descriptor: at an exhausted
// RLIMIT_NOFILE root still sees its CAP_SYS_ADMIN (reading
// /proc/self/status would fail with EMFILE and look unprivileged).
func TestHasCapWithoutFreeFileDescriptors(t *testing.T) {
	if os.Geteuid() != 0 || !HoldsCap(capability.CAP_SYS_ADMIN) {
		t.Skip("needs root with CAP_SYS_ADMIN")
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	low := old
	low.Cur = 3
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	has := HoldsCap(capability.CAP_SYS_ADMIN)
	_, openErr := os.Open("/proc/self/status")
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(openErr, syscall.EMFILE) {
		t.Fatalf("the limit did not bite (open: %v): the test proves nothing", openErr)
	}
	if !has {
		t.Error("HoldsCap(CAP_SYS_ADMIN) is false at an exhausted fd limit")
	}
}

// A request and its reply pair by id, whatever order the replies come in,
// while the asking end's reader follows the link for its own messages; a
// reply nobody waits for any more is dropped with its descriptor, and the
// end of the link fails the calls that wait.
func TestCallPairsRepliesByID(t *testing.T) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	hostSock, err := newUnixSock(pair[0], "host")
	if err != nil {
		t.Fatal(err)
	}
	initSock, err := newUnixSock(pair[1], "init")
	if err != nil {
		t.Fatal(err)
	}
	host, init := &Link{rw: hostSock}, &Link{rw: initSock}
	defer init.Close()
	// The init answers two dials in reverse order, with a stop report
	// between them, then one for an id nobody asked, then closes.
	go func() {
		var reqs []*PublishDial
		for len(reqs) < 2 {
			_, msg, err := init.Receive(StepInitRequests)
			if err != nil {
				return
			}
			reqs = append(reqs, msg.(*PublishDial))
		}
		_ = init.Send(MsgPublishConn, &PublishConn{ID: reqs[1].ID, Errno: uint64(reqs[1].Port)})
		_ = init.Send(MsgRunnerStopped, &RunnerStopped{Signal: 20})
		_ = init.Send(MsgPublishConn, &PublishConn{ID: reqs[0].ID, Errno: uint64(reqs[0].Port)})
		_ = init.Send(MsgPublishConn, &PublishConn{ID: 99, Errno: 1})
		init.Close()
	}()
	reports := make(chan any, 4)
	go func() {
		for {
			_, msg, err := host.Receive(StepInitReports)
			if err != nil {
				close(reports)
				return
			}
			reports <- msg
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan string, 2)
	for _, port := range []uint16{8001, 8002} {
		go func() {
			r, err := host.Call(ctx, MsgPublishDial, &PublishDial{Port: port})
			if err != nil {
				got <- fmt.Sprintf("%d: %v", port, err)
				return
			}
			got <- fmt.Sprintf("%d: %d", port, r.(*PublishConn).Errno)
		}()
		time.Sleep(10 * time.Millisecond) // the init reads them in this order
	}
	for range 2 {
		s := <-got
		port, answer, _ := strings.Cut(s, ": ")
		if port != answer {
			t.Errorf("call for port %s got the reply %s", port, answer)
		}
	}
	var seen []any
	for msg := range reports {
		seen = append(seen, msg)
	}
	if len(seen) != 1 || seen[0].(*RunnerStopped).Signal != 20 {
		t.Errorf("the reader saw %#v, want the stop report alone", seen)
	}
	if _, err := host.Call(ctx, MsgPublishDial, &PublishDial{Port: 1}); err == nil {
		t.Error("a call after the link ended did not fail")
	}
}
