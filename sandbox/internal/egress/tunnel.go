package egress

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// copyBufSize is the buffer each direction of a stream borrows while it
// copies: 64 KiB measured 0.6x a direct loopback connection's throughput
// where 32 KiB gave 0.5x (make bench); at the connection cap that is
// 32 MiB at most.
const copyBufSize = 64 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

func getBuf() *[]byte  { return bufPool.Get().(*[]byte) }
func putBuf(b *[]byte) { bufPool.Put(b) }

// join copies between client and upstream in both directions until both
// are done, then returns the bytes sent up (first included: bytes the client
// sent ahead, to go first) and down. A side that reaches EOF has the other
// side's write half shut (half-close), so a client that shuts down its
// writing still gets the whole answer; an error on either side tears both
// down. The caller closes both connections afterwards. dialled: upstream
// is the proxy's own dial's, whose keepalive it turns on here, out of the
// way of the client's first byte.
func (p *Proxy) join(client, upstream net.Conn, first []byte, dialled bool) (up, down int64) {
	if len(first) > 0 {
		n, err := upstream.Write(first)
		up += int64(n)
		if err != nil {
			return up, 0
		}
	}
	done := make(chan struct{})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(done)
		if dialled {
			keepAlive(upstream)
		}
		down = copyHalf(client, upstream)
	}()
	up += copyHalf(upstream, client)
	<-done
	return up, down
}

// copyHalf copies src to dst. At EOF it shuts dst's write side and leaves
// the rest of the connection alone (the other direction may still be
// running); on an error it closes both, which ends the other direction too.
func copyHalf(dst, src net.Conn) int64 {
	n, err := copyStream(dst, src)
	if err != nil {
		dst.Close()
		src.Close()
		return n
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		if cw.CloseWrite() != nil {
			dst.Close()
			src.Close()
		}
	} else {
		// Nothing to half-close: the whole connection has to go.
		dst.Close()
	}
	return n
}

// copyStream copies src to dst: with splice(2) through a pipe the stream
// owns (spliceStream) where both are stream sockets and a pipe can be
// made, else through a pooled buffer, so memory per connection stays
// bounded either way. Never through io.Copy's own splice(2) path between
// two TCP sockets: it borrows a pipe (two descriptors) per direction from a
// pool that only the garbage collector empties, so 200 concurrent tunnels
// left 800 descriptors open in corral afterwards, and under a
// 1,024-descriptor RLIMIT_NOFILE the proxy would starve corral of the
// descriptors its teardown needs. spliceStream's pipes close with the
// stream, so they are bounded by MaxConns; where one cannot be made
// (EMFILE) that stream is copied through a buffer instead of failing.
func copyStream(dst, src net.Conn) (int64, error) {
	if n, err, ok := spliceStream(dst, src, copyBuffered); ok {
		return n, err
	}
	return copyBuffered(dst, src)
}

// copyBuffered copies through a pooled buffer.
func copyBuffered(dst, src net.Conn) (int64, error) {
	buf := getBuf()
	defer putBuf(buf)
	return io.CopyBuffer(writerOnly{dst}, readerOnly{src}, *buf)
}

// spliceDisabled makes every stream take the buffered copy: for tests and
// benchmarks that compare the two.
var spliceDisabled atomic.Bool

// readerOnly and writerOnly hide ReadFrom and WriteTo, which would make
// io.CopyBuffer ignore the pooled buffer and allocate its own.
type readerOnly struct{ io.Reader }
type writerOnly struct{ io.Writer }

// limitedConn reads at most what its LimitedReader has left.
type limitedConn struct {
	net.Conn
	r *io.LimitedReader
}

func (c limitedConn) Read(b []byte) (int, error) { return c.r.Read(b) }
