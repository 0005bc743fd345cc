package egress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// SOCKS5 (RFC 1928), the part clients use to reach a TCP destination:
// username/password authentication (RFC 1929) with the run's credentials,
// CONNECT with an IPv4, IPv6 or domain-name address. A
// domain name is resolved here, by the proxy's policy, which is why the
// environment names the proxy socks5h:// (the client sends the name).
const (
	socksVersion = 5

	socksAuthPassword     = 0x02
	socksAuthNoAcceptable = 0xff

	socksPasswordVersion = 1 // of the RFC 1929 subnegotiation

	socksCmdConnect = 1

	socksAtypIPv4   = 1
	socksAtypDomain = 3
	socksAtypIPv6   = 4

	socksSucceeded        = 0
	socksGeneralFailure   = 1
	socksNotAllowed       = 2 // "connection not allowed by ruleset"
	socksNetUnreachable   = 3
	socksHostUnreachable  = 4
	socksConnRefused      = 5
	socksCmdNotSupported  = 7
	socksAtypNotSupported = 8
)

// socksReply answers a request with code; the bound address is always
// 0.0.0.0:0: clients of CONNECT ignore it, and the proxy's host-side
// address is none of the runner's business.
func socksReply(c net.Conn, code byte) error {
	_, err := c.Write([]byte{socksVersion, code, 0, socksAtypIPv4, 0, 0, 0, 0, 0, 0})
	return err
}

// serveSOCKS serves one SOCKS5 connection: the method negotiation and
// the credentials, the request, the place under the cap, the decision and
// the dial, then the tunnel.
func (p *Proxy) serveSOCKS(c net.Conn, br *bufio.Reader) {
	host, port, err := p.readSOCKSRequest(c, br)
	if err != nil {
		var re *socksRefusal
		if errors.As(err, &re) {
			if re.code != 0 {
				socksReply(c, re.code)
			}
			p.refusedEarly("", 0, re.reason)
			lingerClose(c)
		} else {
			p.refusedEarly("", 0, "incomplete SOCKS5 request")
		}
		return
	}
	at := p.newAttempt(host, port)
	if !p.promote(c) {
		p.refusedEarly(host, port, p.overCapReason())
		socksReply(c, socksGeneralFailure)
		lingerClose(c)
		return
	}
	up, d, err := p.open(host, at)
	if up == nil {
		code := byte(socksNotAllowed)
		switch {
		case d.Failed:
			code = socksHostUnreachable
		case err != nil:
			code = socksDialCode(err)
		}
		socksReply(c, code)
		lingerClose(c)
		return
	}
	defer p.untrack(up)
	defer at.end()
	if socksReply(c, socksSucceeded) != nil {
		return
	}
	c.SetDeadline(time.Time{})
	at.up, at.down = p.join(c, up, pending(br), true)
}

func socksDialCode(err error) byte {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return socksConnRefused
	case errors.Is(err, syscall.ENETUNREACH):
		return socksNetUnreachable
	case errors.Is(err, syscall.EHOSTUNREACH), isTimeout(err):
		return socksHostUnreachable
	}
	return socksGeneralFailure
}

// socksRefusal is a request the proxy answers with a reply code (none when
// 0: the negotiation already answered) and closes.
type socksRefusal struct {
	code   byte
	reason string
}

func (e *socksRefusal) Error() string {
	return "SOCKS reply " + strconv.Itoa(int(e.code)) + ": " + e.reason
}

// readSOCKSRequest runs the method negotiation and the username/password
// check, and reads the CONNECT request, returning the destination as a
// host string (an IP literal or the name as sent) and port.
func (p *Proxy) readSOCKSRequest(c net.Conn, br *bufio.Reader) (string, uint16, error) {
	if err := p.socksAuthenticate(c, br); err != nil {
		return "", 0, err
	}
	var req [4]byte // VER CMD RSV ATYP
	if _, err := io.ReadFull(br, req[:]); err != nil {
		return "", 0, err
	}
	if req[0] != socksVersion {
		return "", 0, &socksRefusal{socksGeneralFailure, fmt.Sprintf("SOCKS version %d in request", req[0])}
	}
	host, err := readSOCKSAddr(br, req[3])
	if err != nil {
		return "", 0, err
	}
	var pb [2]byte
	if _, err := io.ReadFull(br, pb[:]); err != nil {
		return "", 0, err
	}
	if req[1] != socksCmdConnect {
		// BIND and UDP ASSOCIATE would open the runner a way in or a
		// datagram path, neither of which the policy covers.
		return "", 0, &socksRefusal{socksCmdNotSupported, "SOCKS5 command other than CONNECT"}
	}
	return host, uint16(pb[0])<<8 | uint16(pb[1]), nil
}

// socksAuthenticate negotiates username/password (RFC 1929), the only
// method offered, and checks them against the Proxy's credentials.
func (p *Proxy) socksAuthenticate(c net.Conn, br *bufio.Reader) error {
	var hdr [2]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return err
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return err
	}
	if !slices.Contains(methods, socksAuthPassword) {
		c.Write([]byte{socksVersion, socksAuthNoAcceptable})
		return &socksRefusal{0, reasonNoCredentials + " (no SOCKS5 username/password method offered)"}
	}
	if _, err := c.Write([]byte{socksVersion, socksAuthPassword}); err != nil {
		return err
	}
	ver, err := br.ReadByte()
	if err != nil {
		return err
	}
	user, err := readSOCKSString(br)
	if err != nil {
		return err
	}
	pass, err := readSOCKSString(br)
	if err != nil {
		return err
	}
	if ver != socksPasswordVersion || !p.auth.match(user, pass) {
		c.Write([]byte{socksPasswordVersion, 1})
		return &socksRefusal{0, reasonBadCredentials}
	}
	_, err = c.Write([]byte{socksPasswordVersion, 0})
	return err
}

// readSOCKSString reads a length-prefixed string (RFC 1929's fields, a
// domain name).
func readSOCKSString(br *bufio.Reader) (string, error) {
	n, err := br.ReadByte()
	if err != nil {
		return "", err
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(br, b); err != nil {
		return "", err
	}
	return string(b), nil
}

// readSOCKSAddr reads a request's address of type atyp.
func readSOCKSAddr(br *bufio.Reader, atyp byte) (string, error) {
	switch atyp {
	case socksAtypIPv4:
		var a [4]byte
		if _, err := io.ReadFull(br, a[:]); err != nil {
			return "", err
		}
		return netip.AddrFrom4(a).String(), nil
	case socksAtypIPv6:
		var a [16]byte
		if _, err := io.ReadFull(br, a[:]); err != nil {
			return "", err
		}
		return netip.AddrFrom16(a).String(), nil
	case socksAtypDomain:
		return readSOCKSString(br)
	}
	return "", &socksRefusal{socksAtypNotSupported, "SOCKS5 address type not supported"}
}
