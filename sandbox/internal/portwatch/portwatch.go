// Package portwatch tells which loopback TCP ports of this process's
// network namespace have a server listening, for --publish
// (docs/network.md): the pidns init watches the runner's namespace, so
// that the host side listens on the host only while the runner's server
// does, and subreaper mode's host side watches the host's, so that a
// server on [::1] alone is reachable at 127.0.0.1 too.
//
// The kernel has no event for "a socket started listening", so the watch
// polls: one sock_diag dump of the LISTEN sockets per family and interval
// (NETLINK_SOCK_DIAG, what ss(8) reads; no privilege needed). The netlink
// socket is non-blocking and waits in the runtime's poller, the interval
// is a Go timer: the watch holds no OS thread and never needs a new one
// (DESIGN.md, Trap 14).
package portwatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Interval is how often a --publish run looks: the longest a server that
// started listening waits before the host reaches it, and the longest the
// host still accepts (and then closes) after the server stopped. Each look
// is two netlink round trips (a few microseconds in a namespace that holds
// a handful of sockets).
const Interval = 100 * time.Millisecond

// State is where a port's server listens on loopback.
type State struct {
	V4 bool // reachable at 127.0.0.1 (bound there or to 0.0.0.0)
	V6 bool // reachable at [::1] (bound there or to ::)
}

// Listening says a server listens on the port at all.
func (s State) Listening() bool { return s.V4 || s.V6 }

// Watcher reads the LISTEN sockets of the namespace it was opened in.
type Watcher struct {
	f   *os.File
	rc  syscall.RawConn
	seq uint32
	buf []byte
}

// Open makes the netlink socket, in the caller's network namespace (a
// netlink socket keeps the namespace it was made in).
func Open() (*Watcher, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, fmt.Errorf("open a sock_diag netlink socket: %w", err)
	}
	f := os.NewFile(uintptr(fd), "sock_diag") // non-blocking: in the poller
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Watcher{f: f, rc: rc, buf: make([]byte, 32<<10)}, nil
}

// Close closes the netlink socket.
func (w *Watcher) Close() error { return w.f.Close() }

// Look returns the state of each of ports now.
func (w *Watcher) Look(ports []uint16) (map[uint16]State, error) {
	states := make(map[uint16]State, len(ports))
	for _, p := range ports {
		states[p] = State{}
	}
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		if err := w.dump(family, states); err != nil {
			return nil, err
		}
	}
	return states, nil
}

// The sizes of struct nlmsghdr, inet_diag_req_v2 and the start of
// inet_diag_msg up to its socket id and in all (linux/inet_diag.h).
const (
	reqLen    = unix.SizeofNlMsghdr + 56
	msgIDEnd  = 4 + 48
	msgLen    = msgIDEnd + 20 // then its attributes
	tcpListen = 10            // TCP_LISTEN
	skV6Only  = 11            // INET_DIAG_SKV6ONLY, sent for every AF_INET6 socket
)

// dump asks for family's listening TCP sockets and marks the watched
// ports that have one on loopback or on the wildcard address.
func (w *Watcher) dump(family uint8, states map[uint16]State) error {
	w.seq++
	req := make([]byte, reqLen)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], reqLen)
	ne.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	ne.PutUint32(req[8:], w.seq)
	r := req[unix.SizeofNlMsghdr:]
	r[0], r[1] = family, unix.IPPROTO_TCP
	ne.PutUint32(r[4:], 1<<tcpListen)
	var serr error
	err := w.rc.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		return serr != unix.EAGAIN
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("sock_diag request: %w", err)
	}
	for {
		var n int
		var rerr error
		err := w.rc.Read(func(fd uintptr) bool {
			n, _, rerr = unix.Recvfrom(int(fd), w.buf, 0)
			return rerr != unix.EAGAIN
		})
		if err == nil {
			err = rerr
		}
		if err != nil {
			return fmt.Errorf("sock_diag answer: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(w.buf[:n])
		if err != nil {
			return fmt.Errorf("sock_diag answer: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Seq != w.seq {
				continue
			}
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return nil
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if e := int32(ne.Uint32(m.Data)); e != 0 {
						return fmt.Errorf("sock_diag: %w", unix.Errno(-e))
					}
				}
				return errors.New("sock_diag: an error without its errno")
			case unix.SOCK_DIAG_BY_FAMILY:
				mark(m.Data, states)
			}
		}
	}
}

// mark notes one inet_diag_msg's listener in states, if its port is
// watched and a connect to 127.0.0.1 or [::1] reaches it.
func mark(d []byte, states map[uint16]State) {
	if len(d) < msgIDEnd || d[1] != tcpListen {
		return
	}
	port := binary.BigEndian.Uint16(d[4:])
	s, watched := states[port]
	if !watched {
		return
	}
	var addr netip.Addr
	switch d[0] {
	case unix.AF_INET:
		addr = netip.AddrFrom4([4]byte(d[8:12]))
	case unix.AF_INET6:
		addr = netip.AddrFrom16([16]byte(d[8:24]))
	default:
		return
	}
	switch {
	case addr.Is4() || addr.Is4In6(): // an IPv6 socket bound to ::ffff:a.b.c.d takes IPv4
		if a := addr.Unmap(); a.IsUnspecified() || a == netip.AddrFrom4([4]byte{127, 0, 0, 1}) {
			s.V4 = true
		}
	case addr == netip.IPv6Loopback():
		s.V6 = true
	case addr.IsUnspecified():
		s.V6 = true
		// A dual-stack socket on :: (Go's for 0.0.0.0, say) takes
		// 127.0.0.1 too.
		s.V4 = s.V4 || !v6only(d)
	}
	states[port] = s
}

// v6only reads an AF_INET6 inet_diag_msg's INET_DIAG_SKV6ONLY attribute;
// without it the socket counts as IPv6-only (the default of
// net.ipv6.bindv6only is 0, but a guess must not claim 127.0.0.1).
func v6only(d []byte) bool {
	for a := d[min(msgLen, len(d)):]; len(a) >= unix.SizeofRtAttr; {
		l := int(binary.NativeEndian.Uint16(a))
		if l < unix.SizeofRtAttr || l > len(a) {
			break
		}
		if binary.NativeEndian.Uint16(a[2:]) == skV6Only && l > unix.SizeofRtAttr {
			return a[unix.SizeofRtAttr] != 0
		}
		a = a[min((l+3)&^3, len(a)):]
	}
	return true
}
