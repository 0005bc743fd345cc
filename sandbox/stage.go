package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"

	"github.com/corral-sh/corral/internal/setuperr"
	"github.com/corral-sh/corral/internal/wire"
	"golang.org/x/sys/unix"
)

// The stage protocol: how corral talks to the copies of itself it starts
// for the roles that need a fresh process (the pidns init, the exec stage,
// the probe child). A stage gets one socket, placed above every descriptor
// the caller passed (stageFiles) and named by its argv[1], so that the
// caller's descriptors keep their numbers; it makes the socket close-on-exec
// at once. Its parent sends one start message; the stage answers with
// msgReady, with msgFailed, or, for the exec stage, with nothing at all: the
// socket closes when execve succeeds, and the parent reads EOF. In terminal
// mode the init keeps its socket after msgReady and sends msgRunnerStopped
// each time the runner's group stops (terminal.go). Messages
// are wire frames, so arguments, environment and paths cross byte for byte.
//
// Names follow rootlesskit's pkg/messages: who sends it, and what it says.
const (
	msgInitStart     byte = 1 + iota // host → init: initStart
	msgExecStart                     // engine → exec stage: execStart
	msgProbeStart                    // probe → probe child: probeStart
	msgReady                         // init or probe child → parent: set up, no payload
	msgFailed                        // any stage → parent: failure
	msgRunnerStopped                 // init → host, after msgReady in terminal mode: runnerStopped (terminal.go)
)

// initStart is what the pidns init needs: the whole run.
type initStart struct {
	Options Options
	Mask    unix.Sigset_t // the caller's signal mask, for the runner
}

// execStart is what the exec stage needs to become the runner.
type execStart struct {
	Path       string
	Args       []string
	Env        []string
	Privileges Privileges
	Mask       unix.Sigset_t
}

// probeStart names the one step a probe child tries.
type probeStart struct {
	Step string // "namespaces", "proc", "subreaper", "hold" (diagnose.go)
}

// failure is one setup step that failed in a stage: a SetupError taken
// apart so that its errno crosses as a number.
type failure struct {
	Step  string
	Errno uint64 // 0: the error carried none
	Text  string // the error as it printed in the stage
	Hint  string
}

func failureOf(err error) failure {
	var s *SetupError
	if !errors.As(err, &s) {
		s = &SetupError{Step: "stage setup", Err: err}
	}
	f := failure{Step: s.Step, Hint: s.Hint, Errno: uint64(setuperr.Errno(s.Err))}
	if s.Err != nil {
		f.Text = s.Err.Error()
	}
	return f
}

// setupError rebuilds the stage's error on this side: it prints as it did
// there, and errors.Is(err, unix.EPERM) holds when it held there.
func (f failure) setupError() *SetupError {
	return &SetupError{Step: f.Step, Err: &setuperr.Remote{Text: f.Text, Errno: syscall.Errno(f.Errno)}, Hint: f.Hint}
}

// stageLink is one end of a stage's protocol socket.
type stageLink struct {
	rw      io.ReadWriteCloser // the socket; any stream in tests
	sendErr error              // the start message did not get through: the stage died first
}

func (l *stageLink) Close() error { return l.rw.Close() }

