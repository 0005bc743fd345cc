package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func proxyClient(t testing.TB, proxyAddr string, tlsConf *tls.Config) *http.Client {
	t.Helper()
	u, err := url.Parse("http://" + userinfo(proxyAddr) + "@" + proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	// Keep-alive on, as clients have it: the proxy's Connection: close
	// must not trip them up.
	tr := &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: tlsConf}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: hangLimit}
}

func TestHTTPAbsoluteURI(t *testing.T) {
	var mu sync.Mutex
	var seen http.Header
	var seenHost, seenURI, seenBody string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen, seenHost, seenURI, seenBody = r.Header.Clone(), r.Host, r.RequestURI, string(b)
		mu.Unlock()
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("X-Origin", "yes")
		fmt.Fprintf(w, "hello from %s", r.URL.Path)
	}))
	defer srv.Close()
	tp := startProxy(t, Config{}, "127.0.0.0/8:*")
	client := proxyClient(t, tp.addr, nil)

	for range 3 {
		resp, err := client.Get(srv.URL + "/again")
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	req, _ := http.NewRequest("POST", srv.URL+"/some/path?q=1", strings.NewReader("the body"))
	// The proxy's credentials are the proxy's, never the origin's.
	req.Header.Set("Proxy-Authorization", strings.TrimSuffix(strings.TrimPrefix(authHeader(tp.addr), "Proxy-Authorization: "), "\r\n"))
	req.Header.Set("Connection", "X-Hop")
	req.Header.Set("X-Hop", "drop me")
	req.Header.Set("X-Kept", "keep me")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "hello from /some/path" {
		t.Fatalf("%s %q", resp.Status, body)
	}
	if resp.Header.Get("X-Origin") != "yes" || resp.Header.Get("Keep-Alive") != "" {
		t.Errorf("response header %v: want the origin's without its hop-by-hop ones", resp.Header)
	}
	mu.Lock()
	defer mu.Unlock()
	if seenURI != "/some/path?q=1" || seenHost != srv.Listener.Addr().String() || seenBody != "the body" {
		t.Errorf("origin saw %q host %q body %q", seenURI, seenHost, seenBody)
	}
	for _, h := range []string{"Proxy-Authorization", "Proxy-Connection", "X-Hop"} {
		if seen.Get(h) != "" {
			t.Errorf("origin got %s: %q", h, seen.Get(h))
		}
	}
	if seen.Get("X-Kept") != "keep me" || seen.Get("User-Agent") != "Go-http-client/1.1" {
		t.Errorf("origin headers %v", seen)
	}
	if got := tp.stderr.String(); got != "" {
		t.Errorf("stderr %q", got)
	}
}

// An absolute-URI request without User-Agent reaches the origin without
// one (Go's request writer would add its own), and an HTTP/1.0 client
// gets a body it can read.
func TestHTTPAbsoluteURIRaw(t *testing.T) {
	var mu sync.Mutex
	ua := []string{"unset"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ua = r.Header.Values("User-Agent")
		mu.Unlock()
		w.(http.Flusher).Flush() // chunked
		io.WriteString(w, "chunk one, ")
		w.(http.Flusher).Flush()
		io.WriteString(w, "chunk two")
	}))
	defer srv.Close()
	tp := startProxy(t, Config{}, "127.0.0.0/8:*")
	for _, proto := range []string{"HTTP/1.1", "HTTP/1.0"} {
		c, err := net.Dial("tcp", tp.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(hangLimit))
		fmt.Fprintf(c, "GET %s/x %s\r\nHost: %s\r\n%s\r\n", srv.URL, proto, srv.Listener.Addr(), authHeader(tp.addr))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		c.Close()
		if err != nil || string(body) != "chunk one, chunk two" || !resp.Close {
			t.Errorf("%s: %q %v close %v", proto, body, err, resp.Close)
		}
		mu.Lock()
		if len(ua) != 0 {
			t.Errorf("origin got User-Agent %q", ua)
		}
		mu.Unlock()
	}
}

