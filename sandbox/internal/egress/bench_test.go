package egress

import (
	"bufio"
	"context"
	"io"
	"net"
	"strconv"
	"testing"
)

// sink counts what it reads and answers with one byte at EOF, so the
// writer knows every byte arrived.
func sink(c net.Conn) {
	io.Copy(io.Discard, c)
	c.Write([]byte{1})
}

// BenchmarkThroughput: bulk bytes one way, direct on loopback and through
// a CONNECT tunnel and a forward. Compare the MB/s.
func BenchmarkThroughput(b *testing.B) {
	srv := startServer(b, "tcp", "127.0.0.1:0", sink)
	target := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(srv.port())))
	tp := startProxy(b, Config{}, "127.0.0.1:*")
	fl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	tp.Forward(fl, "test forward", func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", target)
	})
	chunk := make([]byte, 256<<10)
	run := func(b *testing.B, dial func() (net.Conn, io.Reader)) {
		c, r := dial()
		defer c.Close()
		b.SetBytes(int64(len(chunk)))
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
	}
	b.Run("direct", func(b *testing.B) {
		run(b, func() (net.Conn, io.Reader) {
			c, err := net.Dial("tcp", target)
			if err != nil {
				b.Fatal(err)
			}
			return c, c
		})
	})
	b.Run("connect", func(b *testing.B) {
		run(b, func() (net.Conn, io.Reader) {
			c, br, _ := connectDial(b, tp.addr, target)
			return c, br
		})
	})
	b.Run("forward", func(b *testing.B) {
		run(b, func() (net.Conn, io.Reader) {
			c, err := net.Dial("tcp", fl.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			return c, c
		})
	})
}

// BenchmarkSetup: a connection's whole life (connect, one byte each way,
// close), direct and through each way into the proxy. The difference is the
// latency the proxy adds to a connection's setup.
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
