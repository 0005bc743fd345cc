package egress

import (
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// The proxy's connections carry TCP keepalive where it can tell something
// and nowhere else: a connection it dialled (CONNECT, SOCKS5, an
// absolute-URI request) has the probes net.Dialer's defaults give, turned
// on once the client has its answer; one its Listen listener accepted,
// whose other end is a client on this host, has none (their setsockopt(2)
// came before each connection's first byte).
func TestKeepAlive(t *testing.T) {
	srv := startServer(t, "tcp", "127.0.0.1:0", echo)
	target := srv.l.Addr().String()
	tp := startProxy(t, Config{}, "127.0.0.1:*")
	for _, way := range []string{"connect", "socks5"} {
		t.Run(way, func(t *testing.T) {
			var c net.Conn
			var r io.Reader
			if way == "connect" {
				var status string
				c, r, status = connectDial(t, tp.addr, target)
				if status != "HTTP/1.1 200 Connection established" {
					t.Fatal(status)
				}
			} else {
				var code byte
				c, code = socksDial(t, tp.addr, socksAtypIPv4, "127.0.0.1", srv.port())
				if code != 0 {
					t.Fatal(code)
				}
				r = c
			}
			defer c.Close()
			// A byte there and back: both directions' copies run, the
			// keepalive is on.
			c.SetDeadline(time.Now().Add(hangLimit))
			if _, err := c.Write([]byte{'x'}); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(r, make([]byte, 1)); err != nil {
				t.Fatal(err)
			}
			accepted, dialled := proxyConns(t, tp, c.LocalAddr().String(), target)
			if on, idle := keepAliveOf(t, dialled); !on || idle != 15 {
				t.Errorf("the dialled connection: keepalive %v, idle %d s; want on, 15 s", on, idle)
			}
			if on, _ := keepAliveOf(t, accepted); on {
				t.Error("the accepted connection has keepalive on: its client is on this host")
			}
		})
	}
}

// proxyConns finds tp's end of the client's connection from client, and
// its connection to target.
func proxyConns(t *testing.T, tp *testProxy, client, target string) (accepted, dialled net.Conn) {
	t.Helper()
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for c := range tp.conns {
		switch {
		case c.RemoteAddr().String() == client:
			accepted = c
		case c.RemoteAddr().String() == target:
			dialled = c
		}
	}
	if accepted == nil || dialled == nil {
		t.Fatalf("the proxy's connections from %s and to %s: %v, %v", client, target, accepted, dialled)
	}
	return accepted, dialled
}

// keepAliveOf reads SO_KEEPALIVE and TCP_KEEPIDLE (seconds) of c.
func keepAliveOf(t *testing.T, c net.Conn) (on bool, idle int) {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ka int
	var gerr error
	rc.Control(func(fd uintptr) {
		ka, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE)
		if gerr == nil {
			idle, gerr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE)
		}
	})
	if gerr != nil {
		t.Fatal(gerr)
	}
	return ka != 0, idle
}
