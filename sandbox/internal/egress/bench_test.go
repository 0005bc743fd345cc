package egress

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// benchChunk is what the benchmarks count as one op of bulk transfer.
const benchChunk = 256 << 10

// A way is one way of reaching a server that a benchmark compares with
// the others: direct, through the proxy (spliced, or buffered: the proxy
// copies through a buffer, spliceDisabled), through the bare relay.
type way struct {
	name     string
	buffered bool
	op       func(b *testing.B)
	// timed, in op's place: an op made and timed elsewhere (another
	// process), which returns its time.
	timed func(b *testing.B) time.Duration
}

// sample is what one op of a way took: wall time, and the CPU time of the
// whole process (client, proxy and server alike).
type sample struct{ wall, cpu time.Duration }

// interleave runs b.N rounds; each round runs every way's op once, in
// turns, starting one way further along each round, and it returns each
// way's samples. Ways that run one after another, each for its own b.N,
// compare the machine's load at different moments as much as the ways (a
// rerun turned absolute-URI's 0.97× the bare relay into 1.07×); in turns,
// whatever else loads the machine weighs on every way alike, and each
// way's median (report) leaves the rounds a burst of load hit aside.
func interleave(b *testing.B, ways []way) [][]sample {
	s := make([][]sample, len(ways))
	defer spliceDisabled.Store(false)
	b.ResetTimer()
	for i := range b.N {
		for j := range ways {
			w := ways[(i+j)%len(ways)]
			spliceDisabled.Store(w.buffered)
			c0 := cpuTime()
			t0 := time.Now()
			var wall time.Duration
			if w.timed != nil {
				wall = w.timed(b)
			} else {
				w.op(b)
				wall = time.Since(t0)
			}
			s[(i+j)%len(ways)] = append(s[(i+j)%len(ways)], sample{wall, cpuTime() - c0})
		}
	}
	b.StopTimer()
	return s
}

// report reports each way's median: with bytes moved per op, its MB/s
// ("NAME-MB/s") and the process's CPU time per op ("NAME-cpu-ns", on a
// shared machine a steadier figure than the wall clock's); without, its
// time per op ("NAME-ns"). test/bench/goals.awk reads these.
func report(b *testing.B, ways []way, s [][]sample, bytes int64) {
	for k, w := range ways {
		wall := medianOf(s[k], func(x sample) time.Duration { return x.wall })
		if bytes <= 0 {
			b.ReportMetric(float64(wall.Nanoseconds()), w.name+"-ns")
			continue
		}
		b.ReportMetric(float64(bytes)/1e6/wall.Seconds(), w.name+"-MB/s")
		b.ReportMetric(float64(medianOf(s[k], func(x sample) time.Duration { return x.cpu }).Nanoseconds()), w.name+"-cpu-ns")
	}
}

func medianOf(s []sample, f func(sample) time.Duration) time.Duration {
	v := make([]time.Duration, len(s))
	for i, x := range s {
		v[i] = f(x)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// cpuTime is the CPU time the whole process has spent so far.
func cpuTime() time.Duration {
	var r syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r)
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}

// cpuMeter reports, when the returned func is called, the CPU time the
// whole process (client, proxy and server alike) spent per op since
// cpuMeter was called: on a shared machine a steadier figure than the wall
// clock's.
func cpuMeter(b *testing.B) func() {
	c0 := cpuTime()
	return func() { b.ReportMetric(float64((cpuTime()-c0).Nanoseconds())/float64(b.N), "cpu-ns/op") }
}

// sink answers each 8-byte count with one byte once that many bytes have
// arrived, so the writer knows every byte arrived; it reads with a large
// buffer (io.Discard's 8 KiB reads would be the bottleneck, direct or
// not).
func sink(c net.Conn) {
	buf := make([]byte, benchChunk)
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		for left := int64(binary.BigEndian.Uint64(hdr[:])); left > 0; {
			n, err := c.Read(buf[:min(left, int64(len(buf)))])
			if err != nil {
				return
			}
			left -= int64(n)
		}
		if _, err := c.Write([]byte{1}); err != nil {
			return
		}
	}
}

