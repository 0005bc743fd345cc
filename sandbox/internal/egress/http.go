package egress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
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
// plain-HTTP client would notice.

// hopByHop are the headers that belong to one connection, not to the
// request (RFC 9110 section 7.6.1), plus the proxy's own.
var hopByHop = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func removeHopByHop(h http.Header) {
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
		status, http.StatusText(status), len(body), psErr, strconv.Quote(headerSafe(reason)), body)
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

func (p *Proxy) serveHTTP(c net.Conn, br *bufio.Reader, hl *headerLimit, overCap bool) {
	req, err := http.ReadRequest(br)
	if err != nil {
		switch {
		case hl.hit:
			writeHTTPError(c, http.StatusRequestHeaderFieldsTooLarge, psHeader,
				fmt.Sprintf("request header larger than %d bytes", p.cfg.MaxHeaderBytes))
		case isTimeout(err), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			// Silent, trickling or gone: nobody to answer.
		default:
			writeHTTPError(c, http.StatusBadRequest, psHeader, "malformed request")
		}
		return
	}
	hl.on = false
	defer req.Body.Close()

	var host, portStr string
	connect := req.Method == http.MethodConnect
	switch {
	case connect:
		// The authority form, host:port; ReadRequest puts it in URL.Host.
		host, portStr = req.URL.Hostname(), req.URL.Port()
		if host == "" || portStr == "" {
			writeHTTPError(c, http.StatusBadRequest, psHeader, "CONNECT needs HOST:PORT")
			return
		}
	case req.URL.IsAbs() && strings.EqualFold(req.URL.Scheme, "http"):
		host, portStr = req.URL.Hostname(), req.URL.Port()
		if portStr == "" {
			portStr = "80"
		}
	case req.URL.IsAbs():
		writeHTTPError(c, http.StatusBadRequest, psHeader,
			fmt.Sprintf("scheme %q cannot be forwarded; use CONNECT (an https_proxy of http://this-proxy)", req.URL.Scheme))
		return
	default:
		writeHTTPError(c, http.StatusBadRequest, psHeader,
			"this is corral's egress proxy: send CONNECT or absolute-URI requests (set http_proxy/https_proxy)")
		return
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		writeHTTPError(c, http.StatusBadRequest, psHeader, fmt.Sprintf("bad port %q", portStr))
		return
	}
	at := p.newAttempt(host, uint16(port))
	if overCap {
		reason := fmt.Sprintf("too many connections at once (limit %d)", p.cfg.MaxConns)
		at.log("deny", reason)
		writeHTTPError(c, http.StatusServiceUnavailable, psOverCap, reason)
		return
	}
	d := p.policy.Decide(p.ctx, host, uint16(port))
	if !d.Allowed {
		if d.Failed {
			at.log("allow", d.Reason)
			writeHTTPError(c, http.StatusBadGateway, psDNS, d.Reason)
			return
		}
		at.deny(d.Reason)
		writeHTTPError(c, http.StatusForbidden, psDenied, fmt.Sprintf("denied %s: %s", net.JoinHostPort(at.host, portStr), d.Reason))
		return
	}
	up, addr, err := p.dial(d.Addrs, uint16(port))
	if err != nil {
		reason := dialErrorReason(err)
		at.address = addr.String()
		at.log("allow", reason)
		status, ps := http.StatusBadGateway, psUnavailable
		switch {
		case isTimeout(err):
			status, ps = http.StatusGatewayTimeout, psTimeout
		case reason == "connection refused":
			ps = psRefused
		}
		writeHTTPError(c, status, ps, fmt.Sprintf("cannot connect to %s: %s", net.JoinHostPort(at.host, portStr), reason))
		return
	}
	defer p.untrack(up)
	at.address = addr.String()
	reason := d.Reason
	defer func() { at.log("allow", reason) }()

	if connect {
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			return
		}
		c.SetDeadline(time.Time{})
		at.up, at.down = p.join(c, up, pending(br))
		return
	}
	c.SetDeadline(time.Time{})
	if err := p.forwardRequest(c, up, req, at); err != nil {
		reason = d.Reason + "; " + err.Error()
	}
}

// forwardRequest sends req to the origin over up in origin form and copies
// the response back to c, both with Connection: close.
func (p *Proxy) forwardRequest(c, up net.Conn, req *http.Request, at *attempt) error {
	removeHopByHop(req.Header)
	if _, ok := req.Header["User-Agent"]; !ok {
		// Request.Write adds Go's own User-Agent to a request without
		// one; an empty value makes it write none, as the client sent.
		req.Header["User-Agent"] = []string{""}
	}
	// The client waits for a 100 before sending its body; answer it here
	// rather than relay the origin's, since the body has to pass through
	// the proxy before the origin's answer can be read.
	if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		req.Header.Del("Expect")
		if req.ContentLength != 0 {
			if _, err := io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
				return err
			}
		}
	}
	req.Close = true
	cu := &countingConn{Conn: up}
	bw := bufio.NewWriterSize(cu, 4<<10)
	err := req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	at.up = cu.written
	if err != nil {
		at.down = cu.read
		writeHTTPError(c, http.StatusBadGateway, psUnavailable, "sending the request failed: "+dialErrorReason(err))
		return fmt.Errorf("sending the request: %s", dialErrorReason(err))
	}
	hl := &headerLimit{r: cu, n: p.cfg.MaxHeaderBytes, on: true}
	ubr := getReader(hl)
	defer putReader(ubr)
	var resp *http.Response
	for {
		resp, err = http.ReadResponse(ubr, req)
		if err != nil {
			at.down = cu.read
			reason := "bad response from the destination"
			if hl.hit {
				reason = fmt.Sprintf("response header larger than %d bytes", p.cfg.MaxHeaderBytes)
			}
			writeHTTPError(c, http.StatusBadGateway, psBadResponse, reason)
			return errors.New(reason)
		}
		// 1xx answers other than 101 are interim; the real one follows.
		// (101 cannot come: Upgrade is hop-by-hop and was removed.)
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
	}
	hl.on = false
	defer resp.Body.Close()
	removeHopByHop(resp.Header)
	resp.Close = true
	if !req.ProtoAtLeast(1, 1) && len(resp.TransferEncoding) > 0 {
		// An HTTP/1.0 client cannot read chunked framing; close delimits.
		resp.TransferEncoding = nil
		resp.ContentLength = -1
	}
	err = resp.Write(c)
	at.down = cu.read
	if err == nil {
		lingerClose(c)
	}
	return err
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
