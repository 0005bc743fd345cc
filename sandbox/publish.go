package sandbox

// --publish on the host side: the host's 127.0.0.1:PORT accepts only while
// the runner's server listens (at 127.0.0.1 or [::1]), so that a readiness
// check that connects before the server is up is refused, as it would be
// without corral, rather than accepted and then closed.
//
// pidns mode: the port is bound on the host before the init exists (a
// port taken is a setup error) but not listening, so a connect is
// refused. The init watches its namespace's listening sockets
// (package portwatch) and says when the server starts or stops listening
// (stage.PublishState); the host side then calls listen(2) on the bound
// socket, or shutdown(2) on it, which on Linux takes a listening TCP
// socket back to a bound, closed one (the queued connections are reset)
// that listen(2) can open again. The port stays corral's for the whole
// run. The init looks every portwatch.Interval: a connect that comes in
// the interval after the server stopped is accepted and closed as the
// dial inside is refused (the init then says so at once), and one in the
// interval after the server started is refused.
//
// subreaper mode: the runner's server listens on the host's loopback
// itself. A server on [::1] alone (Node's "localhost", say) is not at
// 127.0.0.1:PORT, so the host side watches the host's listening sockets
// and, while such a server listens, listens on 127.0.0.1:PORT itself and
// forwards to [::1]:PORT.

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/corral-sh/corral/sandbox/internal/egress"
	"golang.org/x/sys/unix"
)

// hostPort is one --publish port's socket on the host's 127.0.0.1.
type hostPort struct {
	port uint16
	f    *os.File        // pidns mode: bound, listening only while l is set
	dial egress.DialFunc // to the runner's server (attach)
	l    net.Listener    // the proxy's accept loop's, while listening
}

// reservePort binds the host's 127.0.0.1:port without listening: a
// connect is refused. SO_REUSEADDR is on for the bind (a connection of an
// earlier run may linger in TIME_WAIT) and off after it, so that no other
// program binds the port while corral does not listen on it.
func reservePort(port uint16) (*hostPort, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	if err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err == nil {
		err = unix.Bind(fd, &unix.SockaddrInet4{Port: int(port), Addr: [4]byte{127, 0, 0, 1}})
		if err == nil {
			err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 0)
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("bind", err)
	}
	return &hostPort{port: port, f: os.NewFile(uintptr(fd), "--publish socket")}, nil
}

// control runs fn on h's socket.
func (h *hostPort) control(fn func(fd int) error) error {
	rc, err := h.f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// listen opens h for connections, served by the proxy's forward.
func (h *hostPort) listen(proxy *egress.Proxy) error {
	if h.l != nil || h.dial == nil {
		return nil
	}
	err := h.control(func(fd int) error {
		// TIME_WAIT connections of the last listening are on the port.
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
			return err
		}
		return unix.Listen(fd, unix.SOMAXCONN)
	})
	if err != nil {
		return os.NewSyscallError("listen", err)
	}
	l, err := net.FileListener(h.f) // a duplicate, for the poller
	if err != nil {
		h.unlisten()
		return err
	}
	h.l = l
	proxy.Forward(l, fmt.Sprintf("--publish %d", h.port), h.dial)
	return nil
}

// unlisten makes h refuse connections again: the accept loop's duplicate
// closes (it ends quietly), then shutdown(SHUT_RD) ends the listening
// (inet_shutdown: a TCP_LISTEN socket is disconnected, its queue reset,
// its address and port kept, as it was bound explicitly).
func (h *hostPort) unlisten() {
	if h.l != nil {
		h.l.Close()
		h.l = nil
	}
	_ = h.control(func(fd int) error {
		err := unix.Shutdown(fd, unix.SHUT_RD)
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 0)
		return err
	})
}

// release closes h for good.
func (h *hostPort) release() {
	if h.l != nil {
		h.l.Close()
		h.l = nil
	}
	if h.f != nil {
		h.f.Close()
	}
}

func dialLoopback6(port uint16) egress.DialFunc {
	addr := net.JoinHostPort("::1", strconv.Itoa(int(port)))
	return func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp6", addr)
	}
}
