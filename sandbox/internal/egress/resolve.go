package egress

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// The files a LaunchResolver reads by default.
const (
	HostsPath      = "/etc/hosts"
	ResolvConfPath = "/etc/resolv.conf"
)

// LaunchResolver resolves names with a copy of the hosts file and of
// resolv.conf taken when it is made, before the runner exists. Go's own
// resolver re-reads /etc/hosts every 5 seconds and /etc/resolv.conf too,
// with no way to turn either off, so a uid-0 runner (which shares the
// host's files in subreaper mode) could append a line and redirect an
// allowed name. Here the hosts lines are consulted first, then DNS (A and
// AAAA, over UDP with TCP after a truncated answer) to the nameservers
// resolv.conf named, with its search list, ndots, timeout and attempts;
// nsswitch.conf is not consulted ("files dns", the usual order). Safe for
// concurrent use.
type LaunchResolver struct {
	hosts    map[string][]netip.Addr
	servers  []netip.AddrPort
	search   []string // without the trailing dot
	ndots    int
	timeout  time.Duration // of one exchange with one server
	attempts int
}

// NewLaunchResolver reads hostsPath and resolvConfPath now. A file that
// cannot be read counts as empty, as for the C library: no hosts lines;
// nameservers 127.0.0.1 and ::1.
func NewLaunchResolver(hostsPath, resolvConfPath string) *LaunchResolver {
	r := &LaunchResolver{hosts: map[string][]netip.Addr{}, ndots: 1, timeout: 5 * time.Second, attempts: 2}
	if data, err := os.ReadFile(hostsPath); err == nil {
		r.parseHosts(data)
	}
	data, _ := os.ReadFile(resolvConfPath)
	r.parseResolvConf(data)
	if len(r.servers) == 0 {
		r.servers = []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:53"), netip.MustParseAddrPort("[::1]:53")}
	}
	return r
}

func (r *LaunchResolver) parseHosts(data []byte) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<10)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		a, err := netip.ParseAddr(f[0])
		if err != nil {
			continue
		}
		for _, name := range f[1:] {
			name = strings.ToLower(strings.TrimSuffix(name, "."))
			r.hosts[name] = append(r.hosts[name], a.Unmap())
		}
	}
}

func (r *LaunchResolver) parseResolvConf(data []byte) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	searchSet := false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || strings.HasPrefix(f[0], "#") || strings.HasPrefix(f[0], ";") {
			continue
		}
		switch f[0] {
		case "nameserver":
			if a, err := netip.ParseAddr(f[1]); err == nil && len(r.servers) < 3 {
				r.servers = append(r.servers, netip.AddrPortFrom(a.Unmap(), 53))
			}
		case "domain":
			if !searchSet {
				r.search = []string{strings.TrimSuffix(f[1], ".")}
			}
		case "search":
			r.search, searchSet = nil, true
			for _, s := range f[1:] {
				if s = strings.TrimSuffix(s, "."); s != "" {
					r.search = append(r.search, s)
				}
			}
		case "options":
			r.parseOptions(f[1:])
		}
	}
}

func (r *LaunchResolver) parseOptions(opts []string) {
	for _, o := range opts {
		k, v, _ := strings.Cut(o, ":")
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			continue
		}
		switch k {
		case "ndots":
			r.ndots = min(n, 15)
		case "timeout":
			r.timeout = time.Duration(min(max(n, 1), 30)) * time.Second
		case "attempts":
			r.attempts = min(max(n, 1), 5)
		}
	}
}

// LookupNetIP returns the addresses of host: its hosts lines if it has any,
// else the A and AAAA records DNS gives for the first name of the search
// list that exists. network is ignored ("ip": both families).
func (r *LaunchResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if addrs, ok := r.hosts[name]; ok {
		return append([]netip.Addr(nil), addrs...), nil
	}
	var lastErr error = &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	for _, fqdn := range r.candidates(name) {
		addrs, err := r.lookupFQDN(ctx, fqdn)
		if err == nil && len(addrs) > 0 {
			return addrs, nil
		}
		if err != nil && !errors.Is(err, errNXDomain) {
			lastErr = &net.DNSError{Err: err.Error(), Name: host, IsTimeout: isTimeout(err)}
		}
		if ctx.Err() != nil {
			return nil, &net.DNSError{Err: ctx.Err().Error(), Name: host, IsTimeout: true}
		}
	}
	return nil, lastErr
}

