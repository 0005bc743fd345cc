package pidinit

// The init's part of the network policy (docs/network.md):
// the listening sockets the host side serves the egress proxy and the
// --host-port forwards on are made here, inside the runner's network
// namespace, and handed over the stage socket; a socket keeps the
// namespace it was made in, whoever holds it. For --publish the init
// watches the namespace's listening sockets and tells the host side when
// the runner's server listens on a published port (the host listens on
// the host only meanwhile), and connects, per connection the host side
// accepted, a socket to that server inside (127.0.0.1, else [::1]) and
// hands that over.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/corral-sh/corral/internal/setuperr"
	"github.com/corral-sh/corral/sandbox/internal/plan"
	"github.com/corral-sh/corral/sandbox/internal/portwatch"
	"github.com/corral-sh/corral/sandbox/internal/stage"
	"golang.org/x/sys/unix"
)

// sendListeners makes the proxy's and the --host-port listeners inside,
// and transparent egress's (egress.go), and sends them to the host side,
// before "ready".
func sendListeners(link *stage.Link, n plan.Network, r *relay) *setuperr.SetupError {
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
	if r != nil { // transparent egress (egress.go)
		if err := r.egressListeners(msg, n); err != nil {
			return err
		}
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

// publisher is the init's side of --publish after ready.
type publisher struct {
	link  *stage.Link
	w     *portwatch.Watcher
	ports []uint16

	mu   sync.Mutex
	told map[uint16]bool // what the host side was last told
}

// openPublisher opens the watch of this namespace's listening sockets,
// before the runner exists.
func openPublisher(link *stage.Link, ports []uint16) (*publisher, *setuperr.SetupError) {
	w, err := portwatch.Open()
	if err != nil {
		return nil, &setuperr.SetupError{Step: "--publish: watch the listening sockets of the new network namespace", Err: err}
	}
	return &publisher{link: link, w: w, ports: ports, told: map[uint16]bool{}}, nil
}

// serve answers the host side's requests and watches the ports, until the
// link closes. The watch looks every portwatch.Interval (the cost of a
// --publish run: ten looks a second, each two netlink round trips); the
// link, the netlink socket and the dials wait in the runtime's poller and
// the interval is a Go timer, holding no OS thread.
func (p *publisher) serve() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.watch(ctx)
	}()
	p.answerDials()
	cancel()
	<-done
	p.w.Close()
}

// tell says a port's state to the host side when it changed.
func (p *publisher) tell(port uint16, listening bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.told[port] == listening {
		return
	}
	p.told[port] = listening
	_ = p.link.Send(stage.MsgPublishState, &stage.PublishState{Port: port, Listening: listening})
}

func (p *publisher) watch(ctx context.Context) {
	t := time.NewTicker(portwatch.Interval)
	defer t.Stop()
	for {
		states, err := p.w.Look(p.ports)
		if err != nil {
			// Without the watch the host side listens for good, as
			// corral did before it had one: a connect is accepted and
			// closed while no server listens.
			fmt.Fprintf(os.Stderr, "corral: network: --publish: stopped watching the runner's listening sockets: %v\n", err)
			for _, port := range p.ports {
				p.tell(port, true)
			}
			return
		}
		for _, port := range p.ports {
			p.tell(port, states[port].Listening())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// answerDials follows the host side's requests for --publish connections
// until its link closes. It runs on a goroutine; the link and the dials
// wait in the runtime's poller, holding no OS thread.
func (p *publisher) answerDials() {
	link := p.link
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
		go p.answerDial(msg.(*stage.PublishDial))
	}
}

// answerDial connects to the runner's server at 127.0.0.1, else at [::1]
// (a server on [::1] alone is published too). Refused at both, the server
// is gone: the host side is told at once, not at the next look.
func (p *publisher) answerDial(req *stage.PublishDial) {
	link := p.link
	reply := &stage.PublishConn{ID: req.ID}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var d net.Dialer
	port := strconv.Itoa(int(req.Port))
	c, err := d.DialContext(ctx, "tcp4", net.JoinHostPort("127.0.0.1", port))
	if errors.Is(err, unix.ECONNREFUSED) {
		c, err = d.DialContext(ctx, "tcp6", net.JoinHostPort("::1", port))
		if err != nil && !errors.Is(err, unix.ECONNREFUSED) {
			err = unix.ECONNREFUSED // no IPv6 loopback: the first answer
		}
		if errors.Is(err, unix.ECONNREFUSED) {
			p.tell(req.Port, false)
		}
	}
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
