package egress

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestConnectionCap(t *testing.T) {
	srv := startServer(t, "tcp", "127.0.0.1:0", echo)
	tp := startProxy(t, Config{MaxConns: 2}, "127.0.0.1:*")
	target := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(srv.port())))
	var held []net.Conn
	for range 2 {
		c, _, status := connectDial(t, tp.addr, target)
		if !strings.Contains(status, "200") {
			t.Fatalf("within the cap: %q", status)
		}
		held = append(held, c)
	}
	// Both tunnels are up, so both slots are taken.
	c, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(hangLimit))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\n%s\r\n", target, authHeader(tp.addr))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	c.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(body), "too many connections at once (limit 2)") {
		t.Errorf("over the cap: %s %q", resp.Status, body)
	}
	sc, code := socksDial(t, tp.addr, socksAtypIPv4, "127.0.0.1", srv.port())
	sc.Close()
	if code != socksGeneralFailure {
		t.Errorf("SOCKS over the cap: reply %d", code)
	}
	if got := tp.stderr.lines(); len(got) != 1 || !strings.Contains(got[0], "beyond 2 at once") {
		t.Errorf("stderr %q", got)
	}
	// A slot freed is a slot usable.
	held[0].Close()
	deadline := time.Now().Add(hangLimit)
	for {
		c, _, status := connectDial(t, tp.addr, target)
		c.Close()
		if strings.Contains(status, "200") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot never freed: %q", status)
		}
		time.Sleep(10 * time.Millisecond)
	}
	held[1].Close()
}

func TestHandshakeTimeout(t *testing.T) {
	srv := startServer(t, "tcp", "127.0.0.1:0", echo)
	tp := startProxy(t, Config{HandshakeTimeout: 100 * time.Millisecond}, "127.0.0.1:*")
	// A silent client and one that stops half-way are both closed.
	for _, send := range []string{"", "CONNECT 127.0.0.1:1 HTTP/1.1\r\nX-Slow: "} {
		c, err := net.Dial("tcp", tp.addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, send)
		c.SetReadDeadline(time.Now().Add(hangLimit))
		n, err := c.Read(make([]byte, 1))
		c.Close()
		if n != 0 || err != io.EOF {
			t.Errorf("after %q: %d %v; want EOF from the proxy", send, n, err)
		}
	}
	// An established tunnel has no timeout: idle for longer, still works.
	c, br, status := connectDial(t, tp.addr, net.JoinHostPort("127.0.0.1", strconv.Itoa(int(srv.port()))))
	defer c.Close()
	if !strings.Contains(status, "200") {
		t.Fatal(status)
	}
	time.Sleep(300 * time.Millisecond) // the behaviour under test: idle past the handshake timeout
	c.SetDeadline(time.Now().Add(hangLimit))
	io.WriteString(c, "still here")
	buf := make([]byte, 10)
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "still here" {
		t.Errorf("idle tunnel: %q %v", buf, err)
	}
}

// Close during a long tunnel closes both sides (the destination sees EOF),
// returns promptly, and leaves no goroutine and no descriptor behind.
func TestCloseDuringTunnel(t *testing.T) {
	seenEOF := make(chan error, 4)
	srv := startServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
		buf := make([]byte, 1024)
		for {
			if _, err := c.Read(buf); err != nil {
				seenEOF <- err
				return
			}
		}
	})
	fwdUp := make(chan struct{}, 1)
	fwdSrv := startServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
		fwdUp <- struct{}{}
		_, err := io.Copy(io.Discard, c)
		seenEOF <- err
	})
	fdBase := openFDs(t)
	tp := startProxy(t, Config{}, "127.0.0.1:*")
	fl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp.Forward(fl, "test forward", func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", fwdSrv.l.Addr().String())
	})
	// Also a client stuck in its handshake.
	stuck, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	c1, _, status := connectDial(t, tp.addr, srv.l.Addr().String())
	if !strings.Contains(status, "200") {
		t.Fatal(status)
	}
	defer c1.Close()
	c2, code := socksDial(t, tp.addr, socksAtypIPv4, "127.0.0.1", srv.port())
	if code != 0 {
		t.Fatal(code)
	}
	defer c2.Close()
	c3, err := net.Dial("tcp", fl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	for _, c := range []net.Conn{c1, c2, c3} {
		io.WriteString(c, "data")
	}
	select {
	case <-fwdUp: // the forward's other end exists
	case <-time.After(hangLimit):
		t.Fatal("the forward never connected")
	}

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
	for range 3 {
		select {
		case err := <-seenEOF:
			if err != nil && err != io.EOF {
				t.Logf("destination saw %v", err)
			}
		case <-time.After(hangLimit):
			t.Fatal("a destination never saw its connection end")
		}
	}
	for _, c := range []net.Conn{c1, c2, c3, stuck} {
		c.SetReadDeadline(time.Now().Add(hangLimit))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Error("a client's connection is still open")
		}
	}
	if _, err := net.Dial("tcp", tp.addr); err == nil {
		t.Error("the proxy's listener still accepts")
	}
	for _, c := range []net.Conn{c1, c2, c3, stuck} {
		c.Close()
	}
	waitFlat(t, fdBase)
}

