package egress

import (
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"testing"
)

// BenchmarkRelayDownload (issue 34, "Namespace modes, the same through
// the relay: at least the bare splice relay's figure in the same run"):
// one op is a whole 200 MB download on a new connection from a
// sendfile(2) server, the way a namespace mode's client without proxy
// variables gets it: direct on loopback, through the bare relay
// (relayTo: io.Copy's own splice, no policy), and through corral's relay
// (RelayRoute, as the checker asks it: the decision, the dial, the
// decision's log line; then the connect from the bound source, splice
// both ways, the end line). Interleave with -count and compare the MB/s.
func BenchmarkRelayDownload(b *testing.B) {
	const size = 200 << 20
	const fileSize = 4 << 20
	f := payload(b, fileSize)
	down := startServer(b, "tcp", "127.0.0.1:0", source(f, fileSize))
	target := down.l.Addr().String()
	floor := startServer(b, "tcp", "127.0.0.1:0", relayTo(target)).l.Addr().String()
	tp := startProxy(b, Config{}, "127.0.0.1:*")
	rl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	tp.ServeRelay(rl)
	dst := netip.MustParseAddrPort(target)
	relayed := func() net.Conn {
		// As the checker does: bind a source on loopback, note the route,
		// connect to the relay.
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}}
		l, err := net.Listen("tcp", "127.0.0.1:0") // a free source port
		if err != nil {
			b.Fatal(err)
		}
		src := netip.MustParseAddrPort(l.Addr().String())
		l.Close()
		d.LocalAddr = net.TCPAddrFromAddrPort(src)
		if ok, e := tp.RelayRoute(src, dst); !ok || e != 0 {
			b.Fatalf("the relay refused a route its rules admit: %v %v", ok, e)
		}
		c, err := d.Dial("tcp", rl.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	dial := func(addr string) func() net.Conn {
		return func() net.Conn {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			return c
		}
	}
	ways := []struct {
		name string
		dial func() net.Conn
	}{
		{"direct", dial(target)},
		{"relay-floor", dial(floor)},
		{"relay", relayed},
	}
	buf := make([]byte, 1<<20)
	for _, w := range ways {
		b.Run(w.name, func(b *testing.B) {
			b.SetBytes(size)
			cpu := cpuMeter(b)
			b.ResetTimer()
			for range b.N {
				c := w.dial()
				var hdr [8]byte
				binary.BigEndian.PutUint64(hdr[:], size)
				if _, err := c.Write(hdr[:]); err != nil {
					b.Fatal(err)
				}
				got, err := io.CopyBuffer(io.Discard, io.LimitReader(readerOnly{c}, size), buf)
				if err != nil || got != size {
					b.Fatalf("got %d bytes of %d: %v", got, size, err)
				}
				c.Close()
			}
			cpu()
		})
	}
}