// payload is a file of size bytes a server sends from (sendfile(2)),
// closed when the benchmark ends.
func payload(b *testing.B, size int) *os.File {
	f, err := os.Create(filepath.Join(b.TempDir(), "payload"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	if _, err := f.Write(bytes.Repeat([]byte("0123456789abcdef"), size/16)); err != nil {
		b.Fatal(err)
	}
	return f
}

// sendPayload sends n bytes of the payload f to c with sendfile(2), as a
// static file server would, from a descriptor of its own (a shared one's
// offset would be every connection's).
func sendPayload(c net.Conn, f *os.File, n int64) error {
	own, err := os.Open(f.Name())
	if err != nil {
		return err
	}
	defer own.Close()
	_, err = io.CopyN(c, own, n) // sendfile(2): io.CopyN gives ReadFrom a LimitedReader of an *os.File
	return err
}

// source answers each 8-byte count with that many bytes of a file of size
// bytes (sendPayload, from its start again as often as needed).
func source(f *os.File, size int64) func(net.Conn) {
	return func(c net.Conn) {
		var hdr [8]byte
		for {
			if _, err := io.ReadFull(c, hdr[:]); err != nil {
				return
			}
			for left := int64(binary.BigEndian.Uint64(hdr[:])); left > 0; {
				n := min(left, size)
				if err := sendPayload(c, f, n); err != nil {
					return
				}
				left -= n
			}
		}
	}
}

// relayTo is the floor of any relay in Go, for the throughput table: it
// dials target and copies each way with io.Copy, which for two TCP
// connections is the standard library's own splice(2). No policy, no
// log, no limits: what is left of the proxy's cost once all of its own
// work is removed.
func relayTo(target string) func(net.Conn) {
	return func(c net.Conn) {
		up, err := net.Dial("tcp", target)
		if err != nil {
			return
		}
		defer up.Close()
		copyBoth(c, up)
	}
}

// copyBoth copies each way between two TCP connections with io.Copy
// (splice(2)), half-closing each side at its EOF, until both are done.
func copyBoth(c, up net.Conn) {
	done := make(chan struct{})
	go func() {
		io.Copy(up, c)
		up.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	io.Copy(c, up)
	c.(*net.TCPConn).CloseWrite()
	<-done
}

// connectFloor is the floor of any CONNECT proxy in Go, as relayTo is of
// any relay: it reads the request's head, dials the target it names,
// answers 200 and copies each way with io.Copy (splice(2)). No
// credentials, no policy, no log, no limits.
func connectFloor(c net.Conn) {
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil {
		return
	}
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "CONNECT" {
		return
	}
	for {
		l, err := br.ReadSlice('\n')
		if err != nil {
			return
		}
		if len(l) <= 2 {
			break
		}
	}
	up, err := net.Dial("tcp", f[1])
	if err != nil {
		return
	}
	defer up.Close()
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	if n := br.Buffered(); n > 0 {
		rest, _ := br.Peek(n)
		if _, err := up.Write(rest); err != nil {
			return
		}
	}
	copyBoth(c, up)
}

// dialTCP is net.Dial, failing the benchmark on an error.
func dialTCP(b *testing.B, addr string) net.Conn {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkThroughput: bulk bytes one way (up: the client sends; down: the
// client receives from a sendfile(2) server), each way on a connection it
// keeps open: direct on loopback, through a CONNECT tunnel and a forward,
// each copied with splice(2) and with the buffered copy, and through a
// bare relay (relayTo), the floor of any proxy. One op is a round
// (interleave): throughputBytes through every way, in turns. Compare the
// MB/s, each way's median.
func BenchmarkThroughput(b *testing.B) {
	const throughputBytes = 16 << 20
	up := startServer(b, "tcp", "127.0.0.1:0", sink)
	const fileSize = 4 << 20
	f := payload(b, fileSize)
	down := startServer(b, "tcp", "127.0.0.1:0", source(f, fileSize))
	tp := startProxy(b, Config{}, "127.0.0.1:*")
	forward := func(target string) string {
		fl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		tp.Forward(fl, "test forward", func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", target)
		})
		return fl.Addr().String()
	}
	relays := map[string]string{}
	for _, target := range []string{up.l.Addr().String(), down.l.Addr().String()} {
		relays[target] = startServer(b, "tcp", "127.0.0.1:0", relayTo(target)).l.Addr().String()
	}
	type dialer func(target, fwd string) (net.Conn, io.Reader)
	direct := func(target, _ string) (net.Conn, io.Reader) { c := dialTCP(b, target); return c, c }
	connect := func(target, _ string) (net.Conn, io.Reader) {
		c, br, _ := connectDial(b, tp.addr, target)
		return c, br
	}
	fwd := func(_, fwd string) (net.Conn, io.Reader) { return direct(fwd, "") }
	relay := func(target, _ string) (net.Conn, io.Reader) { return direct(relays[target], "") }
	dialers := []struct {
		name     string
		dial     dialer
		buffered bool
	}{
		{"direct", direct, false},
		{"connect-buffered", connect, true},
		{"connect-splice", connect, false},
		{"forward-buffered", fwd, true},
		{"forward-splice", fwd, false},
		{"relay-floor", relay, false},
	}
	chunk := make([]byte, benchChunk)
	// send sends n bytes and waits for the sink's answer; receive asks the
	// source for n bytes and reads them.
	send := func(b *testing.B, c net.Conn, r io.Reader, n int64) {
		var hdr [8]byte
		binary.BigEndian.PutUint64(hdr[:], uint64(n))
		if _, err := c.Write(hdr[:]); err != nil {
			b.Fatal(err)
		}
		for left := n; left > 0; {
			m, err := c.Write(chunk[:min(left, benchChunk)])
			if err != nil {
				b.Fatal(err)
			}
			left -= int64(m)
		}
		if _, err := io.ReadFull(r, chunk[:1]); err != nil {
			b.Fatal(err)
		}
	}
	receive := func(b *testing.B, c net.Conn, r io.Reader, n int64) {
		var hdr [8]byte
		binary.BigEndian.PutUint64(hdr[:], uint64(n))
		if _, err := c.Write(hdr[:]); err != nil {
			b.Fatal(err)
		}
		for got := int64(0); got < n; {
			m, err := r.Read(chunk[:min(n-got, benchChunk)])
			if err != nil {
				b.Fatal(err)
			}
			got += int64(m)
		}
	}
	for _, dir := range []struct {
		name   string
		target string
		fwd    string
		xfer   func(b *testing.B, c net.Conn, r io.Reader, n int64)
	}{
		{"up", up.l.Addr().String(), forward(up.l.Addr().String()), send},
		{"down", down.l.Addr().String(), forward(down.l.Addr().String()), receive},
	} {
		b.Run(dir.name, func(b *testing.B) {
			var ways []way
			for _, d := range dialers {
				// The proxy picks the copy when a connection's
				// streams start: one small exchange starts both.
				spliceDisabled.Store(d.buffered)
				c, r := d.dial(dir.target, dir.fwd)
				dir.xfer(b, c, r, 1)
				spliceDisabled.Store(false)
				defer c.Close()
				ways = append(ways, way{name: d.name, op: func(b *testing.B) { dir.xfer(b, c, r, throughputBytes) }})
			}
			report(b, ways, interleave(b, ways), throughputBytes)
		})
	}
}

// BenchmarkSetup: a connection's whole life as its client sees it
// (connect, one byte each way; the client and the echo server are
// processes of their own, bench_proc_test.go), direct and through each
// way into the proxy, in turns (interleave), each way's median. The
// difference is the latency the proxy adds to a connection's first byte;
// a forward's (no handshake) is the proxy's own part, copied either way,
// and the bare relay's (relayTo) what any relay in its place pays, with
// no policy; connect-floor is a bare CONNECT proxy (connectFloor): what
// any CONNECT proxy pays, whose dial waits for the request and whose
// client waits for the answer. direct-round-trip is a direct connection
// that makes one more round trip before its byte: the part of that a
// round trip alone costs.
func BenchmarkSetup(b *testing.B) {
	srv := startBenchProc(b, "echo")
	target := srv.line(b)
	tp := startProxy(b, Config{MaxConns: 4096}, "127.0.0.1:*")
	fl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	tp.Forward(fl, "test forward", func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", target)
	})
	relay := startServer(b, "tcp", "127.0.0.1:0", relayTo(target)).l.Addr().String()
	bareConnect := startServer(b, "tcp", "127.0.0.1:0", connectFloor).l.Addr().String()
	client := startBenchProc(b, "client")
	auth, _ := strings.CutPrefix(strings.TrimSuffix(authHeader(tp.addr), "\r\n"), "Proxy-Authorization: ")
	timed := func(req string) func(b *testing.B) time.Duration {
		return func(b *testing.B) time.Duration { return client.timed(b, req) }
	}
	ways := []way{
		{name: "direct", timed: timed("direct " + target)},
		{name: "direct-round-trip", timed: timed("direct-round-trip " + target)},
		{name: "connect", timed: timed("connect " + tp.addr + " " + target + " " + auth)},
		{name: "connect-floor", timed: timed("connect " + bareConnect + " " + target + " " + auth)},
		{name: "forward-buffered", buffered: true, timed: timed("forward " + fl.Addr().String())},
		{name: "forward-splice", timed: timed("forward " + fl.Addr().String())},
		{name: "relay-floor", timed: timed("relay " + relay)},
		{name: "socks5", timed: timed("socks5 " + tp.addr + " " + target + " " + userinfo(tp.addr))},
	}
	report(b, ways, interleave(b, ways), 0)
}