func TestForwardDialFailure(t *testing.T) {
	fdBase := openFDs(t)
	tp := startProxy(t, Config{})
	fl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp.Forward(fl, "test forward", func(ctx context.Context) (net.Conn, error) {
		return nil, errors.New("nothing listens inside")
	})
	for range 3 {
		c, err := net.Dial("tcp", fl.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(hangLimit))
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("read %v; want EOF", err)
		}
		c.Close()
	}
	if got := tp.stderr.lines(); len(got) != 1 || !strings.Contains(got[0], "nothing listens inside") {
		t.Errorf("stderr %q", got)
	}
	tp.Close()
	waitFlat(t, fdBase)
}

// readLog reads the log's lines, checking each is one JSON object with
// exactly the keys of a decision or an end line, ids in order, times
// that never go back, and one run id on every line (the file holds one
// run); it returns them without the run id.
func readLog(t testing.TB, path string) []map[string]any {
	t.Helper()
	data, _ := os.ReadFile(path)
	var out []map[string]any
	var lastTime time.Time
	run := ""
	for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if l == "" {
			continue
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		keys := strings.Join(slices.Sorted(maps.Keys(e)), ",")
		decision, end := "address,decision,host,id,port,reason,run,time,via", "bytes_down,bytes_up,duration_ms,event,id,run,time,via"
		if keys != decision && keys != end && keys != decision[:len("address,decision,host,id")]+",left_out,port,reason,run,time,via" {
			t.Errorf("%q: keys %s; want a decision line's (%s) or an end line's (%s)", l, keys, decision, end)
		}
		r, _ := e["run"].(string)
		if run == "" {
			run = r
		}
		if len(r) != 12 || strings.Trim(r, "0123456789abcdef") != "" || r != run {
			t.Errorf("%q: run %q; want the run's 12 hex digits (%q) on every line", l, r, run)
		}
		delete(e, "run")
		if v := e["via"]; v != ViaProxy && v != ViaDirect && v != ViaDNS {
			t.Errorf("%q: via %v; want proxy, direct or dns", l, v)
		}
		ts, err := time.Parse(time.RFC3339, e["time"].(string))
		if err != nil || !strings.HasSuffix(e["time"].(string), "Z") || ts.Before(lastTime) {
			t.Errorf("time %v (%v) after %v", e["time"], err, lastTime)
		}
		lastTime = ts
		out = append(out, e)
	}
	return out
}

