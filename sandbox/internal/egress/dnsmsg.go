package egress

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"strings"
)

// The little of DNS (RFC 1035) corral's responder needs: a query's header
// and its one question; an answer with A or AAAA records, an empty one,
// or an error code. Queries carry no name compression (RFC 1035 4.1.4
// allows it in any message, but no resolver compresses a lone question:
// one is refused as malformed).

// DNS record types and codes the responder knows.
const (
	dnsTypeA     = 1
	dnsTypeAAAA  = 28
	dnsTypeSVCB  = 64
	dnsTypeHTTPS = 65
	dnsClassIN   = 1

	rcodeOK       = 0
	rcodeFormErr  = 1
	rcodeServFail = 2
	rcodeNXDomain = 3
	rcodeNotImp   = 4

	dnsHeaderLen = 12
	// dnsUDPMax is the answer size every resolver takes over UDP without
	// EDNS(0); answers beyond it are cut to fit (a few addresses are
	// plenty to connect to).
	dnsUDPMax = 512
	// dnsTTL is the answers' lifetime: short, so a runner's cache follows
	// what corral answers now.
	dnsTTL = 30
)

// dnsQuery is a parsed query.
type dnsQuery struct {
	id       uint16
	flags    uint16 // the query's: opcode and RD are echoed
	name     string // lower case, no trailing dot
	qtype    uint16
	qclass   uint16
	question []byte // the question as sent (name, type, class), echoed
}

var errDNSFormat = errors.New("malformed DNS query")

// parseDNSQuery reads msg's header and its one question. The error is
// errDNSFormat for what a FORMERR answers (when the header at least was
// read: ok says so).
func parseDNSQuery(msg []byte) (q dnsQuery, headerOK bool, err error) {
	if len(msg) < dnsHeaderLen {
		return q, false, errDNSFormat
	}
	q.id = binary.BigEndian.Uint16(msg[0:])
	q.flags = binary.BigEndian.Uint16(msg[2:])
	if q.flags&0x8000 != 0 { // a response: never answered
		return q, false, errDNSFormat
	}
	if binary.BigEndian.Uint16(msg[4:]) != 1 {
		return q, true, errDNSFormat
	}
	var name strings.Builder
	i := dnsHeaderLen
	for {
		if i >= len(msg) {
			return q, true, errDNSFormat
		}
		l := int(msg[i])
		i++
		if l == 0 {
			break
		}
		if l > 63 || i+l > len(msg) || name.Len()+l+1 > 254 {
			return q, true, errDNSFormat // a pointer (0xc0) or an overlong label
		}
		if name.Len() > 0 {
			name.WriteByte('.')
		}
		name.Write(msg[i : i+l])
		i += l
	}
	if i+4 > len(msg) {
		return q, true, errDNSFormat
	}
	q.qtype = binary.BigEndian.Uint16(msg[i:])
	q.qclass = binary.BigEndian.Uint16(msg[i+2:])
	q.question = msg[dnsHeaderLen : i+4]
	q.name = strings.ToLower(name.String())
	return q, true, nil
}

// dnsAnswer builds the answer to q: rcode, and for A and AAAA the
// addresses of that family in addrs, as many as fit in max bytes.
func dnsAnswer(q dnsQuery, rcode int, addrs []netip.Addr, max int) []byte {
	out := make([]byte, dnsHeaderLen, dnsHeaderLen+len(q.question)+16*len(addrs))
	// QR, the query's opcode and RD, RA; AA: corral is the authority on
	// what the runner may reach.
	flags := 0x8000 | q.flags&0x7900 | 0x0400 | 0x0080 | uint16(rcode&0xf)
	binary.BigEndian.PutUint16(out[0:], q.id)
	binary.BigEndian.PutUint16(out[2:], flags)
	if q.question == nil {
		return out // a FORMERR without a question
	}
	binary.BigEndian.PutUint16(out[4:], 1)
	out = append(out, q.question...)
	n := 0
	for _, a := range addrs {
		var rdata []byte
		switch {
		case q.qtype == dnsTypeA && a.Is4():
			b := a.As4()
			rdata = b[:]
		case q.qtype == dnsTypeAAAA && a.Is6():
			b := a.As16()
			rdata = b[:]
		default:
			continue
		}
		if len(out)+12+len(rdata) > max {
			break
		}
		// The name as a pointer to the question's (offset 12).
		out = append(out, 0xc0, dnsHeaderLen)
		out = binary.BigEndian.AppendUint16(out, q.qtype)
		out = binary.BigEndian.AppendUint16(out, dnsClassIN)
		out = binary.BigEndian.AppendUint32(out, dnsTTL)
		out = binary.BigEndian.AppendUint16(out, uint16(len(rdata)))
		out = append(out, rdata...)
		n++
	}
	binary.BigEndian.PutUint16(out[6:], uint16(n))
	return out
}
