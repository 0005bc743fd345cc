package egress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The HTTP side serves one request per client connection and answers with
// "Connection: close". CONNECT, what HTTPS and most clients use, is a
// tunnel anyway; an absolute-URI request (plain http://) is forwarded to
// the origin over a fresh connection with "Connection: close" and its
// response copied back, after which both connections end. Keep-alive
// across requests would let one client connection carry requests for
// different hosts, each needing its own decision and dial, for no gain a
// plain-HTTP client would notice. Only the one request's body, as its
// header frames it, goes to the origin: whatever the client sends after it
// is never read.
//
// It is parsed with net/textproto, not net/http: net/http would link
// crypto/tls, crypto/x509, mime and an HTTP/2 implementation into corral,
// whose package initialisers run at every launch, with a network option or
// without (test/layout_test.go keeps them out).

// hopByHop are the headers that belong to one connection, not to the
// request (RFC 9110 section 7.6.1), plus the proxy's own.
var hopByHop = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func removeHopByHop(h textproto.MIMEHeader) {
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopByHop {
		h.Del(name)
	}
}

// The statuses the proxy answers with itself.
const (
	statusBadRequest         = 400
	statusProxyAuthRequired  = 407
	statusForbidden          = 403
	statusHeaderTooLarge     = 431
	statusBadGateway         = 502
	statusServiceUnavailable = 503
	statusGatewayTimeout     = 504
	statusSwitchingProtocols = 101
	statusNoContent          = 204
	statusNotModified        = 304
)

func statusText(code int) string {
	switch code {
	case statusBadRequest:
		return "Bad Request"
	case statusForbidden:
		return "Forbidden"
	case statusProxyAuthRequired:
		return "Proxy Authentication Required"
	case statusHeaderTooLarge:
		return "Request Header Fields Too Large"
	case statusBadGateway:
		return "Bad Gateway"
	case statusServiceUnavailable:
		return "Service Unavailable"
	case statusGatewayTimeout:
		return "Gateway Timeout"
	}
	return "Error"
}

// proxyStatusError values are RFC 9209's, for the Proxy-Status header
// scripts and clients can read.
const (
	psDenied      = "destination_ip_prohibited"
	psDNS         = "dns_error"
	psRefused     = "connection_refused"
	psTimeout     = "connection_timeout"
	psUnavailable = "destination_unavailable"
	psHeader      = "http_request_error"
	psBadResponse = "http_protocol_error"
	psOverCap     = "proxy_internal_error"
)

// writeHTTPError answers c with status and the reason, in the body and in a
// Proxy-Status header, and closes the connection politely.
func writeHTTPError(c net.Conn, status int, psErr, reason string) {
	body := "corral: " + reason + "\n"
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n"+
		"Connection: close\r\nProxy-Status: corral; error=%s; details=%s\r\n\r\n%s",
		status, statusText(status), len(body), psErr, strconv.Quote(headerSafe(reason)), body)
	lingerClose(c)
}

// writeHTTPAuthRequired answers a request without the run's credentials:
// 407 with the Basic challenge, so a client that has them sends them.
func writeHTTPAuthRequired(c net.Conn, reason string) {
	body := "corral: " + reason + "; this proxy is the run's own: use the proxy URL from the environment\n"
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nProxy-Authenticate: Basic realm=\"corral\"\r\nContent-Type: text/plain; charset=utf-8\r\n"+
		"Content-Length: %d\r\nConnection: close\r\n\r\n%s",
		statusProxyAuthRequired, statusText(statusProxyAuthRequired), len(body), body)
	lingerClose(c)
}

// headerSafe keeps a reason printable ASCII: it may quote a host name the
// runner sent, and a header must not carry control bytes.
func headerSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, s)
}

// request is the head of one client request.
type request struct {
	method, target string
	minor          int // of HTTP/1.x
	header         textproto.MIMEHeader
}

var errMalformed = errors.New("malformed message")

func readRequest(tp *textproto.Reader) (*request, error) {
	line, err := tp.ReadLine()
	if err != nil {
		return nil, err
	}
	method, rest, ok1 := strings.Cut(line, " ")
	target, proto, ok2 := strings.Cut(rest, " ")
	minor, ok3 := parseHTTP1(proto)
	if !ok1 || !ok2 || !ok3 || !isToken(method) || target == "" {
		return nil, errMalformed
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		return nil, err
	}
	return &request{method: method, target: target, minor: minor, header: h}, nil
}