// The log has a decision line for every attempt the moment it is decided
// (so a corral killed during a tunnel has logged it), an end line with the
// payload bytes when an allowed one closes, and ids that increase.
func TestNetLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "net.log")
	log, err := OpenLog(path)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	srv := startServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
		n, _ := io.Copy(io.Discard, c)
		io.WriteString(c, strings.Repeat("d", int(n)*2))
	})
	res := &fakeResolver{addrs: map[string][]string{"svc.test": {"127.0.0.1"}}}
	tp := startProxy(t, Config{Log: log, Resolver: res}, "svc.test:*", "127.0.0.1:*")

	c, br, _ := connectDial(t, tp.addr, net.JoinHostPort("svc.test", strconv.Itoa(int(srv.port()))))
	// The tunnel is up and nothing has crossed it: its decision is logged.
	if got := readLog(t, path); len(got) != 1 || got[0]["decision"] != "allow" || got[0]["address"] != "127.0.0.1" {
		t.Fatalf("with the tunnel open, the log holds %v; want its decision line", got)
	}
	io.WriteString(c, strings.Repeat("u", 100))
	c.(*net.TCPConn).CloseWrite()
	got, _ := io.ReadAll(br)
	c.Close()
	if len(got) != 200 {
		t.Fatalf("got %d bytes", len(got))
	}
	c, code := socksDial(t, tp.addr, socksAtypDomain, "svc.test", srv.port())
	io.WriteString(c, "1234567")
	c.(*net.TCPConn).CloseWrite()
	io.ReadAll(c)
	c.Close()
	if code != 0 {
		t.Fatalf("SOCKS reply %d", code)
	}
	c, _, _ = connectDial(t, tp.addr, "evil.test:443")
	c.Close()
	tp.Close() // every line is written by now

	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != 0o600 {
		t.Errorf("mode %v; want 0600", fi.Mode())
	}
	lines := readLog(t, path)
	ids := map[float64]map[string]any{}
	var decisions, ends []map[string]any
	for i, e := range lines {
		if e["event"] == "end" {
			if ids[e["id"].(float64)] == nil {
				t.Errorf("end line %v before its decision line", e)
			}
			if d, _ := e["duration_ms"].(float64); d < 0 {
				t.Errorf("end line %v: negative duration", e)
			}
			delete(e, "duration_ms")
			ends = append(ends, e)
		} else {
			if e["id"] != float64(len(decisions)+1) {
				t.Errorf("line %d: id %v; want %d (ids increase from 1)", i, e["id"], len(decisions)+1)
			}
			ids[e["id"].(float64)] = e
			decisions = append(decisions, e)
		}
		delete(e, "time")
	}
	// End lines come as tunnels close, not in id order.
	slices.SortFunc(ends, func(a, b map[string]any) int { return int(a["id"].(float64) - b["id"].(float64)) })
	port := float64(srv.port())
	wantDecisions := []map[string]any{
		{"id": 1.0, "host": "svc.test", "port": port, "address": "127.0.0.1", "decision": "allow", "reason": "allowed by svc.test:*", "via": "proxy"},
		{"id": 2.0, "host": "svc.test", "port": port, "address": "127.0.0.1", "decision": "allow", "reason": "allowed by svc.test:*", "via": "proxy"},
		{"id": 3.0, "host": "evil.test", "port": 443.0, "address": "", "decision": "deny", "reason": "no rule allows this host", "via": "proxy"},
	}
	wantEnds := []map[string]any{
		{"id": 1.0, "event": "end", "bytes_up": 100.0, "bytes_down": 200.0, "via": "proxy"},
		{"id": 2.0, "event": "end", "bytes_up": 7.0, "bytes_down": 14.0, "via": "proxy"},
	}
	if fmt.Sprint(decisions) != fmt.Sprint(wantDecisions) || fmt.Sprint(ends) != fmt.Sprint(wantEnds) {
		t.Errorf("decision lines %v\nend lines %v\nwant %v\nand %v", decisions, ends, wantDecisions, wantEnds)
	}
}

// An absolute-URI request counts what went to and came from the origin.
func TestNetLogAbsoluteURI(t *testing.T) {
	path := filepath.Join(t.TempDir(), "net.log")
	log, err := OpenLog(path)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	var reqBytes int
	srv := startServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		var b strings.Builder
		req.Write(&b)
		reqBytes = b.Len()
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
	})
	tp := startProxy(t, Config{Log: log}, "127.0.0.1:*")
	resp, err := proxyClient(t, tp.addr, nil).Get(fmt.Sprintf("http://127.0.0.1:%d/x", srv.port()))
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	tp.Close()
	srv.close()
	lines := readLog(t, path)
	if len(lines) != 2 || lines[0]["decision"] != "allow" || lines[1]["event"] != "end" {
		t.Fatalf("lines %v", lines)
	}
	e := lines[1]
	if e["bytes_down"] != float64(len("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")) || e["bytes_up"] == 0.0 {
		t.Errorf("%+v (origin saw a %d-byte request)", e, reqBytes)
	}
}

func TestOpenLogRefuses(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte("precious\n"), 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink(target, link)
	if _, err := OpenLog(link); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("symlink: %v", err)
	}
	dangling := filepath.Join(dir, "dangling")
	os.Symlink(filepath.Join(dir, "created-through-link"), dangling)
	if _, err := OpenLog(dangling); err == nil {
		t.Error("dangling symlink followed")
	}
	if _, err := os.Lstat(filepath.Join(dir, "created-through-link")); err == nil {
		t.Error("a file was created through the symlink")
	}
	if data, _ := os.ReadFile(target); string(data) != "precious\n" {
		t.Errorf("target changed: %q", data)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenLog(fifo); err == nil {
		t.Error("a FIFO was accepted")
	}
	if _, err := OpenLog(dir); err == nil {
		t.Error("a directory was accepted")
	}
	// An existing file is appended to, its mode left as the user set it.
	l, err := OpenLog(target)
	if err != nil {
		t.Fatal(err)
	}
	l.decision(&DecisionLine{Host: "x"}, nil)
	l.Close()
	if data, _ := os.ReadFile(target); !strings.HasPrefix(string(data), "precious\n{") {
		t.Errorf("not appended: %q", data)
	}
}

