package plan

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/corral-sh/corral/internal/landlock"
	"github.com/corral-sh/corral/internal/seccomp"
)

// The network policy as each mode enforces it (docs/network.md), derived
// from the caller's plan by pure functions, once per
// mode the launch tries: what the derived plan says is what the runner
// gets, and the only copy that crosses to the init.

// proxyPortInside is the proxy's port inside a new network namespace,
// where nothing else listens yet: the first free of these past the
// runner's own --host-port and --publish ports.
const proxyPortInside = 3128

// ForPidns is the plan of a namespace mode: a network namespace for any
// network policy (an allowlist too: the proxy is its only way out) and,
// with a proxy, the runner's environment naming it at its address inside,
// where the init will listen, with userinfo, the proxy's per-run USER:PASS.
func (p Plan) ForPidns(userinfo string) Plan {
	p = p.withSocketChecks().withLocalhostPorts().withMounts().withFSReports()
	p.Namespaces.Net = p.Isolated()
	if p.Privileges.Guard != nil {
		// From inside a new PID namespace the runner can name no corral
		// process: the init drops SIGKILL and SIGSTOP from inside, the
		// host side is out of sight but for kill(0) to the group it
		// shares with the init.
		p.Privileges.Guard = &seccomp.EnforcerGuard{}
	}
	if !p.Net.Proxy() {
		return p
	}
	port := proxyPortInside
	for p.Net.taken(uint16(port)) {
		port++
	}
	return p.withProxy("127.0.0.1:"+strconv.Itoa(port), userinfo)
}

// withLocalhostPorts makes each port a localhost entry of --allow-net
// names (localhost:8787, api.localhost:9000) a --host-port too: a client
// that ignores the proxy for loopback (Go's net/http, Node's fetch with a
// local base URL) connects straight to 127.0.0.1:PORT, which must reach
// the host's loopback as the proxy would. An entry without a port (80
// and 443) or with * gets none: taking those ports inside would stop the
// tree's own servers there. A port the tree publishes is its own.
func (p Plan) withLocalhostPorts() Plan {
	extra := localhostPorts(p.Net.Allow)
	if len(extra) == 0 {
		return p
	}
	ports := slices.Clone(p.Net.HostPorts)
	for _, port := range extra {
		if !slices.Contains(ports, port) && !slices.Contains(p.Net.Publish, port) {
			ports = append(ports, port)
		}
	}
	p.Net.HostPorts = ports
	return p
}

// localhostPorts are the ports the localhost entries among allow name
// (SPEC: localhost, names beneath .localhost, *.localhost), in order,
// each once. Entries that do not parse are the egress rules' to refuse.
func localhostPorts(allow []string) []uint16 {
	var out []uint16
	for _, entry := range allow {
		i := strings.LastIndexByte(entry, ':')
		if i < 0 || strings.Contains(entry[:i], ":") {
			continue // no port, or an IPv6 literal
		}
		host := strings.TrimSuffix(strings.ToLower(entry[:i]), ".")
		host = strings.TrimPrefix(host, "*.")
		if host != "localhost" && !strings.HasSuffix(host, ".localhost") {
			continue
		}
		port, err := strconv.ParseUint(entry[i+1:], 10, 16)
		if err != nil || port == 0 || slices.Contains(out, uint16(port)) {
			continue
		}
		out = append(out, uint16(port))
	}
	return out
}

func (n *Network) taken(port uint16) bool {
	for _, list := range [][]uint16{n.HostPorts, n.Publish} {
		for _, q := range list {
			if q == port {
				return true
			}
		}
	}
	return false
}

// withProxy names the proxy at addr: in the plan (what -v says and where
// the init listens) without its credentials, in the runner's proxy
// variables with them.
func (p Plan) withProxy(addr, userinfo string) Plan {
	p.Net.ProxyAddr = addr
	if userinfo != "" {
		addr = userinfo + "@" + addr
	}
	if p.Net.NoProxyEnv {
		p.Env = WithoutProxyEnv(p.Env)
		return p
	}
	p.Env = WithProxyEnv(p.Env, addr, p.Net.KeepNoProxy)
	return p
}