// parseHTTP1 reads "HTTP/1.x", the only version spoken over a proxy's
// plain TCP connection.
func parseHTTP1(proto string) (minor int, ok bool) {
	if len(proto) != len("HTTP/1.1") || !strings.HasPrefix(proto, "HTTP/1.") {
		return 0, false
	}
	d := proto[len(proto)-1]
	return int(d - '0'), d >= '0' && d <= '9'
}

// isToken reports whether s is an RFC 9110 token (a method, say).
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return s != ""
}

// framing is how a message's body is delimited (RFC 9112 section 6):
// chunked, or length bytes, or (length < 0) none for a request and the
// connection's end for a response.
type framing struct {
	chunked bool
	length  int64
}

// bodyFraming reads h's framing. A Content-Length beside chunked is
// ignored, as RFC 9112 section 6.3 says and net/http did; only chunked is
// understood as a transfer coding.
func bodyFraming(h textproto.MIMEHeader, useTE bool) (framing, error) {
	if te := h.Values("Transfer-Encoding"); useTE && len(te) > 0 {
		if len(te) != 1 || !strings.EqualFold(strings.TrimSpace(te[0]), "chunked") {
			return framing{}, errors.New("unsupported transfer encoding")
		}
		return framing{chunked: true}, nil
	}
	cl := h.Values("Content-Length")
	if len(cl) == 0 {
		return framing{length: -1}, nil
	}
	v := strings.TrimSpace(cl[0])
	for _, o := range cl[1:] {
		if strings.TrimSpace(o) != v {
			return framing{}, errors.New("conflicting Content-Length")
		}
	}
	n, err := strconv.ParseUint(v, 10, 63)
	if err != nil {
		return framing{}, errors.New("bad Content-Length")
	}
	return framing{length: int64(n)}, nil
}

// serveHTTP serves one HTTP proxy request: credentials first, then the
// destination, the place under the cap, the decision and the dial, then a
// tunnel (CONNECT) or one forwarded request.
func (p *Proxy) serveHTTP(c net.Conn, br *bufio.Reader, hl *headerLimit) {
	req, f, ok := p.readHTTPRequest(c, br, hl)
	if !ok {
		return
	}
	if why := p.auth.checkBasic(req.header); why != "" {
		if why == reasonNoCredentials {
			host, port := peekTarget(req)
			p.challenged(host, port)
		} else {
			p.refusedEarly("", 0, why)
		}
		writeHTTPAuthRequired(c, why)
		return
	}
	host, port, u, ok := p.httpTarget(c, req)
	if !ok {
		return
	}
	hl.on = false
	at := p.newAttempt(host, port)
	if !p.promote(c) {
		p.refusedEarly(host, port, p.overCapReason())
		writeHTTPError(c, statusServiceUnavailable, psOverCap, p.overCapReason())
		return
	}
	up := p.openHTTP(c, host, at)
	if up == nil {
		return
	}
	defer p.untrack(up)
	defer at.end()
	c.SetDeadline(time.Time{})
	if req.method == "CONNECT" {
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			return
		}
		at.up, at.down = p.join(c, up, pending(br), true)
		return
	}
	p.forwardRequest(c, br, up, req, u, f, at)
}

// readHTTPRequest reads a request's head and its body's framing, or
// answers why it cannot and returns false.
func (p *Proxy) readHTTPRequest(c net.Conn, br *bufio.Reader, hl *headerLimit) (*request, framing, bool) {
	req, err := readRequest(textproto.NewReader(br))
	var f framing
	if err == nil {
		// HTTP/1.0 has no Transfer-Encoding; net/http ignored it too.
		f, err = bodyFraming(req.header, req.minor >= 1)
	}
	switch {
	case err == nil:
		return req, f, true
	case hl.hit:
		reason := fmt.Sprintf("request header larger than %d bytes", p.cfg.MaxHeaderBytes)
		p.refusedEarly("", 0, reason)
		writeHTTPError(c, statusHeaderTooLarge, psHeader, reason)
	case isTimeout(err), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		// Silent, trickling or gone: nobody to answer.
		p.refusedEarly("", 0, "incomplete request")
	default:
		p.refusedEarly("", 0, "malformed request")
		writeHTTPError(c, statusBadRequest, psHeader, "malformed request")
	}
	return nil, f, false
}

