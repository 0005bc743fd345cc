package egress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"
)

// SOCKS5 (RFC 1928), the part clients use to reach a TCP destination: no
// authentication, CONNECT with an IPv4, IPv6 or domain-name address. A
// domain name is resolved here, by the proxy's policy, which is why the
// environment names the proxy socks5h:// (the client sends the name).
const (
	socksVersion = 5

	socksAuthNone         = 0x00
	socksAuthNoAcceptable = 0xff

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

func (p *Proxy) serveSOCKS(c net.Conn, br *bufio.Reader, overCap bool) {
	host, port, err := readSOCKSRequest(c, br)
	if err != nil {
		var re *socksRefusal
		if errors.As(err, &re) {
			socksReply(c, re.code)
			lingerClose(c)
		}
		return
	}
	at := p.newAttempt(host, port)
	if overCap {
		at.log("deny", fmt.Sprintf("too many connections at once (limit %d)", p.cfg.MaxConns))
		socksReply(c, socksGeneralFailure)
		lingerClose(c)
		return
	}
	d := p.policy.Decide(p.ctx, host, port)
	if !d.Allowed {
		code := byte(socksNotAllowed)
		if d.Failed {
			at.log("allow", d.Reason)
			code = socksHostUnreachable
		} else {
			at.deny(d.Reason)
		}
		socksReply(c, code)
		lingerClose(c)
		return
	}
	up, addr, err := p.dial(d.Addrs, port)
	if err != nil {
		at.address = addr.String()
		at.log("allow", dialErrorReason(err))
		socksReply(c, socksDialCode(err))
		lingerClose(c)
		return
	}
	defer p.untrack(up)
	at.address = addr.String()
	defer at.log("allow", d.Reason)
	if socksReply(c, socksSucceeded) != nil {
		return
	}
	c.SetDeadline(time.Time{})
	at.up, at.down = p.join(c, up, pending(br))
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

// socksRefusal is a request the proxy answers with a reply code and closes.
type socksRefusal struct{ code byte }

func (e *socksRefusal) Error() string { return "SOCKS reply " + strconv.Itoa(int(e.code)) }

// readSOCKSRequest runs the method negotiation and reads the CONNECT
// request, returning the destination as a host string (an IP literal or
// the name as sent) and port.
func readSOCKSRequest(c net.Conn, br *bufio.Reader) (string, uint16, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return "", 0, err
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return "", 0, err
	}
	noAuth := false
	for _, m := range methods {
		noAuth = noAuth || m == socksAuthNone
	}
	if !noAuth {
		c.Write([]byte{socksVersion, socksAuthNoAcceptable})
		return "", 0, errors.New("client offers no method without authentication")
	}
	if _, err := c.Write([]byte{socksVersion, socksAuthNone}); err != nil {
		return "", 0, err
	}
	var req [4]byte // VER CMD RSV ATYP
	if _, err := io.ReadFull(br, req[:]); err != nil {
		return "", 0, err
	}
	if req[0] != socksVersion {
		return "", 0, fmt.Errorf("SOCKS version %d in request", req[0])
	}
	var host string
	switch req[3] {
	case socksAtypIPv4:
		var a [4]byte
		if _, err := io.ReadFull(br, a[:]); err != nil {
			return "", 0, err
		}
		host = netip.AddrFrom4(a).String()
	case socksAtypIPv6:
		var a [16]byte
		if _, err := io.ReadFull(br, a[:]); err != nil {
			return "", 0, err
		}
		host = netip.AddrFrom16(a).String()
	case socksAtypDomain:
		n, err := br.ReadByte()
		if err != nil {
			return "", 0, err
		}
		name := make([]byte, n)
		if _, err := io.ReadFull(br, name); err != nil {
			return "", 0, err
		}
		host = string(name)
	default:
		return "", 0, &socksRefusal{socksAtypNotSupported}
	}
	var pb [2]byte
	if _, err := io.ReadFull(br, pb[:]); err != nil {
		return "", 0, err
	}
	if req[1] != socksCmdConnect {
		// BIND and UDP ASSOCIATE would open the runner a way in or a
		// datagram path, neither of which the policy covers.
		return "", 0, &socksRefusal{socksCmdNotSupported}
	}
	return host, uint16(pb[0])<<8 | uint16(pb[1]), nil
}
