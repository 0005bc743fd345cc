package egress

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The proxy is the run's own: a request without the run's credentials, or
// with wrong ones, gets 407 with a Basic challenge (HTTP) or no acceptable
// method / a failed RFC 1929 check (SOCKS5), reaches no server, and is
// logged without a destination. The credentials differ per Proxy.
func TestCredentialsRequired(t *testing.T) {
	path := filepath.Join(t.TempDir(), "net.log")
	log, err := OpenLog(path)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	reached := make(chan struct{}, 10)
	srv := startServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) { reached <- struct{}{} })
	tp := startProxy(t, Config{Log: log}, "127.0.0.1:*")
	other := startProxy(t, Config{}, "127.0.0.1:*")
	if tp.Userinfo() == other.Userinfo() || len(tp.Userinfo()) < 40 {
		t.Fatalf("credentials %q and %q: want long and different per Proxy", tp.Userinfo(), other.Userinfo())
	}
	target := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(srv.port())))
	for _, auth := range []string{
		"",
		authHeader(other.addr), // another run's
		"Proxy-Authorization: Basic " + strings.Repeat("A", 20) + "\r\n",
		"Proxy-Authorization: Bearer x\r\n",
	} {
		for _, req := range []string{
			"CONNECT " + target + " HTTP/1.1\r\n" + auth + "\r\n",
			"GET http://" + target + "/ HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n",
		} {
			c, err := net.Dial("tcp", tp.addr)
			if err != nil {
				t.Fatal(err)
			}
			c.SetDeadline(time.Now().Add(hangLimit))
			io.WriteString(c, req)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			c.Close()
			if err != nil {
				t.Fatalf("%q: %v", req, err)
			}
			if resp.StatusCode != 407 || resp.Header.Get("Proxy-Authenticate") != `Basic realm="corral"` {
				t.Errorf("%q: %s %v; want 407 with Proxy-Authenticate: Basic realm=\"corral\"", req, resp.Status, resp.Header)
			}
		}
	}
	user, _, _ := strings.Cut(tp.Userinfo(), ":")
	for _, tc := range []struct {
		name        string
		send, reply []byte
	}{
		{"no authentication offered", []byte{5, 1, 0}, []byte{5, 0xff}},
		{"wrong password", append(append([]byte{5, 1, 2, 1, byte(len(user))}, user...), 1, 'x'), []byte{5, 2, 1, 1}},
		{"another run's", socksAuth(other.addr), []byte{5, 2, 1, 1}},
	} {
		c, err := net.Dial("tcp", tp.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(hangLimit))
		c.Write(tc.send)
		got, _ := io.ReadAll(c)
		c.Close()
		if string(got) != string(tc.reply) {
			t.Errorf("SOCKS5 %s: reply % x; want % x", tc.name, got, tc.reply)
		}
	}
	select {
	case <-reached:
		t.Error("a request without the credentials reached the server")
	case <-time.After(50 * time.Millisecond):
	}
	tp.Close()
	// A request without credentials is a challenge (git, Java and others
	// send their first one bare, then retry with the proxy URL's), naming
	// its destination; wrong credentials are a refusal without one.
	challenges := 0
	for _, e := range readLog(t, path) {
		r := e["reason"].(string)
		switch {
		case e["decision"] == "challenge":
			challenges++
			if e["host"] != "127.0.0.1" || e["port"] != float64(srv.port()) || r != reasonNoCredentials {
				t.Errorf("log line %v: want a challenge naming %s and the missing credentials", e, target)
			}
		case e["decision"] != "deny" || e["host"] != "" || !strings.Contains(r, "credentials") && !strings.Contains(r, "left out"):
			t.Errorf("log line %v: want a deny without a destination, naming the credentials", e)
		}
	}
	if challenges != 2 {
		t.Errorf("%d challenge lines; want 2 (a bare CONNECT and a bare absolute-URI request)", challenges)
	}
	if tp.stderr.String() != "" {
		t.Errorf("stderr %q; want nothing: no destination was refused by the policy", tp.stderr.String())
	}
}

