package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
)

// BenchmarkAbsoluteURI: one plain-http download per op (a new connection,
// a request, an 8 MiB body a sendfile(2) server sends with its length),
// the way apt's mirrors and npm's http registries are fetched through the
// proxy: direct, as an absolute-URI request (spliced, and through a
// buffer), through a CONNECT tunnel, and through the bare relay (relayTo),
// the floor any relay is held to (issue 34's goal: absolute-URI at least
// the relay's figure). Compare the MB/s; run interleaved with -count.
func BenchmarkAbsoluteURI(b *testing.B) {
	const size = 8 << 20
	f := payload(b, size)
	origin := startServer(b, "tcp", "127.0.0.1:0", func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", size)
		sr := io.NewSectionReader(f, 0, size)
		io.Copy(c, sr) // sendfile(2) from the file
	})
	target := origin.l.Addr().String()
	relay := startServer(b, "tcp", "127.0.0.1:0", relayTo(target)).l.Addr().String()
	tp := startProxy(b, Config{}, "127.0.0.1:*")
	auth := authHeader(tp.addr)

	fetch := func(b *testing.B, c net.Conn, br *bufio.Reader, requestURI string) {
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", requestURI, target, auth)
		if br == nil {
			br = bufio.NewReaderSize(c, 64<<10)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil || n != size {
			b.Fatalf("%d bytes, %v", n, err)
		}
		resp.Body.Close()
	}
	dial := func(b *testing.B, addr string) net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	ways := []struct {
		name     string
		buffered bool
		get      func(b *testing.B)
	}{
		{"direct", false, func(b *testing.B) { c := dial(b, target); fetch(b, c, nil, "/"); c.Close() }},
		{"absolute-uri-splice", false, func(b *testing.B) { c := dial(b, tp.addr); fetch(b, c, nil, "http://"+target+"/"); c.Close() }},
		{"absolute-uri-buffered", true, func(b *testing.B) { c := dial(b, tp.addr); fetch(b, c, nil, "http://"+target+"/"); c.Close() }},
		{"connect-splice", false, func(b *testing.B) {
			c, br, _ := connectDial(b, tp.addr, target)
			fetch(b, c, br, "/")
			c.Close()
		}},
		{"relay-floor", false, func(b *testing.B) { c := dial(b, relay); fetch(b, c, nil, "/"); c.Close() }},
	}
	for _, w := range ways {
		b.Run(w.name, func(b *testing.B) {
			spliceDisabled.Store(w.buffered)
			defer spliceDisabled.Store(false)
			b.SetBytes(size)
			cpu := cpuMeter(b)
			b.ResetTimer()
			for range b.N {
				w.get(b)
			}
			cpu()
		})
	}
}