// peekTarget is the destination a request names, for the log only, as
// far as it can be read without answering anything: a CONNECT's
// HOST:PORT, an absolute URI's authority; "" and 0 otherwise.
func peekTarget(req *request) (string, uint16) {
	hostport := req.target
	if req.method != "CONNECT" {
		u, err := url.Parse(req.target)
		if err != nil || u.Host == "" {
			return "", 0
		}
		hostport = u.Host
		if u.Port() == "" {
			hostport = net.JoinHostPort(u.Hostname(), "80")
		}
	}
	host, portStr, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", 0
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return "", 0
	}
	return host, uint16(port)
}

// httpTarget reads the destination of an authenticated request: HOST:PORT
// of a CONNECT, or an http:// absolute URI's authority. Otherwise it
// answers why not and returns false.
func (p *Proxy) httpTarget(c net.Conn, req *request) (string, uint16, *url.URL, bool) {
	var host, portStr string
	connect := req.method == "CONNECT"
	target := req.target
	if connect && !strings.HasPrefix(target, "/") {
		// The authority form, host:port.
		target = "http://" + target
	}
	u, err := url.ParseRequestURI(target)
	reason := ""
	switch {
	case err != nil:
		reason = "malformed request"
	case connect:
		host, portStr = u.Hostname(), u.Port()
		if host == "" || portStr == "" {
			reason = "CONNECT needs HOST:PORT"
		}
	case u.IsAbs() && strings.EqualFold(u.Scheme, "http"):
		host, portStr = u.Hostname(), u.Port()
		if portStr == "" {
			portStr = "80"
		}
	case u.IsAbs():
		reason = fmt.Sprintf("scheme %q cannot be forwarded; use CONNECT (an https_proxy of http://this-proxy)", u.Scheme)
	default:
		reason = "this is corral's egress proxy: send CONNECT or absolute-URI requests (set http_proxy/https_proxy)"
	}
	var port uint64
	if reason == "" {
		if port, err = strconv.ParseUint(portStr, 10, 16); err != nil || port == 0 {
			reason = fmt.Sprintf("bad port %q", portStr)
		}
	}
	if reason != "" {
		p.refusedEarly("", 0, reason)
		writeHTTPError(c, statusBadRequest, psHeader, reason)
		return "", 0, nil, false
	}
	return host, uint16(port), u, true
}

// openHTTP decides and dials for an HTTP request; when the connection
// cannot be made it answers the client why and returns nil.
func (p *Proxy) openHTTP(c net.Conn, host string, at *attempt) net.Conn {
	up, d, err := p.open(host, at)
	dest := net.JoinHostPort(at.host, strconv.Itoa(int(at.port)))
	switch {
	case up != nil:
		return up
	case d.Failed:
		writeHTTPError(c, statusBadGateway, psDNS, d.Reason)
	case !d.Allowed:
		writeHTTPError(c, statusForbidden, psDenied, fmt.Sprintf("denied %s: %s", dest, d.Reason))
	default:
		reason := dialErrorReason(err)
		status, ps := statusBadGateway, psUnavailable
		switch {
		case isTimeout(err):
			status, ps = statusGatewayTimeout, psTimeout
		case reason == "connection refused":
			ps = psRefused
		}
		writeHTTPError(c, status, ps, fmt.Sprintf("cannot connect to %s: %s", dest, reason))
	}
	return nil
}

// forwardRequest sends req, its body read from br as f frames it, to the
// origin over up in origin form and copies the response back to c, both
// with Connection: close.
func (p *Proxy) forwardRequest(c net.Conn, br *bufio.Reader, up net.Conn, req *request, u *url.URL, f framing, at *attempt) {
	cu := &countingConn{Conn: up}
	err := sendRequest(c, br, cu, req, u, f)
	at.up, at.down = cu.written, cu.read
	if err != nil {
		writeHTTPError(c, statusBadGateway, psUnavailable, "sending the request failed: "+dialErrorReason(err))
		return
	}
	keepAlive(up) // while the origin answers
	p.relayResponse(c, cu, req)
	at.down = cu.read
}

