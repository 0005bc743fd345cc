package inet

import (
	"net"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

func TestSocknameAndPeername(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Skip(err)
		}
		defer ln.Close()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		raw, _ := c.(*net.TCPConn).SyscallConn()
		raw.Control(func(fd uintptr) {
			local, err := Sockname(int(fd))
			if err != nil || local != netip.MustParseAddrPort(c.LocalAddr().String()) {
				t.Errorf("Sockname: %v %v, want %v", local, err, c.LocalAddr())
			}
			peer, err := Peername(int(fd))
			if err != nil || peer != netip.MustParseAddrPort(ln.Addr().String()) {
				t.Errorf("Peername: %v %v, want %v", peer, err, ln.Addr())
			}
		})
	}
	if ap := AddrPort(&unix.SockaddrUnix{Name: "/x"}); ap.IsValid() {
		t.Errorf("a Unix address gave %v", ap)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	if _, err := Sockname(fds[0]); err != unix.EAFNOSUPPORT {
		t.Errorf("Sockname of a Unix socket: %v, want EAFNOSUPPORT", err)
	}
}
