package pidinit

// The init's part of the network policy (README.md, "Network policy"):
// the listening sockets the host side serves the egress proxy and the
// --host-port forwards on are made here, inside the runner's network
// namespace, and handed over the stage socket; a socket keeps the
// namespace it was made in, whoever holds it. For --publish the init
// connects, per connection the host side accepted, a socket to the
// runner's server inside and hands that over.

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/corral-sh/corral/internal/setuperr"
	"github.com/corral-sh/corral/sandbox/internal/plan"
	"github.com/corral-sh/corral/sandbox/internal/stage"
	"golang.org/x/sys/unix"
)

// sendListeners makes the proxy's and the --host-port listeners inside and
// sends them to the host side, before "ready".
func sendListeners(link *stage.Link, n plan.Network) *setuperr.SetupError {
	if n.ProxyAddr == "" && len(n.HostPorts) == 0 {
		return nil
	}
	msg := &stage.NetListeners{ProxyAddr: n.ProxyAddr, HostPorts: n.HostPorts}
	defer func() {
		for _, fd := range msg.FDs {
			unix.Close(fd)
		}
	}()
	if n.ProxyAddr != "" {
		ap, err := netip.ParseAddrPort(n.ProxyAddr)
		if err != nil {
			return &setuperr.SetupError{Step: "the egress proxy's address", Err: err}
		}
		fd, err := listenLoopback(ap.Port())
		if err != nil {
			return &setuperr.SetupError{Step: "listen for the egress proxy at " + n.ProxyAddr + " in the new network namespace", Err: err}
		}
		msg.FDs = append(msg.FDs, fd)
	}
	for _, port := range n.HostPorts {
		fd, err := listenLoopback(port)
		if err != nil {
			return &setuperr.SetupError{Step: "listen for --host-port " + strconv.Itoa(int(port)) + " in the new network namespace", Err: err}
		}
		msg.FDs = append(msg.FDs, fd)
	}
	if err := link.Send(stage.MsgNetListeners, msg); err != nil {
		return &setuperr.SetupError{Step: "hand the listening sockets to the host side", Err: err}
	}
	return nil
}

// listenLoopback is a TCP socket listening on 127.0.0.1:port of this
// process's network namespace.
func listenLoopback(port uint16) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err == nil {
		err = unix.Bind(fd, &unix.SockaddrInet4{Port: int(port), Addr: [4]byte{127, 0, 0, 1}})
		if err == nil {
			err = unix.Listen(fd, unix.SOMAXCONN)
		}
		if err == nil {
			return fd, nil
		}
	}
	unix.Close(fd)
	return -1, err
}

// answerDials follows the host side's requests for --publish connections
// until its link closes. It runs on a goroutine; the link and the dials
// wait in the runtime's poller, holding no OS thread.
func answerDials(link *stage.Link) {
	for {
		_, msg, err := link.Receive(stage.StepInitRequests)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				// A host side that breaks the protocol gets no more
				// connections; the run itself goes on.
				_ = link.Close()
			}
			return
		}
		go answerDial(link, msg.(*stage.PublishDial))
	}
}

func answerDial(link *stage.Link, req *stage.PublishDial) {
	reply := &stage.PublishConn{ID: req.ID}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(req.Port))))
	if err != nil {
		reply.Errno = uint64(setuperr.Errno(err))
		if reply.Errno == 0 {
			reply.Errno = uint64(unix.ECONNREFUSED)
		}
		_ = link.Send(stage.MsgPublishConn, reply)
		return
	}
	defer c.Close()
	f, err := c.(*net.TCPConn).File()
	if err != nil {
		reply.Errno = uint64(setuperr.Errno(err))
		_ = link.Send(stage.MsgPublishConn, reply)
		return
	}
	defer f.Close()
	reply.FDs = []int{int(f.Fd())}
	_ = link.Send(stage.MsgPublishConn, reply)
}