// candidates are the fully qualified names to ask for name, in order, as
// the C library orders them: the name as it is first when it has ndots
// dots, else after the search list.
func (r *LaunchResolver) candidates(name string) []string {
	hasNdots := strings.Count(name, ".") >= r.ndots
	var out []string
	if hasNdots {
		out = append(out, name+".")
	}
	for _, s := range r.search {
		if len(name)+len(s)+2 <= 254 {
			out = append(out, name+"."+s+".")
		}
	}
	if !hasNdots {
		out = append(out, name+".")
	}
	return out
}

var errNXDomain = errors.New("no such host")

// lookupFQDN asks each server in turn, attempts times over, for fqdn's A
// and AAAA records. An answer that the name does not exist ends the
// search; a failure or silence tries the next server.
func (r *LaunchResolver) lookupFQDN(ctx context.Context, fqdn string) ([]netip.Addr, error) {
	name, err := dnsmessage.NewName(fqdn)
	if err != nil {
		return nil, errNXDomain
	}
	lastErr := errors.New("no nameserver answered")
	for range r.attempts {
		for _, srv := range r.servers {
			addrs, err := r.askBoth(ctx, srv, name)
			if err == nil || errors.Is(err, errNXDomain) {
				return addrs, err
			}
			lastErr = err
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		}
	}
	return nil, lastErr
}

// askBoth asks srv for name's A and then AAAA records.
func (r *LaunchResolver) askBoth(ctx context.Context, srv netip.AddrPort, name dnsmessage.Name) ([]netip.Addr, error) {
	var all []netip.Addr
	for _, t := range []dnsmessage.Type{dnsmessage.TypeA, dnsmessage.TypeAAAA} {
		addrs, err := r.exchange(ctx, srv, name, t)
		if err != nil {
			return nil, err
		}
		all = append(all, addrs...)
	}
	return all, nil
}

// exchange asks srv one question over UDP, and over TCP when the answer
// was truncated.
func (r *LaunchResolver) exchange(ctx context.Context, srv netip.AddrPort, name dnsmessage.Name, t dnsmessage.Type) ([]netip.Addr, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	q := dnsmessage.Question{Name: name, Type: t, Class: dnsmessage.ClassINET}
	id := uint16(rand.Uint32())
	msg, err := buildQuery(id, q)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	for _, network := range []string{"udp", "tcp"} {
		c, err := d.DialContext(ctx, network, srv.String())
		if err != nil {
			return nil, err
		}
		if dl, ok := ctx.Deadline(); ok {
			c.SetDeadline(dl)
		}
		stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
		var resp []byte
		if network == "udp" {
			resp, err = exchangeUDP(c, msg[2:], id, q)
		} else {
			resp, err = exchangeTCP(c, msg)
		}
		stop()
		c.Close()
		if err != nil {
			return nil, err
		}
		addrs, truncated, err := parseAnswer(resp, id, q)
		if !truncated || network == "tcp" {
			return addrs, err
		}
	}
	return nil, errors.New("unreachable")
}

// buildQuery builds a query with two bytes in front for TCP's length.
func buildQuery(id uint16, q dnsmessage.Question) ([]byte, error) {
	b := dnsmessage.NewBuilder(make([]byte, 2, 514), dnsmessage.Header{ID: id, RecursionDesired: true})
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAdditionals(); err != nil {
		return nil, err
	}
	var rh dnsmessage.ResourceHeader
	if err := rh.SetEDNS0(1232, dnsmessage.RCodeSuccess, false); err != nil {
		return nil, err
	}
	if err := b.OPTResource(rh, dnsmessage.OPTResource{}); err != nil {
		return nil, err
	}
	msg, err := b.Finish()
	if err != nil {
		return nil, err
	}
	binary.BigEndian.PutUint16(msg, uint16(len(msg)-2))
	return msg, nil
}

