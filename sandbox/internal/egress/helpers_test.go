package egress

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// hangLimit bounds every wait a test makes, to catch a hang, not to time
// anything.
const hangLimit = 10 * time.Second

// syncBuffer is a stderr the proxy's goroutines can write while a test
// reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) lines() []string {
	out := strings.TrimSuffix(s.String(), "\n")
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

type testProxy struct {
	*Proxy
	addr   string
	stderr *syncBuffer
}

// startProxy serves a Proxy for cfg on a fresh loopback listener; the test's
// cleanup closes it.
func startProxy(t testing.TB, cfg Config, rules ...string) *testProxy {
	t.Helper()
	cfg.Rules = append(cfg.Rules, mustRules(t, rules...)...)
	stderr := &syncBuffer{}
	if cfg.Stderr == nil {
		cfg.Stderr = stderr
	}
	l, err := Listen("tcp", "127.0.0.1:0") // as subreaper mode's
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewProxy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.Serve(l)
	t.Cleanup(func() { p.Close() })
	proxyUserinfo.Store(l.Addr().String(), p.Userinfo())
	return &testProxy{Proxy: p, addr: l.Addr().String(), stderr: stderr}
}

// proxyUserinfo maps a test proxy's address to its USER:PASS, so the
// clients below authenticate as the runner's do.
var proxyUserinfo sync.Map

func userinfo(proxyAddr string) string {
	v, _ := proxyUserinfo.Load(proxyAddr)
	s, _ := v.(string)
	return s
}

// authHeader is the Proxy-Authorization line (with its CRLF) the proxy at
// proxyAddr wants.
func authHeader(proxyAddr string) string {
	return "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(userinfo(proxyAddr))) + "\r\n"
}

// socksAuth is the method offer and RFC 1929 request of the proxy's
// credentials; the proxy answers it with socksAuthOK.
func socksAuth(proxyAddr string) []byte {
	user, pass, _ := strings.Cut(userinfo(proxyAddr), ":")
	b := []byte{5, 1, 2, 1, byte(len(user))}
	b = append(append(b, user...), byte(len(pass)))
	return append(b, pass...)
}

var socksAuthOK = []byte{5, 2, 1, 0}

// server is a loopback TCP server running handle per connection, closed
// (with every connection) by the test's cleanup.
type server struct {
	l     net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

func startServer(t testing.TB, network, addr string, handle func(net.Conn)) *server {
	t.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &server{l: l}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				handle(c)
			}()
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *server) close() {
	s.l.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *server) port() uint16 { return uint16(s.l.Addr().(*net.TCPAddr).Port) }

// echo copies what it reads back until EOF, then half-closes.
func echo(c net.Conn) {
	io.Copy(c, c)
	c.(*net.TCPConn).CloseWrite()
}

// answerAfterEOF reads everything, then answers with how many bytes it got,
// the case half-close exists for.
func answerAfterEOF(c net.Conn) {
	n, _ := io.Copy(io.Discard, c)
	fmt.Fprintf(c, "got %d bytes", n)
}

// socksDial runs a SOCKS5 CONNECT through the proxy at proxyAddr and
// returns the connection and the reply code. atyp selects the address
// form; for atypDomain host is sent as is.
func socksDial(t testing.TB, proxyAddr string, atyp byte, host string, port uint16) (net.Conn, byte) {
	t.Helper()
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(hangLimit))
	req := socksAuth(proxyAddr)
	switch atyp {
	case socksAtypIPv4:
		a := netip.MustParseAddr(host).As4()
		req = append(append(req, 5, 1, 0, atyp), a[:]...)
	case socksAtypIPv6:
		a := netip.MustParseAddr(host).As16()
		req = append(append(req, 5, 1, 0, atyp), a[:]...)
	default:
		req = append(append(req, 5, 1, 0, atyp, byte(len(host))), host...)
	}
	req = binary.BigEndian.AppendUint16(req, port)
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	var reply [12]byte
	if _, err := io.ReadFull(c, reply[:4]); err != nil {
		t.Fatalf("method and authentication reply: %v", err)
	}
	if !bytes.Equal(reply[:4], socksAuthOK) {
		t.Fatalf("method and authentication reply % x", reply[:4])
	}
	if _, err := io.ReadFull(c, reply[:10]); err != nil {
		t.Fatalf("connect reply: %v", err)
	}
	if reply[0] != 5 || reply[3] != socksAtypIPv4 {
		t.Fatalf("connect reply % x", reply[:10])
	}
	c.SetDeadline(time.Time{})
	return c, reply[1]
}

// connectDial opens a CONNECT tunnel through the proxy and returns the
// connection (reading through the returned reader) and the status line.
func connectDial(t testing.TB, proxyAddr, target string) (net.Conn, *bufio.Reader, string) {
	t.Helper()
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(hangLimit))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", target, target, authHeader(proxyAddr))
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("CONNECT %s: %v", target, err)
		}
		if line == "\r\n" {
			break
		}
	}
	c.SetDeadline(time.Time{})
	return c, br, strings.TrimSpace(status)
}

// packageGoroutines lists the goroutines running code of this package
// (test files aside).
func packageGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, line := range strings.Split(g, "\n") {
			if strings.Contains(line, "/sandbox/internal/egress/") && strings.Contains(line, ".go:") && !strings.Contains(line, "_test.go:") {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

func openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// waitFlat waits until no goroutine of the package is left and the fd count
// is back to at most base (splice pipes go back to the runtime's pool and
// are closed by a GC cleanup, hence the GCs), failing after hangLimit.
func waitFlat(t testing.TB, fdBase int) {
	t.Helper()
	deadline := time.Now().Add(hangLimit)
	for {
		runtime.GC()
		gs := packageGoroutines()
		fds := openFDs(t)
		if len(gs) == 0 && fds <= fdBase {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d fds open, %d at start; %d goroutines of the package left:\n%s", fds, fdBase, len(gs), strings.Join(gs, "\n\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func runtimeGC() { runtime.GC() }
