package egress

import "net/netip"

// DirectConnect decides a TCP connect the runner made past the proxy, in
// subreaper mode, where the engine's socket checker holds the call and
// makes it on the runner's own socket when this allows it: no relay, the
// runner's bytes go at wire speed. An address an IP or CIDR entry covers,
// on a port that entry admits (and no --deny-net entry covers), is
// allowed, as the proxy would allow the same address as a literal; so is
// an address corral's DNS responder answered for an admitted name (or the
// hosts file named for it at launch), on a port that name's entry admits,
// as the proxy would allow the name (dns.go). The
// allowed connect gets its decision line, via direct; it has no end line,
// since corral never sees the runner's socket close. A refusal is the
// caller's to name (Direct), once per destination.
func (p *Proxy) DirectConnect(addr netip.AddrPort) bool {
	host, reason, ok := p.decideDirect(addr)
	if !ok {
		return false
	}
	a := addr.Addr().Unmap().WithZone("")
	p.cfg.Log.decision(&DecisionLine{Host: host, Port: addr.Port(), Address: a.String(),
		Decision: "allow", Reason: reason, Via: ViaDirect}, p.cfg.Stderr)
	return true
}

// decideDirect decides a connect past the proxy to addr (DirectConnect,
// the relay's routes): the host to name in the log (an admitted name the
// address was answered for, else the address) and the reason, or false.
func (p *Proxy) decideDirect(addr netip.AddrPort) (host, reason string, ok bool) {
	a := addr.Addr().Unmap().WithZone("")
	if a.IsUnspecified() || addr.Port() == 0 {
		return "", "", false
	}
	host = a.String()
	name, d, ok := p.policy.decideAnswered(p.answered.lookup(a), a, addr.Port())
	if ok {
		host = name
	} else if d = p.policy.decideAddr(a, addr.Port()); !d.Allowed {
		return "", "", false
	}
	return host, d.Reason, true
}
