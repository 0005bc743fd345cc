package egress

import "net/netip"

// DirectUDP records a UDP destination the engine's checker refused in
// subreaper mode, once per destination in the log and on stderr: UDP
// leaves the sandbox only as DNS to corral's responder. unconnectedDNS:
// a DNS query sent with an address on an unconnected socket (musl's
// resolver), which corral cannot answer there (the answer's source would
// not be the address asked); prog is the program that sent it. Safe for
// concurrent use, also after Close.
func (p *Proxy) DirectUDP(addr netip.AddrPort, prog string, unconnectedDNS bool) {
	a := addr.Addr().Unmap().WithZone("")
	dest := netip.AddrPortFrom(a, addr.Port()).String()
	if unconnectedDNS {
		if !p.firstDenial("udp-dns " + prog + " " + dest) {
			return
		}
		reason := "a DNS query on an unconnected UDP socket: its answer would come from another address than the one asked"
		p.cfg.Log.decision(&DecisionLine{Host: a.String(), Port: addr.Port(), Address: a.String(),
			Decision: "deny", Reason: reason, Via: ViaDNS}, p.cfg.Stderr)
		p.warnf("corral: network: %s sent a DNS query to %s on an unconnected UDP socket (musl libc?); corral cannot answer it in subreaper mode: use --mode pidns, or a glibc build\n", prog, dest)
		return
	}
	if !p.firstDenial("udp " + dest) {
		return
	}
	reason := "UDP other than DNS is not let out"
	p.cfg.Log.decision(&DecisionLine{Host: a.String(), Port: addr.Port(), Address: a.String(),
		Decision: "deny", Reason: reason, Via: ViaDirect}, p.cfg.Stderr)
	p.warnf("corral: network: denied UDP to %s: only DNS (port 53) leaves the sandbox over UDP; QUIC and other UDP clients must use TCP\n", dest)
}
