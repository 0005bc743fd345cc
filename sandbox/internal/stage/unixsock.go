package stage

import (
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxFDsPerRead bounds the descriptors one read takes off the stage
// socket: one per --host-port and the proxy's, well under it.
const maxFDsPerRead = 64

// unixSock is a stage socket as a stream that also carries descriptors:
// every read is a recvmsg that keeps what SCM_RIGHTS brought (a plain
// read would make the kernel close them), and SendFDs attaches
// descriptors to the first byte of a frame. The socket is non-blocking
// and in the Go runtime's poller, so a goroutine waiting on it holds no
// OS thread: the engine's process owns every thread it will need before
// the runner starts, and a read parked for the whole run must not take
// one.
type unixSock struct {
	f  *os.File
	rc syscall.RawConn

	mu  sync.Mutex
	fds []int // received, not yet taken by a message
}

func newUnixSock(fd int, name string) (*unixSock, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &unixSock{f: f, rc: rc}, nil
}

func (s *unixSock) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	oob := make([]byte, unix.CmsgSpace(4*maxFDsPerRead))
	var n, oobn int
	var rerr error
	err := s.rc.Read(func(fd uintptr) bool {
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), p, oob, unix.MSG_CMSG_CLOEXEC)
		return rerr != unix.EAGAIN
	})
	if err == nil {
		err = rerr
	}
	if oobn > 0 {
		s.keep(oob[:oobn])
	}
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// keep queues the descriptors of a control message; anything else in it
// is dropped.
func (s *unixSock) keep(oob []byte) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		if fds, err := unix.ParseUnixRights(&m); err == nil {
			s.fds = append(s.fds, fds...)
		}
	}
}

// take removes the first n received descriptors; false when fewer came.
func (s *unixSock) take(n int) ([]int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.fds) < n {
		return nil, false
	}
	fds := append([]int(nil), s.fds[:n]...)
	s.fds = s.fds[n:]
	return fds, true
}

func (s *unixSock) Write(p []byte) (int, error) { return s.f.Write(p) }

// msgProbe is MSG_PROBE (linux/socket.h; seccomp.MsgProbe).
const msgProbe = 0x10

// writeFDs writes p with fds attached to its first byte.
func (s *unixSock) writeFDs(p []byte, fds []int) error {
	rights := unix.UnixRights(fds...)
	var n int
	var werr error
	err := s.rc.Write(func(fd uintptr) bool {
		// MSG_PROBE changes nothing on a Unix stream socket; it is what
		// lets the exec stage's sendmsg of the runner's seccomp listener
		// pass a filter that hands every other sendmsg to that very
		// listener (seccomp SocketRules.AllowUDP, internal/seccomp/udp.go).
		n, werr = unix.SendmsgN(int(fd), p, rights, nil, unix.MSG_NOSIGNAL|msgProbe)
		return werr != unix.EAGAIN
	})
	if err == nil {
		err = werr
	}
	if err != nil {
		return err
	}
	if n < len(p) { // the descriptors went with the first part
		_, err = s.f.Write(p[n:])
	}
	return err
}

func (s *unixSock) Close() error {
	s.mu.Lock()
	for _, fd := range s.fds {
		unix.Close(fd)
	}
	s.fds = nil
	s.mu.Unlock()
	return s.f.Close()
}