// withSocketChecks asks for the engine's checker of the runner's socket
// calls wherever a Unix socket must be checked by its path: under a
// network policy (only the tree's own sockets and --allow-unix), and
// beneath --hide, in every mode (Landlock has no right for a Unix
// connect). vsock, which no network namespace separates, goes with any
// network policy. Implied IPC isolation without Landlock's scopes needs the
// checker too: it refuses the abstract names the tree did not bind.
func (p Plan) withSocketChecks() Plan {
	p.Privileges.Notify = p.Isolated() || len(p.Privileges.Landlock.Hide) > 0 || p.IPCFallback() || p.Privileges.NotifyWrites
	p.Privileges.DenyVsock = p.Isolated()
	return p
}

// Subreaper is what the host side found for subreaper mode's network
// policy before deriving it: where the proxy listens on the host's
// loopback ("": no proxy), and this kernel's Landlock (TCPPorts: ABI 4+;
// Err: no Landlock at all).
type Subreaper struct {
	Userinfo    string // the proxy's per-run USER:PASS
	ProxyAddr   string
	ProxyPort   uint16
	LandlockABI int
	TCPPorts    bool
	LandlockErr error
	// DNS: corral answers the runner's DNS queries (its connects to port
	// 53 go to corral's responder): glibc is asked to use TCP.
	DNS bool
	// UDP: with DNS, the runner may make UDP sockets, for resolvers that
	// ask over UDP (the checker makes them: this kernel can hand them
	// over), every UDP connect and send checked.
	UDP bool
}

// ForSubreaper is the plan of subreaper mode, where there is no network
// namespace: the socket filter, the engine's checks of every TCP connect
// and bind by address, Landlock's TCP ports as a second layer where the
// kernel has them, and the proxy on the host's loopback in the runner's
// environment. It also returns -v's account of it.
func (p Plan) ForSubreaper(s Subreaper) (Plan, string, error) {
	p = p.withCheckedWrites().withSocketChecks().withLocalhostPorts().withMountNames()
	ll := p.Privileges.Landlock
	p.Privileges.NotifyMetadata = len(ll.Writable) > 0 || ll.ReadOnly || len(ll.Hide) > 0
	if !p.Isolated() {
		return p, "", nil
	}
	p.Net.TCPChecked = true
	tcp := p.Net.Proxy() || len(p.Net.HostPorts) > 0 || len(p.Net.Publish) > 0
	p.Privileges.Sockets = &seccomp.SocketRules{AllowTCP: tcp, NotifyInet: true}
	how := "seccomp socket filter, every TCP connect and bind checked by address"
	var connect []uint16
	if p.Net.Proxy() {
		p = p.withProxy(s.ProxyAddr, s.Userinfo)
		connect = append(connect, s.ProxyPort)
		how += ", egress proxy at " + s.ProxyAddr
	}
	if s.DNS {
		p.Env = withResolverTCP(p.Env)
		how += ", DNS answered by corral"
		if s.UDP {
			// UDP sockets for the resolvers that ask over UDP; the
			// checker holds every datagram's destination
			// (sockcheck/udp.go).
			p.Privileges.Sockets.AllowUDP = true
			how += " (TCP, and UDP on connected sockets: every UDP socket, connect and send checked)"
		}
	}
	switch {
	case s.LandlockErr == nil && s.TCPPorts:
		connect = append(connect, p.Net.HostPorts...)
		p.Privileges.Landlock.Net = &landlock.NetPolicy{ConnectTCP: connect, BindTCP: p.Net.Publish}
		how += fmt.Sprintf(", Landlock ABI %d TCP ports (connect %v, bind %v)", s.LandlockABI, connect, p.Net.Publish)
	case tcp:
		// The checks alone hold TCP to its addresses; Landlock's ports
		// would only repeat them.
		how += "; no Landlock TCP port rules on this kernel (ABI 4, Linux 6.7), so no second layer"
	}
	return p, how, nil
}

// withResolverTCP sets RES_OPTIONS=use-vc unless the caller set
// RES_OPTIONS: glibc's resolver then asks over TCP, whose connect the
// checker brings to corral's responder, and a stream has no source to
// check. glibc 2.36 also takes corral's answers over UDP (it connects its
// socket, and the checker connects it to the responder: measured in
// test/egress_udp_test.go), but a resolver that compares an answer's
// source with the nameservers it read (the check BIND-derived res_send
// code carries) would drop them; over TCP every glibc build is answered.
func withResolverTCP(env []string) []string {
	for _, kv := range env {
		if strings.HasPrefix(kv, "RES_OPTIONS=") {
			return env
		}
	}
	return append(env[:len(env):len(env)], "RES_OPTIONS=use-vc")
}