// A chunked request body with Expect: 100-continue reaches the origin
// whole and alone: what the client sends after it (a second request, for
// another host) is never forwarded. A HEAD answer's Content-Length is no
// body to wait for.
func TestHTTPAbsoluteURIBody(t *testing.T) {
	got := make(chan string, 2)
	srv := startServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
		c.SetDeadline(time.Now().Add(hangLimit))
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			got <- err.Error()
			return
		}
		body, _ := io.ReadAll(req.Body)
		if req.Method == "HEAD" {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
		} else {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
		}
		rest, _ := io.ReadAll(br)
		got <- fmt.Sprintf("%s %s te=%v expect=%q body=%q rest=%q",
			req.Method, req.RequestURI, req.TransferEncoding, req.Header.Get("Expect"), body, rest)
	})
	tp := startProxy(t, Config{}, "127.0.0.0/8:*")
	for _, tc := range []struct{ method, want, wantBody string }{
		{"POST", `POST /up te=[chunked] expect="" body="hello world" rest=""`, "abc"},
		{"HEAD", `HEAD /up te=[] expect="" body="" rest=""`, ""},
	} {
		c, err := net.Dial("tcp", tp.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(hangLimit))
		br := bufio.NewReader(c)
		if tc.method == "POST" {
			fmt.Fprintf(c, "POST http://127.0.0.1:%d/up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n%s\r\n", srv.port(), authHeader(tp.addr))
			if line, _ := br.ReadString('\n'); line != "HTTP/1.1 100 Continue\r\n" {
				t.Fatalf("interim answer %q", line)
			}
			br.ReadString('\n')
			io.WriteString(c, "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"+
				"GET http://127.0.0.2/ HTTP/1.1\r\nHost: 127.0.0.2\r\n\r\n")
		} else {
			fmt.Fprintf(c, "HEAD http://127.0.0.1:%d/up HTTP/1.1\r\n%s\r\n", srv.port(), authHeader(tp.addr))
		}
		resp, err := http.ReadResponse(br, &http.Request{Method: tc.method})
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil || string(body) != tc.wantBody {
			t.Errorf("%s: body %q %v", tc.method, body, err)
		}
		if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
			t.Errorf("%s: after the answer %q %v; want the end", tc.method, rest, err)
		}
		c.Close()
		if s := <-got; s != tc.want {
			t.Errorf("origin saw %s\nwant        %s", s, tc.want)
		}
	}
}

func TestHTTPConnectTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "secret over TLS")
	}))
	defer srv.Close()
	tp := startProxy(t, Config{}, "127.0.0.0/8:*")
	client := proxyClient(t, tp.addr, srv.Client().Transport.(*http.Transport).TLSClientConfig)
	for range 3 {
		resp, err := client.Get(srv.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "secret over TLS" {
			t.Fatalf("%s %q", resp.Status, body)
		}
	}
}

// Names resolve through the configured resolver; one that resolves to
// loopback passes only when an address rule covers the address.
func TestHTTPNamesAndSSRF(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok "+r.Host)
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	res := &fakeResolver{addrs: map[string][]string{"good.test": {"127.0.0.1"}, "a.dev.test": {"127.0.0.1"}, "dev.test": {"127.0.0.1"}}}

	guarded := startProxy(t, Config{Resolver: res}, "good.test:*")
	resp, err := proxyClient(t, guarded.addr, nil).Get(fmt.Sprintf("http://good.test:%d/", port))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(string(body), "resolves to loopback 127.0.0.1 (SSRF guard)") {
		t.Errorf("guarded: %s %q", resp.Status, body)
	}

	tp := startProxy(t, Config{Resolver: &fakeResolver{addrs: res.addrs}}, "good.test:*", "*.dev.test:*", "127.0.0.1:"+strconv.Itoa(port))
	client := proxyClient(t, tp.addr, nil)
	for _, tc := range []struct {
		host string
		ok   bool
	}{{"good.test", true}, {"GOOD.test.", true}, {"a.dev.test", true}, {"dev.test", false}, {"bad.test", false}} {
		resp, err := client.Get(fmt.Sprintf("http://%s:%d/", tc.host, port))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if (resp.StatusCode == 200) != tc.ok {
			t.Errorf("%s: %s %q", tc.host, resp.Status, body)
		}
	}
}

