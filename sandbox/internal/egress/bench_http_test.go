package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
)

// BenchmarkAbsoluteURI: one plain-http download per op of a way (a new
// connection, a request, an 8 MiB body a sendfile(2) server sends with its
// length), the way apt's mirrors and npm's http registries are fetched
// through the proxy: direct, as an absolute-URI request (spliced, and
// through a buffer), through a CONNECT tunnel, and through the bare relay
// (relayTo), the floor any relay is held to (issue 34's goal: absolute-URI
// and CONNECT at least the relay's figure). The ways run in turns
// (interleave); compare the MB/s, each way's median.
func BenchmarkAbsoluteURI(b *testing.B) {
	const size = 8 << 20
	f := payload(b, size)
	origin := startServer(b, "tcp", "127.0.0.1:0", func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", size)
		sendPayload(c, f, size)
	})
	target := origin.l.Addr().String()
	relay := startServer(b, "tcp", "127.0.0.1:0", relayTo(target)).l.Addr().String()
	tp := startProxy(b, Config{}, "127.0.0.1:*")
	auth := authHeader(tp.addr)

	// fetch reads the response through a 64 KiB reader for every way,
	// over what r has buffered already (a tunnel's 200 may come with the
	// first bytes of the answer): the client's reads are the same size
	// whichever way, so only the way differs. (connectDial's own 4 KiB
	// reader had the tunnel's client read the body 8 KiB at a time, 0.64×
	// the relay in one run.)
	fetch := func(b *testing.B, c net.Conn, r io.Reader, requestURI string) {
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", requestURI, target, auth)
		resp, err := http.ReadResponse(bufio.NewReaderSize(r, 64<<10), nil)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil || n != size {
			b.Fatalf("%d bytes, %v", n, err)
		}
		resp.Body.Close()
	}
	get := func(addr, requestURI string) func(b *testing.B) {
		return func(b *testing.B) { c := dialTCP(b, addr); fetch(b, c, c, requestURI); c.Close() }
	}
	ways := []way{
		{name: "direct", op: get(target, "/")},
		{name: "absolute-uri-splice", op: get(tp.addr, "http://"+target+"/")},
		{name: "absolute-uri-buffered", buffered: true, op: get(tp.addr, "http://"+target+"/")},
		{name: "connect-splice", op: func(b *testing.B) {
			c, br, _ := connectDial(b, tp.addr, target)
			fetch(b, c, br, "/")
			c.Close()
		}},
		{name: "relay-floor", op: get(relay, "/")},
	}
	report(b, ways, interleave(b, ways), size)
}