// sendRequest writes req to the origin: its header without the hop-by-hop
// fields, Host from the absolute URI (RFC 9112 section 3.2.2, whatever Host
// the client sent), and its body as f frames it.
func sendRequest(c net.Conn, br *bufio.Reader, up io.Writer, req *request, u *url.URL, f framing) error {
	h := req.header
	h.Del("Host")
	removeHopByHop(h)
	h.Del("Content-Length")
	// The client waits for a 100 before sending its body; answer it here
	// rather than relay the origin's, since the body has to pass through
	// the proxy before the origin's answer can be read.
	if strings.EqualFold(h.Get("Expect"), "100-continue") {
		h.Del("Expect")
		if f.chunked || f.length > 0 {
			if _, err := io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
				return err
			}
		}
	}
	bw := bufio.NewWriterSize(up, 4<<10)
	fmt.Fprintf(bw, "%s %s HTTP/1.1\r\nHost: %s\r\n", req.method, u.RequestURI(), u.Host)
	writeHeader(bw, h)
	switch {
	case f.chunked:
		io.WriteString(bw, "Transfer-Encoding: chunked\r\n")
	case f.length >= 0:
		fmt.Fprintf(bw, "Content-Length: %d\r\n", f.length)
	}
	io.WriteString(bw, "Connection: close\r\n\r\n")
	if !f.chunked && f.length < 0 {
		f.length = 0 // a request without framing has no body
	}
	err := copyBody(bw, br, f, true)
	if err == nil {
		err = bw.Flush()
	}
	return err
}

// relayResponse reads the origin's response head from up (interim 1xx
// answers skipped) and copies the response to c with Connection: close.
func (p *Proxy) relayResponse(c net.Conn, up io.Reader, req *request) {
	hl := &headerLimit{r: up, n: p.cfg.MaxHeaderBytes, on: true}
	ubr := getReader(hl)
	defer putReader(ubr)
	tp := textproto.NewReader(ubr)
	var status string
	var code int
	var rh textproto.MIMEHeader
	var err error
	for {
		status, code, rh, err = readResponseHead(tp)
		// 1xx answers other than 101 are interim; the real one follows.
		// (101 cannot come: Upgrade is hop-by-hop and was removed.)
		if err != nil || code >= 200 || code == statusSwitchingProtocols {
			break
		}
	}
	var rf framing
	if err == nil {
		rf, err = bodyFraming(rh, true)
	}
	if err != nil {
		reason := "bad response from the destination"
		if hl.hit {
			reason = fmt.Sprintf("response header larger than %d bytes", p.cfg.MaxHeaderBytes)
		}
		writeHTTPError(c, statusBadGateway, psBadResponse, reason)
		return
	}
	hl.on = false
	removeHopByHop(rh)
	if req.method == "HEAD" || code < 200 || code == statusNoContent || code == statusNotModified {
		rf = framing{length: 0}
	} else if rf.chunked {
		rh.Del("Content-Length")
	}
	cw := bufio.NewWriterSize(c, 4<<10)
	io.WriteString(cw, status+"\r\n")
	writeHeader(cw, rh)
	// An HTTP/1.0 client cannot read chunked framing; close delimits.
	rawChunks := req.minor >= 1
	if rf.chunked && rawChunks {
		io.WriteString(cw, "Transfer-Encoding: chunked\r\n")
	}
	io.WriteString(cw, "Connection: close\r\n\r\n")
	cu, counted := up.(*countingConn)
	switch {
	case rf.length == 0 && !rf.chunked:
		err = cw.Flush()
	case !rf.chunked && counted:
		err = spliceBody(c, cw, ubr, cu, rf.length)
	default:
		err = copyBody(cw, ubr, rf, rawChunks)
	}
	if err == nil {
		lingerClose(c)
	}
}

