package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/corral-sh/corral/internal/wire"
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

// Every field of every stage message crosses the re-exec unchanged, bytes
// that are not UTF-8 included (DESIGN trap 15).
func TestStageMessagesCarryEveryField(t *testing.T) {
	for _, msg := range []any{&initStart{}, &execStart{}, &probeStart{}, &failure{}} {
		t.Run(reflect.TypeOf(msg).Elem().Name(), func(t *testing.T) {
			n := 0
			fill(t, reflect.ValueOf(msg).Elem(), reflect.TypeOf(msg).Elem().Name(), &n)
			data, err := wire.Marshal(msg)
			if err != nil {
				t.Fatal(err)
			}
			back := reflect.New(reflect.TypeOf(msg).Elem())
			if err := wire.Unmarshal(data, back.Interface()); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back.Interface(), msg) {
				t.Errorf("changed on the way:\n got  %#v\n want %#v", back.Interface(), msg)
			}
		})
	}
	// The writer stays behind, as it must: it is the host's stderr.
	o := initStart{Options: Options{Stderr: &bytes.Buffer{}, Path: "/x"}}
	data, err := wire.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var back initStart
	if err := wire.Unmarshal(data, &back); err != nil || back.Options.Stderr != nil || back.Options.Path != "/x" {
		t.Errorf("Stderr crossed, or Path did not: %#v, %v", back.Options, err)
	}
}

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
	return (&stageLink{rw: stream{&buf}}).awaitReply()
}

func failed(err error) func(io.Writer) error {
	return func(w io.Writer) error {
		payload, merr := wire.Marshal(failureOf(err))
		if merr != nil {
			return merr
		}
		return wire.WriteFrame(w, msgFailed, payload)
	}
}

// A stage's setup error comes back as the same error: the same text, and
// the same errno for errors.Is, whatever wrapped it there.
func TestFailureCrossesWithItsErrno(t *testing.T) {
	overmounted := &SetupError{Step: "mount proc on /proc in the new namespace", Err: unix.EPERM, Hint: "parts of /proc are overmounted"}
	for _, tc := range []struct {
		name  string
		err   error
		errno unix.Errno
	}{
		{"refused proc mount", overmounted, unix.EPERM},
		{"refused clone", &SetupError{Step: "clone(CLONE_NEWUSER|CLONE_NEWPID|CLONE_NEWNS)", Err: unix.ENOSPC, Hint: "max_user_namespaces"}, unix.ENOSPC},
		{"wrapped", &SetupError{Step: "read capabilities", Err: &os.PathError{Op: "open", Path: "/proc/\xffx", Err: unix.ENOENT}}, unix.ENOENT},
		{"exec", &SetupError{Step: "runner exec failed: /r\xffunner", Err: unix.EACCES}, unix.EACCES},
		{"no errno", &SetupError{Step: "verify privileges", Err: errors.New("CapEff is 1, want 0")}, 0},
		{"not a SetupError", fmt.Errorf("socket: %w", unix.EMFILE), unix.EMFILE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ready, err := reply(t, failed(tc.err))
			if ready {
				t.Fatal("a failure read as ready")
			}
			var setup *SetupError
			if !errors.As(err, &setup) {
				t.Fatalf("got %T %v, want a *SetupError", err, err)
			}
			var orig *SetupError
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
	// The host hands the init's failure on as it came.
	_, err := reply(t, failed(overmounted))
	if got := initFailure(err, 125); !errors.Is(got, unix.EPERM) || got.Hint != overmounted.Hint {
		t.Errorf("initFailure lost the errno or the hint: %v", got)
	}
}

func TestAwaitReply(t *testing.T) {
	ready, err := reply(t, func(w io.Writer) error { return wire.WriteFrame(w, msgReady, nil) })
	if !ready || err != nil {
		t.Errorf("ready: %v %v", ready, err)
	}
	// Nothing at all: the exec stage's execve succeeded.
	if ready, err := reply(t); ready || err != nil {
		t.Errorf("EOF: %v %v", ready, err)
	}
	// Nothing, but the start message never got through: the stage died.
	l := &stageLink{rw: stream{&bytes.Buffer{}}, sendErr: unix.EPIPE}
	if _, err := l.awaitReply(); !errors.Is(err, unix.EPIPE) {
		t.Errorf("EOF after a failed send: %v", err)
	}
	for name, frame := range map[string]func(io.Writer) error{
		"unknown kind": func(w io.Writer) error { return wire.WriteFrame(w, 99, nil) },
		"bad failure":  func(w io.Writer) error { return wire.WriteFrame(w, msgFailed, []byte{0xff}) },
		"truncated":    func(w io.Writer) error { _, err := w.Write([]byte{0, 0, 0, 9, msgFailed}); return err },
	} {
		if ready, err := reply(t, frame); ready || err == nil {
			t.Errorf("%s: %v %v, want an error", name, ready, err)
		}
	}
	// A failed init without a word says how it ended.
	if got := initFailure(nil, 2); !strings.Contains(got.Error(), "status 2 before it was ready") {
		t.Errorf("initFailure(nil, 2) = %v", got)
	}
}

// The stage's socket goes above every inherited descriptor; those keep
// their numbers, every other number below is closed in the child.
func TestStageFiles(t *testing.T) {
	saved := inheritedFDs
	defer func() { inheritedFDs = saved }()
	closed := ^uintptr(0)

	inheritedFDs = nil
	files, at := stageFiles(42)
	if at != 3 || !reflect.DeepEqual(files, []uintptr{0, 1, 2, 42}) {
		t.Errorf("no inherited fds: at %d, files %v", at, files)
	}
	inheritedFDs = []int{3, 4, 6}
	files, at = stageFiles(5)
	if want := []uintptr{0, 1, 2, 3, 4, closed, 6, 5}; at != 7 || !reflect.DeepEqual(files, want) {
		t.Errorf("fds 3, 4, 6: at %d, files %v, want %v", at, files, want)
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
	payload, _ := wire.Marshal(failureOf(&SetupError{Step: "s", Err: unix.EPERM, Hint: "h"}))
	wire.WriteFrame(&buf, msgFailed, payload)
	f.Add(buf.Bytes())
	start, _ := wire.Marshal(initStart{Options: Options{Args: []string{"\xff"}, Env: []string{"A=\xfe"}}})
	f.Add(start)
	f.Add([]byte{0, 0, 0, 1, msgReady})
	f.Fuzz(func(t *testing.T, data []byte) {
		(&stageLink{rw: stream{bytes.NewReader(data)}}).awaitReply()
		for _, msg := range []any{&initStart{}, &execStart{}, &probeStart{}, &failure{}} {
			wire.Unmarshal(data, msg)
		}
	})
}