// Connections that never authenticate do not hold the connection cap: with
// MaxConns 2 and five silent clients connected, the runner's authenticated
// request is still served at once.
func TestUnauthenticatedDoNotFillCap(t *testing.T) {
	srv := startServer(t, "tcp", "127.0.0.1:0", echo)
	tp := startProxy(t, Config{MaxConns: 2}, "127.0.0.1:*")
	for range 5 {
		c, err := net.Dial("tcp", tp.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "CONNECT 127.0.0.1:1 HTTP/1.1\r\n") // and never more
	}
	time.Sleep(50 * time.Millisecond) // let the proxy accept them all
	for range 2 {
		c, _, status := connectDial(t, tp.addr, net.JoinHostPort("127.0.0.1", strconv.Itoa(int(srv.port()))))
		defer c.Close()
		if !strings.Contains(status, "200") {
			t.Fatalf("an authenticated CONNECT behind 5 silent clients: %q", status)
		}
	}
}

// Refusals before a destination is known reach the log at most 10 a
// second, and the lines that do (or one at Close) count those left out.
func TestEarlyRefusalsRateLimited(t *testing.T) {
	path := filepath.Join(t.TempDir(), "net.log")
	log, err := OpenLog(path)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	tp := startProxy(t, Config{Log: log}, "127.0.0.1:*")
	const n = 40
	start := time.Now()
	for range n {
		c, err := net.Dial("tcp", tp.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(hangLimit))
		io.WriteString(c, "CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n")
		io.ReadAll(c)
		c.Close()
	}
	elapsed := time.Since(start)
	tp.Close()
	lines := readLog(t, path)
	total := 0
	for _, e := range lines {
		if e["reason"] != "refusals left out of the log (rate limit)" {
			total++ // a refusal's own line, not the count written at Close
		}
		if lo, ok := e["left_out"].(float64); ok {
			total += int(lo)
		}
	}
	if max := refusalsPerSecond*(int(elapsed/time.Second)+1) + 1; len(lines) > max {
		t.Errorf("%d lines in %v; want at most %d", len(lines), elapsed, max)
	}
	if total != n {
		t.Errorf("lines plus left_out counts = %d; want the %d refusals:\n%v", total, n, lines)
	}
}

// Over the cap, an authenticated request is refused and logged with its
// destination.
func TestOverCapLogged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "net.log")
	log, err := OpenLog(path)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	srv := startServer(t, "tcp", "127.0.0.1:0", echo)
	tp := startProxy(t, Config{MaxConns: 1, Log: log}, "127.0.0.1:*")
	target := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(srv.port())))
	held, _, _ := connectDial(t, tp.addr, target)
	defer held.Close()
	c, _, status := connectDial(t, tp.addr, target)
	c.Close()
	if !strings.Contains(status, "503") {
		t.Fatalf("over the cap: %q", status)
	}
	lines := readLog(t, path)
	last := lines[len(lines)-1]
	if last["decision"] != "deny" || last["host"] != "127.0.0.1" || !strings.Contains(last["reason"].(string), "too many connections") {
		t.Errorf("log %v: want the over-cap refusal with its destination", lines)
	}
}