// spliceBody copies a response body of length bytes (below 0: up to
// the end) to c: what reading the head took of it from ubr, then the rest
// socket to socket with splice(2), so a download through the proxy never
// enters user space (a buffered copy made this path about 0.7x the
// CONNECT tunnel's). The head in cw goes first.
func spliceBody(c net.Conn, cw *bufio.Writer, ubr *bufio.Reader, up *countingConn, length int64) error {
	n := int64(ubr.Buffered())
	if length >= 0 {
		n = min(n, length)
	}
	if _, err := io.CopyN(cw, ubr, n); err != nil {
		return err
	}
	if err := cw.Flush(); err != nil {
		return err
	}
	left := int64(-1)
	if length >= 0 {
		left = length - n
	}
	m, err, ok := spliceStreamN(c, up.Conn, left, copyBuffered)
	if !ok {
		// No pipe to splice through (EMFILE): a pooled buffer.
		var src net.Conn = up.Conn
		if left >= 0 {
			src = limitedConn{up.Conn, &io.LimitedReader{R: up.Conn, N: left}}
		}
		m, err = copyBuffered(c, src)
	}
	up.read += m
	if err == nil && left > 0 && m < left {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// readResponseHead reads a status line and header.
func readResponseHead(tp *textproto.Reader) (status string, code int, h textproto.MIMEHeader, err error) {
	status, err = tp.ReadLine()
	if err != nil {
		return "", 0, nil, err
	}
	proto, rest, _ := strings.Cut(status, " ")
	_, ok := parseHTTP1(proto)
	if !ok || len(rest) < 3 || len(rest) > 3 && rest[3] != ' ' {
		return "", 0, nil, errMalformed
	}
	for i := range 3 {
		if rest[i] < '0' || rest[i] > '9' {
			return "", 0, nil, errMalformed
		}
	}
	code, _ = strconv.Atoi(rest[:3])
	h, err = tp.ReadMIMEHeader()
	return status, code, h, err
}

// writeHeader writes h's fields in a stable order.
func writeHeader(w *bufio.Writer, h textproto.MIMEHeader) {
	for _, k := range slices.Sorted(maps.Keys(h)) {
		for _, v := range h[k] {
			w.WriteString(k + ": " + v + "\r\n")
		}
	}
}

// copyBody copies a body framed by f from src to w and flushes w. raw
// keeps chunked framing; otherwise only the chunks' data is written, for a
// reader that relies on the connection's end.
func copyBody(w *bufio.Writer, src *bufio.Reader, f framing, raw bool) error {
	switch {
	case f.chunked:
		return copyChunked(w, src, raw)
	case f.length == 0:
		return w.Flush()
	}
	// Flushed at every write, so a streamed body is not held back; a
	// length below 0 means up to the end.
	var r io.Reader = readerOnly{src}
	if f.length > 0 {
		r = io.LimitReader(src, f.length)
	}
	buf := getBuf()
	defer putBuf(buf)
	n, err := io.CopyBuffer(flushWriter{w}, r, *buf)
	if err == nil {
		err = w.Flush() // the head, when the body is empty
	}
	if err == nil && f.length > 0 && n < f.length {
		err = io.ErrUnexpectedEOF
	}
	return err
}

type flushWriter struct{ w *bufio.Writer }

func (f flushWriter) Write(b []byte) (int, error) {
	n, err := f.w.Write(b)
	if err == nil {
		err = f.w.Flush()
	}
	return n, err
}

// copyChunked copies a chunked body up to its last chunk and trailer,
// flushing after each chunk so a streamed body is not held back.
func copyChunked(w *bufio.Writer, src *bufio.Reader, raw bool) error {
	buf := getBuf()
	defer putBuf(buf)
	for {
		line, err := readChunkLine(src)
		if err != nil {
			return err
		}
		sizeStr, _, _ := strings.Cut(line, ";") // chunk extensions are dropped
		size, err := strconv.ParseUint(strings.TrimRight(sizeStr, " \t"), 16, 63)
		if err != nil {
			return errors.New("bad chunk size")
		}
		if raw {
			fmt.Fprintf(w, "%x\r\n", size)
		}
		if size == 0 {
			break
		}
		n, err := io.CopyBuffer(writerOnly{w}, io.LimitReader(src, int64(size)), *buf)
		if err == nil && n < int64(size) {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return err
		}
		if line, err := readChunkLine(src); err != nil || line != "" {
			return errors.New("bad chunk end")
		}
		if raw {
			w.WriteString("\r\n")
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	for { // the trailer, up to an empty line
		line, err := readChunkLine(src)
		if err != nil {
			return err
		}
		if raw {
			w.WriteString(line + "\r\n")
		}
		if line == "" {
			return w.Flush()
		}
	}
}

// readChunkLine reads a line of chunked framing without its line end; a
// line longer than src's buffer is an error, not an allocation.
func readChunkLine(src *bufio.Reader) (string, error) {
	b, err := src.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return "", errors.New("chunk line too long")
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return "", err
	}
	b = b[:len(b)-1]
	if len(b) > 0 && b[len(b)-1] == '\r' {
		b = b[:len(b)-1]
	}
	return string(b), nil
}

// countingConn counts the bytes that cross it: what an absolute-URI
// request exchanges with the origin.
type countingConn struct {
	net.Conn
	read, written int64
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.read += int64(n)
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.written += int64(n)
	return n, err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