// exchangeUDP sends msg on the connected socket c and returns the first
// datagram that answers it (same id and question); others are dropped,
// so a spoofer must guess the id as well as the source port.
func exchangeUDP(c net.Conn, msg []byte, id uint16, q dnsmessage.Question) ([]byte, error) {
	if _, err := c.Write(msg); err != nil {
		return nil, err
	}
	buf := make([]byte, 1232)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return nil, err
		}
		if _, _, err := parseAnswer(buf[:n], id, q); !errors.Is(err, errMismatch) {
			return buf[:n], nil
		}
	}
}

func exchangeTCP(c net.Conn, msg []byte) ([]byte, error) {
	if _, err := c.Write(msg); err != nil {
		return nil, err
	}
	var l [2]byte
	if _, err := io.ReadFull(c, l[:]); err != nil {
		return nil, err
	}
	resp := make([]byte, binary.BigEndian.Uint16(l[:]))
	_, err := io.ReadFull(c, resp)
	return resp, err
}

var errMismatch = errors.New("DNS answer to another question")

// parseAnswer reads the addresses of the type asked that an answer gives
// for q's name, following its CNAME records.
func parseAnswer(msg []byte, id uint16, q dnsmessage.Question) (addrs []netip.Addr, truncated bool, err error) {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil || h.ID != id || !h.Response {
		return nil, false, errMismatch
	}
	qs, err := p.AllQuestions()
	if err != nil || len(qs) != 1 || qs[0].Type != q.Type || qs[0].Class != q.Class ||
		!strings.EqualFold(qs[0].Name.String(), q.Name.String()) {
		return nil, false, errMismatch
	}
	switch {
	case h.Truncated:
		return nil, true, nil
	case h.RCode == dnsmessage.RCodeNameError:
		return nil, false, errNXDomain
	case h.RCode != dnsmessage.RCodeSuccess:
		return nil, false, errors.New("server answered " + h.RCode.String())
	}
	cnames := map[string]string{}
	found := map[string][]netip.Addr{}
	for {
		rh, err := p.AnswerHeader()
		if errors.Is(err, dnsmessage.ErrSectionDone) {
			break
		}
		if err != nil {
			return nil, false, errors.New("malformed DNS answer")
		}
		owner := strings.ToLower(rh.Name.String())
		switch {
		case rh.Type == dnsmessage.TypeCNAME && rh.Class == dnsmessage.ClassINET:
			r, err := p.CNAMEResource()
			if err != nil {
				return nil, false, errors.New("malformed DNS answer")
			}
			cnames[owner] = strings.ToLower(r.CNAME.String())
		case rh.Type == q.Type && rh.Type == dnsmessage.TypeA && rh.Class == dnsmessage.ClassINET:
			r, err := p.AResource()
			if err != nil {
				return nil, false, errors.New("malformed DNS answer")
			}
			found[owner] = append(found[owner], netip.AddrFrom4(r.A))
		case rh.Type == q.Type && rh.Type == dnsmessage.TypeAAAA && rh.Class == dnsmessage.ClassINET:
			r, err := p.AAAAResource()
			if err != nil {
				return nil, false, errors.New("malformed DNS answer")
			}
			found[owner] = append(found[owner], netip.AddrFrom16(r.AAAA).Unmap())
		default:
			if err := p.SkipAnswer(); err != nil {
				return nil, false, errors.New("malformed DNS answer")
			}
		}
	}
	name := strings.ToLower(q.Name.String())
	for range 10 { // a bounded CNAME chain
		if next, ok := cnames[name]; ok && len(found[name]) == 0 {
			name = next
			continue
		}
		break
	}
	return found[name], false, nil
}