func TestLogWriteFailureWarnsOnce(t *testing.T) {
	f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /dev/full:", err)
	}
	l := &Log{f: f, path: "/dev/full"}
	defer l.Close()
	var warn syncBuffer
	for range 3 {
		l.decision(&DecisionLine{}, &warn)
	}
	if got := warn.lines(); len(got) != 1 || !strings.Contains(got[0], "cannot write --net-log /dev/full") {
		t.Errorf("warnings %q", got)
	}
}

// 200 concurrent tunnels, then 1,000 sequential ones, leave the descriptor
// count and the goroutines where they were.
func TestLoadFlat(t *testing.T) {
	srv := startServer(t, "tcp", "127.0.0.1:0", echo)
	target := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(srv.port())))
	tp := startProxy(t, Config{MaxConns: 256}, "127.0.0.1:*")
	roundTrip := func(i int) error {
		var c net.Conn
		var r io.Reader
		if i%2 == 0 {
			var status string
			var br *bufio.Reader
			c, br, status = connectDial(t, tp.addr, target)
			if !strings.Contains(status, "200") {
				c.Close()
				return fmt.Errorf("status %q", status)
			}
			r = br
		} else {
			var code byte
			c, code = socksDial(t, tp.addr, socksAtypIPv4, "127.0.0.1", srv.port())
			if code != 0 {
				c.Close()
				return fmt.Errorf("reply %d", code)
			}
			r = c
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(hangLimit))
		msg := fmt.Sprintf("message %d", i)
		io.WriteString(c, msg)
		c.(*net.TCPConn).CloseWrite()
		got, err := io.ReadAll(r)
		if err != nil || string(got) != msg {
			return fmt.Errorf("%q %v", got, err)
		}
		return nil
	}
	// Warm up the pools, so that what they keep is in the baseline.
	for i := range 4 {
		if err := roundTrip(i); err != nil {
			t.Fatal(err)
		}
	}
	runtimeGCWait(t)
	fdBase := openFDs(t)

	var wg sync.WaitGroup
	errs := make(chan error, 200)
	start := make(chan struct{})
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if err := roundTrip(i); err != nil {
				errs <- err
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range 1000 {
		if err := roundTrip(i); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	waitIdle(t, tp.Proxy, fdBase)
	if s := tp.stderr.String(); s != "" {
		t.Errorf("stderr %q", s)
	}
}

// waitIdle waits until the proxy serves nothing and the descriptor count
// is back to base (the proxy's own goroutines, its accept loop aside, gone).
func waitIdle(t testing.TB, p *Proxy, fdBase int) {
	t.Helper()
	deadline := time.Now().Add(hangLimit)
	for {
		runtimeGCWait(t)
		p.mu.Lock()
		active, conns := p.active, len(p.conns)
		p.mu.Unlock()
		fds := openFDs(t)
		gs := len(packageGoroutines())
		if active == 0 && conns == 0 && fds <= fdBase && gs == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not flat: %d active, %d conns, %d fds (%d at start), %d goroutines of the package (1 accept loop)", active, conns, fds, fdBase, gs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func runtimeGCWait(t testing.TB) {
	t.Helper()
	// Two cycles: sync.Pool keeps a victim generation for one GC.
	for range 2 {
		runtimeGC()
	}
}

// A forward over the cap is closed at once, with the cap's stderr line.
func TestForwardCap(t *testing.T) {
	srv := startServer(t, "tcp", "127.0.0.1:0", echo)
	tp := startProxy(t, Config{MaxConns: 1})
	fl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp.Forward(fl, "test forward", func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", srv.l.Addr().String())
	})
	held, err := net.Dial("tcp", fl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	held.SetDeadline(time.Now().Add(hangLimit))
	io.WriteString(held, "x")
	if _, err := io.ReadFull(held, make([]byte, 1)); err != nil {
		t.Fatal(err) // the first one is through: the slot is taken
	}
	c, err := net.Dial("tcp", fl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(hangLimit))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("over the cap: %v; want EOF at once", err)
	}
	if got := tp.stderr.lines(); len(got) != 1 || !strings.Contains(got[0], "beyond 1 at once") {
		t.Errorf("stderr %q", got)
	}
}
