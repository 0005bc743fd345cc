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
	"strconv"
	"syscall"
	"testing"
)

// benchChunk is what the benchmarks count as one op of bulk transfer.
const benchChunk = 256 << 10

// sink reads everything with a large buffer (io.Discard's 8 KiB reads
// would be the bottleneck, direct or not) and answers with one byte at
// EOF, so the writer knows every byte arrived.
func sink(c net.Conn) {
	buf := make([]byte, benchChunk)
	for {
		if _, err := c.Read(buf); err != nil {
			break
		}
	}
	c.Write([]byte{1})
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

// source answers an 8-byte count with that many bytes of a file, sent with
// sendfile(2) (io.CopyN of an *os.File to a TCP connection), as a static
// file server would.
func source(f *os.File, size int64) func(net.Conn) {
	return func(c net.Conn) {
		var hdr [8]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		for left := int64(binary.BigEndian.Uint64(hdr[:])); left > 0; {
			n := min(left, size)
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return
			}
			if _, err := io.CopyN(c, f, n); err != nil {
				return
			}
			left -= n
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
}

// BenchmarkThroughput: bulk bytes one way (up: the client sends; down: the
// client receives from a sendfile(2) server), direct on loopback and
// through a CONNECT tunnel and a forward, each copied with splice(2) and
// with the buffered copy, interleaved (run with -count), and through a
// bare relay (relayTo), the floor of any proxy. Compare the MB/s.
func BenchmarkThroughput(b *testing.B) {
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
	type dialer func(target, fwd string) (net.Conn, io.Reader)
	direct := func(target, _ string) (net.Conn, io.Reader) {
		c, err := net.Dial("tcp", target)
		if err != nil {
			b.Fatal(err)
		}
		return c, c
	}
	connect := func(target, _ string) (net.Conn, io.Reader) {
		c, br, _ := connectDial(b, tp.addr, target)
		return c, br
	}
	fwd := func(_, fwd string) (net.Conn, io.Reader) { return direct(fwd, "") }
	relays := map[string]string{}
	for _, target := range []string{up.l.Addr().String(), down.l.Addr().String()} {
		relays[target] = startServer(b, "tcp", "127.0.0.1:0", relayTo(target)).l.Addr().String()
	}
	relay := func(target, _ string) (net.Conn, io.Reader) { return direct(relays[target], "") }
	ways := []struct {
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
	upTarget, downTarget := up.l.Addr().String(), down.l.Addr().String()
	upFwd, downFwd := forward(upTarget), forward(downTarget)
	for _, w := range ways {
		b.Run("up/"+w.name, func(b *testing.B) {
			spliceDisabled.Store(w.buffered)
			defer spliceDisabled.Store(false)
			c, r := w.dial(upTarget, upFwd)
			defer c.Close()
			b.SetBytes(benchChunk)
			cpu := cpuMeter(b)
			b.ResetTimer()
			for range b.N {
				if _, err := c.Write(chunk); err != nil {
					b.Fatal(err)
				}
			}
			c.(*net.TCPConn).CloseWrite()
			if _, err := io.ReadFull(r, make([]byte, 1)); err != nil {
				b.Fatal(err)
			}
			cpu()
		})
	}
	for _, w := range ways {
		b.Run("down/"+w.name, func(b *testing.B) {
			spliceDisabled.Store(w.buffered)
			defer spliceDisabled.Store(false)
			c, r := w.dial(downTarget, downFwd)
			defer c.Close()
			b.SetBytes(benchChunk)
			cpu := cpuMeter(b)
			b.ResetTimer()
			want := int64(b.N) * benchChunk
			var hdr [8]byte
			binary.BigEndian.PutUint64(hdr[:], uint64(want))
			if _, err := c.Write(hdr[:]); err != nil {
				b.Fatal(err)
			}
			for got := int64(0); got < want; {
				n, err := r.Read(chunk)
				if err != nil {
					b.Fatal(err)
				}
				got += int64(n)
			}
			cpu()
		})
	}
}

// cpuMeter reports, when the returned func is called, the CPU time the
// whole process (client, proxy and server alike) spent per op since
// cpuMeter was called: on a shared machine a steadier figure than the wall
// clock's.
func cpuMeter(b *testing.B) func() {
	var r0 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	return func() {
		var r1 syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
		ns := (r1.Utime.Nano() + r1.Stime.Nano()) - (r0.Utime.Nano() + r0.Stime.Nano())
		b.ReportMetric(float64(ns)/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkSetup: a connection's whole life (connect, one byte each way,
// close), direct and through each way into the proxy. The difference is the
// latency the proxy adds to a connection's setup; a forward's (no
// handshake) is the proxy's own part, copied either way.
func BenchmarkSetup(b *testing.B) {
	srv := startServer(b, "tcp", "127.0.0.1:0", echo)
	target := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(srv.port())))
	tp := startProxy(b, Config{MaxConns: 4096}, "127.0.0.1:*")
	one := func(b *testing.B, c net.Conn, r io.Reader) {
		if _, err := c.Write([]byte{'x'}); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(r, make([]byte, 1)); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
	b.Run("direct", func(b *testing.B) {
		for range b.N {
			c, err := net.Dial("tcp", target)
			if err != nil {
				b.Fatal(err)
			}
			one(b, c, c)
		}
	})
	b.Run("connect", func(b *testing.B) {
		req := []byte("CONNECT " + target + " HTTP/1.1\r\n" + authHeader(tp.addr) + "\r\n")
		for range b.N {
			c, err := net.Dial("tcp", tp.addr)
			if err != nil {
				b.Fatal(err)
			}
			c.Write(req)
			br := bufio.NewReader(c)
			for {
				line, err := br.ReadSlice('\n')
				if err != nil {
					b.Fatal(err)
				}
				if len(line) == 2 {
					break
				}
			}
			one(b, c, br)
		}
	})
	fl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	tp.Forward(fl, "test forward", func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", target)
	})
	for _, buffered := range []bool{true, false} {
		name := "forward-splice"
		if buffered {
			name = "forward-buffered"
		}
		b.Run(name, func(b *testing.B) {
			spliceDisabled.Store(buffered)
			defer spliceDisabled.Store(false)
			for range b.N {
				c, err := net.Dial("tcp", fl.Addr().String())
				if err != nil {
					b.Fatal(err)
				}
				one(b, c, c)
			}
		})
	}
	b.Run("socks5", func(b *testing.B) {
		for range b.N {
			c, code := socksDial(b, tp.addr, socksAtypIPv4, "127.0.0.1", srv.port())
			if code != 0 {
				b.Fatal(code)
			}
			one(b, c, c)
		}
	})
}
