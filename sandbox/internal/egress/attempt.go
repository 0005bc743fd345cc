package egress

import (
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// attempt is one connection attempt, from its decision to its end: what
// the connection log records. Its decision line is written the moment the
// decision is made (for an allowed one, once the dial is done, so it names
// the address dialled), its end line when it closes.
type attempt struct {
	p       *Proxy
	host    string // for display: a normalised name, an IP address, or a quoted oddity
	port    uint16
	address string
	via     string    // ViaProxy unless set
	id      uint64    // the decision line's, once written
	allowed time.Time // when allowed; zero otherwise
	up      int64
	down    int64
}

func (p *Proxy) newAttempt(rawHost string, port uint16) *attempt {
	return &attempt{p: p, host: displayHost(rawHost), port: port}
}

// allow writes the decision line of an allowed attempt; end writes its end
// line. An allowed attempt whose dial failed is "allow" with the failure in
// the reason, and ends at once.
func (a *attempt) allow(reason string) {
	a.allowed = time.Now()
	a.id = a.decide("allow", reason)
}

// deny records a refusal by policy: the stderr line (once per destination)
// and the decision line.
func (a *attempt) deny(reason string) {
	a.p.reportDenied(a.host, a.port, reason)
	a.decide("deny", reason)
}

func (a *attempt) decide(decision, reason string) uint64 {
	return a.p.cfg.Log.decision(&DecisionLine{Host: a.host, Port: a.port, Address: a.address,
		Decision: decision, Reason: reason, Via: a.via}, a.p.cfg.Stderr)
}

// end writes the end line of an allowed attempt.
func (a *attempt) end() {
	if a.allowed.IsZero() {
		return
	}
	a.p.cfg.Log.end(a.id, a.via, a.up, a.down, time.Since(a.allowed), a.p.cfg.Stderr)
}

// refusalsPerSecond bounds the decision lines of attempts refused before
// their destination is known or over the cap (refusedEarly): anyone on the
// host can make those, and the log must not become the way to fill a disk.
const refusalsPerSecond = 10

// refusalLimiter lets refusalsPerSecond lines through per one-second window
// and counts the rest, for the next line that goes through.
type refusalLimiter struct {
	mu      sync.Mutex
	window  time.Time
	n       int
	leftOut int
}

// take reports whether a line may be written now and, if so, how many were
// left out before it.
func (r *refusalLimiter) take(now time.Time) (ok bool, leftOut int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.Sub(r.window) >= time.Second || now.Before(r.window) {
		r.window, r.n = now, 0
	}
	if r.n >= refusalsPerSecond {
		r.leftOut++
		return false, 0
	}
	r.n++
	leftOut, r.leftOut = r.leftOut, 0
	return true, leftOut
}

func (r *refusalLimiter) drain() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.leftOut
	r.leftOut = 0
	return n
}

// refusedEarly logs, rate-limited, an attempt refused before its
// destination was decided: a malformed request, missing or wrong
// credentials, the connection cap. host is "" when not known yet.
func (p *Proxy) refusedEarly(host string, port uint16, reason string) {
	p.earlyLine(host, port, "deny", reason)
}

// challenged logs, rate-limited as refusedEarly, a request that came
// without credentials and was answered with the 407 challenge: git, Java
// and others send their first request bare and retry with the proxy
// URL's credentials, so this is no refusal (no stderr line). A client
// that never retries shows as challenges without an allow after them.
func (p *Proxy) challenged(host string, port uint16) {
	p.earlyLine(host, port, "challenge", reasonNoCredentials)
}

func (p *Proxy) earlyLine(host string, port uint16, decision, reason string) {
	ok, leftOut := p.refusals.take(time.Now())
	if !ok {
		return
	}
	if host != "" {
		host = displayHost(host)
	}
	p.cfg.Log.decision(&DecisionLine{Host: host, Port: port, Decision: decision, Reason: reason,
		LeftOut: leftOut}, p.cfg.Stderr)
}

// flushRefusals writes the count of rate-limited refusals no line has
// carried yet, at Close.
func (p *Proxy) flushRefusals() {
	if n := p.refusals.drain(); n > 0 {
		p.cfg.Log.decision(&DecisionLine{Decision: "deny", Reason: "refusals left out of the log (rate limit)",
			LeftOut: n}, p.cfg.Stderr)
	}
}

// Direct records a connection the runner attempted past the proxy and
// that was refused elsewhere (by the engine's socket checks): once per
// destination, a deny decision line with reason and the stderr line that
// tells the user of a client ignoring the proxy variables why it fails. Safe for concurrent use, also after Close (the log line is then
// dropped if the log is closed).
func (p *Proxy) Direct(addr netip.AddrPort, reason string) {
	a := addr.Addr().Unmap().WithZone("")
	dest := netip.AddrPortFrom(a, addr.Port()).String()
	if !p.firstDenial("direct " + dest) {
		// Once per destination, in the log as on stderr: a runner that
		// retries without end must not grow the log without end.
		return
	}
	p.cfg.Log.decision(&DecisionLine{Host: a.String(), Port: addr.Port(), Address: a.String(),
		Decision: "deny", Reason: reason, Via: ViaDirect}, p.cfg.Stderr)
	if len(p.cfg.Rules) == 0 {
		p.warnf("corral: network: denied direct connection to %s: the command has no network (--net none)\n", dest)
		return
	}
	p.warnf("corral: network: denied direct connection to %s: no --allow-net entry admits it\n", dest)
}

// DirectSocket records, once per kind, a socket the engine refused before
// it had a destination (subreaper mode's --net none makes no IP socket at
// all): a deny line via direct without a host. The stderr line is the
// caller's. Safe for concurrent use, also after Close.
func (p *Proxy) DirectSocket(kind, reason string) {
	if !p.firstDenial("socket " + kind) {
		return
	}
	p.cfg.Log.decision(&DecisionLine{Decision: "deny", Reason: reason, Via: ViaDirect}, p.cfg.Stderr)
}

// reportDenied prints the one stderr line for a refused destination, the
// first time it is refused.
func (p *Proxy) reportDenied(host string, port uint16, reason string) {
	dest := net.JoinHostPort(host, strconv.Itoa(int(port)))
	if p.firstDenial(dest) {
		p.warnf("corral: network: denied %s: %s\n", dest, reason)
	}
}

// firstDenial reports whether key is denied for the first time. The set is
// bounded (maxDeniedLines): past it, one line says more are not shown.
func (p *Proxy) firstDenial(key string) bool {
	p.mu.Lock()
	_, seen := p.denied[key]
	full := len(p.denied) >= maxDeniedLines
	if !seen && !full {
		p.denied[key] = struct{}{}
	}
	if !seen && full {
		// One marker entry says the "more not shown" line was printed.
		_, seen = p.denied[""]
		p.denied[""] = struct{}{}
		p.mu.Unlock()
		if !seen {
			p.warnf("corral: network: more destinations denied; not shown (see --net-log)\n")
		}
		return false
	}
	p.mu.Unlock()
	return !seen
}

// displayHost is host as the log and stderr show it: an IP address in its
// canonical form, a valid name normalised, anything else quoted (it came
// from the runner and may hold any byte).
func displayHost(host string) string {
	if host == "" {
		return ""
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap().String()
	}
	if n, err := normalizeName(host); err == nil {
		return n
	}
	return strconv.Quote(host)
}