// spawnStage starts the corral binary as the stage arg0, sends it start as
// a message of kind kind, and returns its pid and the parent's end of the
// link. It does not wait for the stage: whoever owns wait4 reaps it. The
// stage's own environment is this process's unless attr.Env is set; what
// the runner gets travels in start.
func spawnStage(arg0 string, kind byte, start any, attr syscall.ProcAttr) (int, *stageLink, error) {
	payload, err := wire.Marshal(start)
	if err != nil {
		return 0, nil, fmt.Errorf("encode the %s start message: %w", arg0, err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, nil, fmt.Errorf("socketpair for %s: %w", arg0, err)
	}
	link := &stageLink{rw: os.NewFile(uintptr(fds[0]), "stage link")}
	files, at := stageFiles(fds[1])
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
	// first makes this fail with EPIPE, reported by awaitReply.
	link.sendErr = wire.WriteFrame(link.rw, kind, payload)
	return pid, link, nil
}

// stageFiles places a stage's socket sock above every inherited descriptor
// and returns the child's descriptor table and the socket's number there.
// Go's ForkExec puts Files[i] at descriptor i of the child and, while doing
// so, moves its own descriptors to numbers past the highest it was given;
// with the socket last and above the caller's highest descriptor, nothing
// it moves lands on one of the caller's. Below the socket the caller's
// descriptors stay as they are (Files[i] = i), and every other number is
// closed in the child: those are corral's own, close-on-exec anyway. The
// cost is one close(2) in the child per unused number below the caller's
// highest descriptor.
func stageFiles(sock int) ([]uintptr, int) {
	at := 3
	if n := len(inheritedFDs); n > 0 {
		at = inheritedFDs[n-1] + 1
	}
	files := make([]uintptr, at+1)
	for i := range files {
		files[i] = ^uintptr(0) // closed in the child
	}
	files[0], files[1], files[2] = 0, 1, 2
	for _, fd := range inheritedFDs {
		files[fd] = uintptr(fd)
	}
	files[at] = uintptr(sock)
	return files, at
}

// awaitReply reads the stage's answer. ready is true after msgReady; a
// msgFailed comes back as its *SetupError. Neither, with a nil error, means
// the stage closed its end without a word: for the exec stage, that its
// execve succeeded; for the others, that it died.
func (l *stageLink) awaitReply() (ready bool, err error) {
	kind, payload, err := wire.ReadFrame(l.rw)
	switch {
	case err == io.EOF && l.sendErr != nil:
		return false, fmt.Errorf("the stage ended before it read its start message: %w", l.sendErr)
	case err == io.EOF:
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read the stage's reply: %w", err)
	}
	switch kind {
	case msgReady:
		return true, nil
	case msgFailed:
		var f failure
		if err := wire.Unmarshal(payload, &f); err != nil {
			return false, fmt.Errorf("decode the stage's failure: %w", err)
		}
		return false, f.setupError()
	}
	return false, fmt.Errorf("the stage replied with unknown message %d", kind)
}

// RunStage is the one entry point of every stage: when this process is
// one of the copies corral starts of itself (spawnStage: argv[0] names the
// role, argv[1] is the stage socket's number), it runs that role and never
// returns; in any other process it returns at once. main calls it first,
// before anything else would touch the process's state.
func RunStage() {
	if len(os.Args) != 2 {
		return
	}
	if _, err := stageFD(); err != nil {
		return
	}
	switch os.Args[0] {
	case initArg0:
		runInit() // init.go
	case execStageArg0:
		runExecStage() // execstage.go
	case probeArg0:
		runProbeChild() // probe.go
	default:
		return
	}
	os.Exit(125) // not reached: each role exits or execs
}

func stageFD() (int, error) {
	fd, err := strconv.Atoi(os.Args[1])
	if err != nil || fd < 3 {
		return 0, fmt.Errorf("stage socket %q is not a descriptor above stderr", os.Args[1])
	}
	return fd, nil
}

// openStage is the stage's side of spawnStage: it takes its socket out of
// the descriptors the runner will get, makes it close-on-exec (so that a
// successful execve reads as EOF on the other end, and no child of the
// stage inherits it), and decodes the start message of kind kind into
// start. A nil link means there is no one to report to.
func openStage(kind byte, start any) (*stageLink, error) {
	fd, err := stageFD()
	if err != nil {
		return nil, err
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
		return nil, fmt.Errorf("stage socket %d: %w", fd, err)
	}
	for i, inherited := range inheritedFDs {
		if inherited == fd {
			inheritedFDs = append(inheritedFDs[:i:i], inheritedFDs[i+1:]...)
			break
		}
	}
	link := &stageLink{rw: os.NewFile(uintptr(fd), "stage link")}
	got, payload, err := wire.ReadFrame(link.rw)
	if err != nil {
		return link, &SetupError{Step: "read the start message", Err: err}
	}
	if got != kind {
		return link, &SetupError{Step: "read the start message", Err: fmt.Errorf("got message %d, want %d", got, kind)}
	}
	if err := wire.Unmarshal(payload, start); err != nil {
		return link, &SetupError{Step: "decode the start message", Err: err}
	}
	return link, nil
}

// ready tells the parent the stage is set up.
func (l *stageLink) ready() error { return wire.WriteFrame(l.rw, msgReady, nil) }

// fail reports err, a *SetupError or any error, to the parent. Nothing is
// left to do when even that fails: the stage's exit status still says 125.
func (l *stageLink) fail(err error) {
	if l == nil {
		fmt.Fprintf(os.Stderr, "corral: %s: %v\n", os.Args[0], err)
		return
	}
	payload, merr := wire.Marshal(failureOf(err))
	if merr == nil {
		_ = wire.WriteFrame(l.rw, msgFailed, payload)
	}
}
