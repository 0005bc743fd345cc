//go:build linux

package egress

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fdCounts counts the process's descriptors and, among them, pipes.
func fdCounts(t testing.TB) (fds, pipes int) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, "pipe:") {
			pipes++
		}
	}
	return len(ents), pipes
}

// waitFDs waits, without a GC, until the descriptor count is back to at
// most base: the tunnels' pipes must close with them, not with a
// finalizer.
func waitFDs(t testing.TB, base int) {
	t.Helper()
	deadline := time.Now().Add(hangLimit)
	for {
		fds, pipes := fdCounts(t)
		if fds <= base {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d descriptors open (%d pipes), %d before the tunnels", fds, pipes, base)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// spew writes until its connection fails, with plain writes (io.Copy
// between sockets would splice through the runtime's pooled pipes and blur
// the count).
func spew(c net.Conn) {
	buf := bytes.Repeat([]byte{'x'}, 64<<10)
	for {
		if _, err := c.Write(buf); err != nil {
			return
		}
	}
}

// openBulkTunnels opens n tunnels to target, alternately CONNECT and the
// forward at fwd, and reads 1 MiB from each, so every one is splicing.
func openBulkTunnels(t *testing.T, tp *testProxy, target, fwd string, n int) []net.Conn {
	t.Helper()
	var cs []net.Conn
	for i := range n {
		var c net.Conn
		var r io.Reader
		if i%2 == 0 {
			var status string
			var br *bufio.Reader
			c, br, status = connectDial(t, tp.addr, target)
			if !strings.Contains(status, "200") {
				t.Fatal(status)
			}
			r = br
		} else {
			var err error
			if c, err = net.Dial("tcp", fwd); err != nil {
				t.Fatal(err)
			}
			r = c
		}
		cs = append(cs, c)
		c.SetDeadline(time.Now().Add(hangLimit))
		if _, err := io.ReadFull(io.LimitReader(r, 1<<20), make([]byte, 1<<20)); err != nil {
			t.Fatalf("tunnel %d: %v", i, err)
		}
	}
	return cs
}

// Tunnels splice through pipes of their own: at most two per tunnel (four
// descriptors) while they run, and every one closed when its tunnel ends,
// by the client going away or by Close, without waiting for a GC.
func TestSpliceDescriptorsBounded(t *testing.T) {
	const n = 40
	srv := startServer(t, "tcp", "127.0.0.1:0", spew)
	target := srv.l.Addr().String()
	tp := startProxy(t, Config{MaxConns: n}, "127.0.0.1:*")
	fl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp.Forward(fl, "test forward", func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", target)
	})
	fdBase, pipeBase := fdCounts(t)

	cs := openBulkTunnels(t, tp, target, fl.Addr().String(), n)
	fds, pipes := fdCounts(t)
	// Each tunnel: the client's socket, the proxy's two, the server's, and
	// two pipes.
	if pipes-pipeBase > 4*n {
		t.Errorf("%d pipe descriptors for %d tunnels, want at most %d", pipes-pipeBase, n, 4*n)
	}
	if pipes == pipeBase {
		t.Errorf("no pipe open: the tunnels did not splice")
	}
	if fds-fdBase > 8*n {
		t.Errorf("%d descriptors for %d tunnels, want at most %d", fds-fdBase, n, 8*n)
	}
	for _, c := range cs {
		c.Close()
	}
	waitFDs(t, fdBase)

	// Again, ended by Close this time, with each tunnel in the middle of a
	// transfer (blocked on the poller: the client reads no more).
	cs = openBulkTunnels(t, tp, target, fl.Addr().String(), n)
	done := make(chan error)
	go func() { done <- tp.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(hangLimit):
		t.Fatal("Close hangs")
	}
	for _, c := range cs {
		c.Close()
	}
	srv.close()
	waitFDs(t, fdBase)
	if gs := packageGoroutines(); len(gs) != 0 {
		t.Errorf("%d goroutines of the package left:\n%s", len(gs), strings.Join(gs, "\n\n"))
	}
}

// Where no pipe can be made (EMFILE under RLIMIT_NOFILE), a tunnel is
// copied through a buffer instead of failing, half-close and byte counts
// included.
func TestSpliceFallbackWithoutPipe(t *testing.T) {
	saved := openPipe
	var mu sync.Mutex
	failed := 0
	openPipe = func() (int, int, error) {
		mu.Lock()
		failed++
		mu.Unlock()
		return -1, -1, syscall.EMFILE
	}
	defer func() { openPipe = saved }()

	logPath := t.TempDir() + "/net.log"
	log, err := OpenLog(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	srv := startServer(t, "tcp", "127.0.0.1:0", answerAfterEOF)
	tp := startProxy(t, Config{Log: log}, "127.0.0.1:*")
	c, br, status := connectDial(t, tp.addr, srv.l.Addr().String())
	if !strings.Contains(status, "200") {
		t.Fatal(status)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(hangLimit))
	payload := bytes.Repeat([]byte("y"), 300<<10)
	if _, err := c.Write(payload); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(br)
	want := fmt.Sprintf("got %d bytes", len(payload))
	if err != nil || string(got) != want {
		t.Fatalf("%q %v, want %q", got, err, want)
	}
	c.Close()
	tp.Close()
	mu.Lock()
	if failed != 2 {
		t.Errorf("%d pipes asked for, want 2 (one per direction)", failed)
	}
	mu.Unlock()
	var end map[string]any
	for _, e := range readLog(t, logPath) {
		if e["event"] == "end" {
			end = e
		}
	}
	if end["bytes_up"] != float64(len(payload)) || end["bytes_down"] != float64(len(want)) {
		t.Errorf("end line %v", end)
	}
}