// Forwards (--host-port, --publish) are logged like proxied connections;
// Direct logs a refused direct attempt and names it once on stderr.
func TestForwardAndDirectLogged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "net.log")
	log, err := OpenLog(path)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	srv := startServer(t, "tcp", "127.0.0.1:0", answerAfterEOF)
	tp := startProxy(t, Config{Log: log})
	fl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp.Forward(fl, "--host-port 5432", func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", srv.l.Addr().String())
	})
	c, err := net.Dial("tcp", fl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(hangLimit))
	io.WriteString(c, "hello")
	c.(*net.TCPConn).CloseWrite()
	got, _ := io.ReadAll(c)
	c.Close()
	if string(got) != "got 5 bytes" {
		t.Fatalf("forward: %q", got)
	}
	// The forward's end line is written when the proxy sees the close:
	// wait for it, so that the lines below come in a known order.
	for deadline := time.Now().Add(hangLimit); len(readLog(t, path)) < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no end line for the forward: %v", readLog(t, path))
		}
	}
	for range 2 {
		tp.Direct(netip.MustParseAddrPort("[::ffff:192.0.2.7]:443"), "connect past the proxy")
	}
	tp.Close()
	lines := readLog(t, path)
	flPort := float64(fl.Addr().(*net.TCPAddr).Port)
	want := []string{
		fmt.Sprintf("map[address:127.0.0.1 decision:allow host:127.0.0.1 id:1 port:%v reason:--host-port 5432 via:direct]", flPort),
		"map[bytes_down:11 bytes_up:5 event:end id:1 via:direct]",
		// Once per destination in the log too: a runner that retries
		// without end must not grow it without end.
		"map[address:192.0.2.7 decision:deny host:192.0.2.7 id:2 port:443 reason:connect past the proxy via:direct]",
	}
	if len(lines) != len(want) {
		t.Fatalf("log %v; want %v", lines, want)
	}
	for i, e := range lines {
		delete(e, "time")
		delete(e, "duration_ms")
		if fmt.Sprint(e) != want[i] {
			t.Errorf("line %d: %v; want %s", i, e, want[i])
		}
	}
	if got := tp.stderr.String(); got != "corral: network: denied direct connection to 192.0.2.7:443: the command has no network (--net none)\n" { // a proxy without rules: --net none
		t.Errorf("stderr %q; want one line for the destination", got)
	}
}

// Config.Deny reaches the proxy's decision: a deny entry refuses where an
// allow entry admits, with a 403 naming it.
func TestProxyDeny(t *testing.T) {
	srv := startServer(t, "tcp", "127.0.0.1:0", echo)
	deny, err := ParseDenyRule("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	tp := startProxy(t, Config{Deny: []Rule{deny}}, "127.0.0.0/8:*")
	c, br, status := connectDial(t, tp.addr, net.JoinHostPort("127.0.0.1", strconv.Itoa(int(srv.port()))))
	body, _ := io.ReadAll(br)
	c.Close()
	if !strings.Contains(status, "403") || !strings.Contains(string(body), "denied by --deny-net 127.0.0.1") {
		t.Errorf("%q %q; want 403 naming the deny entry", status, body)
	}
}

// constantTimeEqual answers as == does, for every kind of difference.
func TestConstantTimeEqual(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 1},
		{"corral-0123", "corral-0123", 1},
		{"corral-0123", "corral-0124", 0},
		{"xorral-0123", "corral-0123", 0},
		{"corral-0123", "corral-012", 0},
		{"", "a", 0},
		{"\x80", "\x00", 0},
		{"\xff", "\xff", 1},
	} {
		if got := constantTimeEqual(c.a, c.b); got != c.want {
			t.Errorf("constantTimeEqual(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// Each proxy's credentials are fresh random hexadecimal.
func TestCredentialsRandom(t *testing.T) {
	a, err := newCredentials()
	if err != nil {
		t.Fatal(err)
	}
	b, err := newCredentials()
	if err != nil {
		t.Fatal(err)
	}
	if a == b || a.user == b.user || a.pass == b.pass {
		t.Fatalf("two proxies got the same credentials: %+v %+v", a, b)
	}
	if len(a.user) != len("corral-")+16 || len(a.pass) != 32 || !strings.HasPrefix(a.user, "corral-") {
		t.Fatalf("credentials of the wrong shape: %+v", a)
	}
	if _, err := hex.DecodeString(a.pass); err != nil {
		t.Fatalf("password %q is not hexadecimal: %v", a.pass, err)
	}
}