func TestHTTPRefusals(t *testing.T) {
	srv := startServer(t, "tcp", "127.0.0.1:0", echo)
	res := &fakeResolver{addrs: map[string][]string{"allowed.test": {"192.0.2.1"}}}
	tp := startProxy(t, Config{Resolver: res}, "allowed.test", "127.0.0.1:"+strconv.Itoa(int(srv.port())))
	client := proxyClient(t, tp.addr, nil)
	for _, tc := range []struct {
		url, reason string
	}{
		{"http://evil.test/", "denied evil.test:80: no rule allows this host"},
		{"http://allowed.test:8080/", "denied allowed.test:8080: port 8080 not allowed for allowed.test"},
		{"http://127.0.0.1:1/", "denied 127.0.0.1:1: port 1 not allowed for 127.0.0.1"},
		{"http://127.0.0.2/", "denied 127.0.0.2:80: IP address not covered by any rule"},
		{"http://[::1]:80/", "denied [::1]:80: IP address not covered by any rule"},
		{"https://evil.test/", "denied evil.test:443: no rule allows this host"},
	} {
		for range 3 {
			resp, err := client.Get(tc.url)
			if strings.HasPrefix(tc.url, "https") {
				// The client sees a failed CONNECT, not the body.
				if err == nil || !strings.Contains(err.Error(), "Forbidden") {
					t.Errorf("%s: %v", tc.url, err)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			ps := resp.Header.Get("Proxy-Status")
			if resp.StatusCode != 403 || strings.TrimSpace(string(body)) != "corral: "+tc.reason ||
				!strings.Contains(ps, "error=destination_ip_prohibited") {
				t.Errorf("%s: %s %q Proxy-Status %q", tc.url, resp.Status, body, ps)
			}
		}
	}
	// SOCKS refusals of a destination already reported add no line.
	for range 2 {
		c, code := socksDial(t, tp.addr, socksAtypDomain, "evil.test", 80)
		c.Close()
		if code != socksNotAllowed {
			t.Errorf("SOCKS evil.test: reply %d", code)
		}
	}
	want := []string{
		"corral: network: denied evil.test:80: no rule allows this host",
		"corral: network: denied allowed.test:8080: port 8080 not allowed for allowed.test",
		"corral: network: denied 127.0.0.1:1: port 1 not allowed for 127.0.0.1",
		"corral: network: denied 127.0.0.2:80: IP address not covered by any rule",
		"corral: network: denied [::1]:80: IP address not covered by any rule",
		"corral: network: denied evil.test:443: no rule allows this host",
	}
	if got := tp.stderr.lines(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stderr:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestHTTPBadRequests(t *testing.T) {
	tp := startProxy(t, Config{MaxHeaderBytes: 1024}, "127.0.0.0/8:*")
	for _, tc := range []struct {
		req    string
		status int
	}{
		{"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"GET ftp://x/ HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"CONNECT example.com HTTP/1.1\r\n\r\n", 400},
		{"CONNECT example.com:0 HTTP/1.1\r\n\r\n", 400},
		{"CONNECT example.com:99999 HTTP/1.1\r\n\r\n", 400},
		{"garbage\r\n\r\n", 400},
		{"GET http://127.0.0.1/ HTTP/1.1\r\nX-Big: " + strings.Repeat("a", 4000) + "\r\n\r\n", 431},
		{"GET http://127.0.0.1/" + strings.Repeat("a", 4000) + " HTTP/1.1\r\n\r\n", 431},
	} {
		c, err := net.Dial("tcp", tp.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(hangLimit))
		io.WriteString(c, strings.Replace(tc.req, " HTTP/1.1\r\n", " HTTP/1.1\r\n"+authHeader(tp.addr), 1))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Errorf("%.40q: %v", tc.req, err)
		} else if resp.StatusCode != tc.status {
			t.Errorf("%.40q: %s; want %d", tc.req, resp.Status, tc.status)
		}
		c.Close()
	}
}

// A destination that refuses the connection is a 502, logged as allowed
// with the failure, and is no policy refusal on stderr.
func TestHTTPDialFailure(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	tp := startProxy(t, Config{}, "127.0.0.0/8:*")
	c, _, status := connectDial(t, tp.addr, addr)
	c.Close()
	if !strings.Contains(status, "502") {
		t.Errorf("status %q", status)
	}
	_, port, _ := net.SplitHostPort(addr)
	pn, _ := strconv.Atoi(port)
	sc, code := socksDial(t, tp.addr, socksAtypIPv4, "127.0.0.1", uint16(pn))
	sc.Close()
	if code != socksConnRefused {
		t.Errorf("SOCKS reply %d", code)
	}
	if s := tp.stderr.String(); s != "" {
		t.Errorf("stderr %q", s)
	}
}

func TestSOCKS5(t *testing.T) {
	srv4 := startServer(t, "tcp", "127.0.0.1:0", echo)
	srv6 := startServer(t, "tcp6", "[::1]:0", echo)
	res := &fakeResolver{addrs: map[string][]string{"echo.test": {"127.0.0.1"}}}
	tp := startProxy(t, Config{Resolver: res}, "echo.test:*", "127.0.0.1:*", "[::1]:*")
	for _, tc := range []struct {
		atyp byte
		host string
		port uint16
	}{
		{socksAtypDomain, "echo.test", srv4.port()},
		{socksAtypDomain, "ECHO.test.", srv4.port()},
		{socksAtypIPv4, "127.0.0.1", srv4.port()},
		{socksAtypIPv6, "::1", srv6.port()},
		{socksAtypDomain, "127.0.0.1", srv4.port()}, // an IP literal sent as a name is an IP literal
	} {
		c, code := socksDial(t, tp.addr, tc.atyp, tc.host, tc.port)
		if code != socksSucceeded {
			t.Errorf("%s: reply %d", tc.host, code)
			c.Close()
			continue
		}
		c.SetDeadline(time.Now().Add(hangLimit))
		io.WriteString(c, "ping "+tc.host)
		c.(*net.TCPConn).CloseWrite()
		got, err := io.ReadAll(c)
		c.Close()
		if err != nil || string(got) != "ping "+tc.host {
			t.Errorf("%s: %q %v", tc.host, got, err)
		}
	}
	for _, tc := range []struct {
		atyp byte
		host string
		code byte
	}{
		{socksAtypDomain, "other.test", socksNotAllowed},
		{socksAtypIPv4, "127.0.0.2", socksNotAllowed},
		{socksAtypDomain, "bad\x00name", socksNotAllowed},
	} {
		c, code := socksDial(t, tp.addr, tc.atyp, tc.host, 80)
		c.Close()
		if code != tc.code {
			t.Errorf("%q: reply %d; want %d", tc.host, code, tc.code)
		}
	}
	if !strings.Contains(tp.stderr.String(), `denied "bad\x00name":80: not a valid host name`) {
		t.Errorf("stderr %q", tp.stderr.String())
	}
}

func TestSOCKS5Unsupported(t *testing.T) {
	tp := startProxy(t, Config{}, "127.0.0.0/8:*")
	for _, tc := range []struct {
		name  string
		send  []byte
		reply []byte
	}{
		{"BIND", append(socksAuth(tp.addr), 5, 2, 0, 1, 127, 0, 0, 1, 0, 80), append(slices.Clone(socksAuthOK), 5, socksCmdNotSupported)},
		{"UDP ASSOCIATE", append(socksAuth(tp.addr), 5, 3, 0, 1, 0, 0, 0, 0, 0, 0), append(slices.Clone(socksAuthOK), 5, socksCmdNotSupported)},
		{"address type 9", append(socksAuth(tp.addr), 5, 1, 0, 9), append(slices.Clone(socksAuthOK), 5, socksAtypNotSupported)},
		{"no authentication only", []byte{5, 1, 0}, []byte{5, 0xff}},
		{"wrong password", []byte{5, 1, 2, 1, 1, 'u', 1, 'p'}, []byte{5, 2, 1, 1}},
	} {
		c, err := net.Dial("tcp", tp.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(hangLimit))
		c.Write(tc.send)
		got, _ := io.ReadAll(c)
		c.Close()
		if len(got) < len(tc.reply) || string(got[:len(tc.reply)]) != string(tc.reply) {
			t.Errorf("%s: reply % x; want % x...", tc.name, got, tc.reply)
		}
	}
}

// A client that shuts down its write side still reads the whole answer,
// through CONNECT, SOCKS5 and a forward.
func TestHalfClose(t *testing.T) {
	srv := startServer(t, "tcp", "127.0.0.1:0", answerAfterEOF)
	tp := startProxy(t, Config{}, "127.0.0.1:*")
	target := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(srv.port())))
	payload := strings.Repeat("x", 100_000)

	check := func(name string, c net.Conn, r io.Reader) {
		t.Helper()
		defer c.Close()
		c.SetDeadline(time.Now().Add(hangLimit))
		if _, err := io.WriteString(c, payload); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := c.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := io.ReadAll(r)
		if err != nil || string(got) != "got 100000 bytes" {
			t.Errorf("%s: %q %v", name, got, err)
		}
	}
	c, br, status := connectDial(t, tp.addr, target)
	if status != "HTTP/1.1 200 Connection established" {
		t.Fatalf("status %q", status)
	}
	check("CONNECT", c, br)
	c, code := socksDial(t, tp.addr, socksAtypIPv4, "127.0.0.1", srv.port())
	if code != 0 {
		t.Fatalf("SOCKS reply %d", code)
	}
	check("SOCKS5", c, c)

	fl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp.Forward(fl, "test forward", func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", target)
	})
	c, err = net.Dial("tcp", fl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	check("forward", c, c)
}

// Bytes a client sends right behind its CONNECT, before the 200 arrives,
// reach the destination first.
func TestConnectEarlyData(t *testing.T) {
	srv := startServer(t, "tcp", "127.0.0.1:0", echo)
	tp := startProxy(t, Config{}, "127.0.0.1:*")
	c, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(hangLimit))
	fmt.Fprintf(c, "CONNECT 127.0.0.1:%d HTTP/1.1\r\n%s\r\nearly bytes", srv.port(), authHeader(tp.addr))
	c.(*net.TCPConn).CloseWrite()
	got, _ := io.ReadAll(c)
	if want := "HTTP/1.1 200 Connection established\r\n\r\nearly bytes"; string(got) != want {
		t.Errorf("got %q; want %q", got, want)
	}
}

// A large absolute-URI download goes socket to socket (spliceBody): every
// byte arrives, exactly, with a Content-Length and delimited by the close,
// spliced or copied through a buffer; extra bytes after a Content-Length
// body are not passed on; a body cut short ends the client's connection
// before its length.
func TestHTTPAbsoluteURILargeBody(t *testing.T) {
	const size = 3<<20 + 17
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(i*7 + i>>11)
	}
	srv := startServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
		c.SetDeadline(time.Now().Add(hangLimit))
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		switch req.URL.Path {
		case "/length":
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", size)
			c.Write(payload)
			c.Write([]byte("TRAILING JUNK"))
		case "/close":
			io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\n")
			c.Write(payload)
		case "/short":
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", size)
			c.Write(payload[:size/2])
		}
	})
	tp := startProxy(t, Config{}, "127.0.0.0/8:*")
	get := func(path string) ([]byte, error) {
		c, err := net.Dial("tcp", tp.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(hangLimit))
		fmt.Fprintf(c, "GET http://127.0.0.1:%d%s HTTP/1.1\r\nHost: x\r\n%s\r\n", srv.port(), path, authHeader(tp.addr))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		return io.ReadAll(resp.Body)
	}
	for _, buffered := range []bool{false, true} {
		spliceDisabled.Store(buffered)
		for _, path := range []string{"/length", "/close"} {
			body, err := get(path)
			if err != nil || !bytes.Equal(body, payload) {
				t.Errorf("buffered=%v %s: %d bytes (want %d), equal %v, %v", buffered, path, len(body), size, bytes.Equal(body, payload), err)
			}
		}
		if body, err := get("/short"); err == nil || len(body) >= size {
			t.Errorf("buffered=%v a body cut short: %d bytes, %v; want an error before %d", buffered, len(body), err, size)
		}
	}
	spliceDisabled.Store(false)
}
