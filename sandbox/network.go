package sandbox

// The host side of the network policy (docs/network.md): the
// network session of one run. It opens before anything of the runner
// exists (the rules, the log, the proxy), derives for each mode the plan
// that mode's processes get (package plan, a pure function of the
// caller's plan and what this process found), and serves the sockets made
// where the runner lives. In pidns mode the init makes the proxy's and
// the --host-port listening sockets inside the runner's network namespace
// and hands them over the stage socket (a socket keeps its namespace,
// whoever holds it), and each --publish connection is a request to the
// init for a socket it connected inside; the host listens on a --publish
// port only while the runner's server listens inside (publish.go). Under
// --allow-net the init also makes the DNS responder's sockets on the
// nameservers' addresses inside and the relay's listeners, and the
// engine's checker, in the init, asks this side to route each TCP connect
// off loopback (relayRoute; egress.RelayRoute). In subreaper mode the proxy listens on the host's loopback, and the
// runner's socket filter and Landlock's TCP ports keep it to the proxy,
// the --host-port ports and its --publish ports.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/corral-sh/corral/internal/landlock"
	"github.com/corral-sh/corral/internal/seccomp"
	"github.com/corral-sh/corral/internal/setuperr"
	"github.com/corral-sh/corral/sandbox/internal/egress"
	"github.com/corral-sh/corral/sandbox/internal/plan"
	"github.com/corral-sh/corral/sandbox/internal/portwatch"
	"github.com/corral-sh/corral/sandbox/internal/stage"
)

// network is the host side's part of one run's network policy.
type network struct {
	p     *stage.Proc
	run   *plan.Plan    // the caller's, as checked
	proxy *egress.Proxy // nil: no network policy, nothing to serve
	log   *egress.Log
	// published are the --publish ports' host sockets (publish.go).
	published []*hostPort
	stopWatch func()          // subreaper mode's watch of the host's loopback
	dns       egress.DNSAddrs // subreaper mode's DNS responder (zero: none)

	writes writesNamed // the refused writes said (fsrefused.go)
	// followed is closed once the init's reports are all read (pidns
	// mode): the summary waits for it. nil: nothing to wait.
	followed chan struct{}

	mu     sync.Mutex
	named  map[string]bool // the refused socket names said (refused)
	closed bool            // close or abandon ran: no listener opens any more
}

// openNetwork readies the host side of the network policy before anything
// of the runner exists: the rules (parsed once, by Options.check), the
// connection log.
func openNetwork(p *stage.Proc, run *plan.Plan, rules, deny []egress.Rule) (*network, error) {
	n := &network{p: p, run: run, named: map[string]bool{}}
	if run.Net.LogPath != "" {
		// Opened for any policy run, before the runner exists: a
		// filesystem policy's refusals are the log's too.
		log, err := egress.OpenLog(run.Net.LogPath)
		if err != nil {
			return nil, &setuperr.SetupError{Step: "open the run's log " + run.Net.LogPath, Err: err,
				Hint: "--log creates a new file (mode 0600) and never follows a symlink; give a path in a directory you may write"}
		}
		n.log = log
	}
	if !run.Isolated() {
		return n, nil
	}
	// The proxy reads the hosts file and the nameservers now, before the
	// runner exists: nothing it writes later steers an allowed name.
	proxy, err := egress.NewProxy(egress.Config{Rules: rules, Deny: deny, Log: n.log, Stderr: p.Stderr})
	if err != nil {
		if n.log != nil {
			n.log.Close()
		}
		return nil, &setuperr.SetupError{Step: "make the egress proxy's credentials", Err: err,
			Hint: "corral reads random bytes with getrandom(2), or /dev/urandom where a seccomp profile refuses it; allow getrandom in the profile, or give the sandbox the kernel's /dev/urandom"}
	}
	n.proxy = proxy
	return n, nil
}

// close ends every proxied connection and forward and removes every
// listener, before corral exits.
func (n *network) close() {
	if n.proxy == nil {
		if n.log != nil {
			n.log.Close()
		}
		return
	}
	n.abandon()
	if n.stopWatch != nil {
		n.stopWatch()
	}
	n.proxy.Close()
	if n.log != nil {
		n.log.Close()
	}
}

// forPidns is the plan of a pidns attempt, and the host's --publish
// sockets, bound (not listening) before the init exists: a port already
// taken on the host is a setup error.
func (n *network) forPidns() (plan.Plan, error) {
	for _, port := range n.run.Net.Publish {
		h, err := reservePort(port)
		if err != nil {
			n.abandon()
			return plan.Plan{}, &setuperr.SetupError{Step: fmt.Sprintf("--publish %d: bind the host's 127.0.0.1:%d", port, port), Err: unwrapSyscall(err),
				Hint: "another program listens there; stop it or publish another port"}
		}
		n.published = append(n.published, h)
	}
	run := n.run.ForPidns(n.userinfo())
	if n.proxy != nil && run.Net.Proxy() {
		// Transparent egress: the init answers DNS on these addresses
		// inside and relays the runner's connects off loopback (pidinit,
		// egress.go).
		for _, a := range n.proxy.Nameservers() {
			run.Net.Nameservers = append(run.Net.Nameservers, a.String())
		}
	}
	if run.Privileges.ReportFS {
		if missing := seccomp.ProbeNotify().NotifyMissing(); missing != "" {
			n.p.Warnf("sandbox: refused writes are not named here (missing %s); the filesystem rules hold all the same", missing)
			run = run.WithoutFSReports()
		}
	}
	return run, nil
}

// userinfo is the proxy's per-run USER:PASS, which the proxy URLs in the
// runner's environment carry; "": no proxy.
func (n *network) userinfo() string {
	if n.proxy == nil || !n.run.Net.Proxy() {
		return ""
	}
	return n.proxy.Userinfo()
}

// abandon removes the --publish sockets of a pidns attempt that did not
// start (auto mode then runs subreaper mode, where the runner listens on
// the host itself), or of a run that ends.
func (n *network) abandon() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, h := range n.published {
		h.release()
	}
	n.published = nil
}

// fromInit serves the listeners the init made inside the runner's
// namespace (its NetListeners, before it is ready): the proxy's, and one
// per --host-port, each dialled on the host's loopback.
func (n *network) fromInit(_ stage.Kind, msg any) error {
	ls := msg.(*stage.NetListeners)
	fds := ls.FDs
	listen := func(fd int, name string) (net.Listener, error) {
		f := os.NewFile(uintptr(fd), name)
		defer f.Close()
		return net.FileListener(f)
	}
	if ls.ProxyAddr != "" {
		l, err := listen(fds[0], "proxy listener")
		if err != nil {
			return &setuperr.SetupError{Step: "serve the egress proxy's socket", Err: err}
		}
		n.proxy.Serve(l)
		fds = fds[1:]
	}
	for i, port := range ls.HostPorts {
		l, err := listen(fds[i], "host-port listener")
		if err != nil {
			return &setuperr.SetupError{Step: fmt.Sprintf("serve --host-port %d", port), Err: err}
		}
		n.proxy.Forward(l, fmt.Sprintf("--host-port %d", port), dialHost(port))
	}
	fds = fds[len(ls.HostPorts):]
	// Transparent egress (pidinit's egress.go): the DNS responder's
	// sockets on the nameservers' addresses inside, then the relay's.
	var dnsTCP []net.Listener
	var dnsUDP []net.PacketConn
	for i, a := range ls.Nameservers {
		f := os.NewFile(uintptr(fds[2*i]), "DNS socket")
		pc, err := net.FilePacketConn(f)
		f.Close()
		if err != nil {
			return &setuperr.SetupError{Step: "serve DNS at " + a + " inside", Err: err}
		}
		dnsUDP = append(dnsUDP, pc)
		l, err := listen(fds[2*i+1], "DNS listener")
		if err != nil {
			pc.Close()
			return &setuperr.SetupError{Step: "serve DNS at " + a + " inside", Err: err}
		}
		dnsTCP = append(dnsTCP, l)
	}
	if len(ls.Nameservers) > 0 {
		n.proxy.ServeDNSOn(dnsTCP, dnsUDP)
	}
	fds = fds[2*len(ls.Nameservers):]
	for i, a := range ls.Relay {
		l, err := listen(fds[i], "relay listener")
		if err != nil {
			return &setuperr.SetupError{Step: "serve the relay at " + a + " inside", Err: err}
		}
		n.proxy.ServeRelay(l)
	}
	return nil
}

// relayRoute answers the init's checker: may the runner's connect to Dst,
// which the checker makes to the relay from Src, go out, and what did
// dialling it give (egress.RelayRoute)? It dials: run it on a goroutine
// of its own, not on the one that follows the init's reports.
func (n *network) relayRoute(link *stage.Link, r *stage.RelayRoute) {
	src, err1 := netip.ParseAddrPort(r.Src)
	dst, err2 := netip.ParseAddrPort(r.Dst)
	reply := &stage.RelayRouted{ID: r.ID}
	if err1 == nil && err2 == nil && n.proxy != nil {
		ok, e := n.proxy.RelayRoute(src, dst)
		reply.Allowed, reply.Errno = ok, uint64(e)
	}
	_ = link.Send(stage.MsgRelayRouted, reply)
}

func dialHost(port uint16) egress.DialFunc {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))
	return func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
}

// attach hands the ready init's link to the session: the init says when
// the runner's server listens on a --publish port (publishState), and
// each connection then asks it for a socket connected to that server
// inside. It reports whether the session needs the link read (someone
// must follow it for the init's reports and answers to arrive).
func (n *network) attach(link *stage.Link, run *plan.Plan) bool {
	if len(n.published) == 0 {
		return run.Privileges.Checked() // the checker's refusals come on it
	}
	n.mu.Lock()
	for _, h := range n.published {
		h.dial = dialInside(link, h.port)
	}
	n.mu.Unlock()
	return true
}

// onRefused names a socket call the engine's checker refused: a direct
// attempt past the proxy once per destination on stderr and in the
// connection log (egress.Proxy.Direct), anything else (a Unix socket, a
// loopback port) once per name on stderr.
func (n *network) onRefused(r stage.Refused) {
	switch r.Kind {
	case "fs":
		n.writes.say(n.p, n.log, n.run.Privileges.Landlock.Hide, r) // fsrefused.go
		return
	case "mount":
		n.writes.mountTried(n.p, r)
		return
	}
	// A UDP destination refused (subreaper mode's DNS-only UDP): named
	// once per destination, and in the connection log.
	if ap, err := netip.ParseAddrPort(r.Addr); err == nil && (r.Kind == "udp" || r.Kind == "dns") && r.Call != "socket" && n.proxy != nil {
		n.proxy.DirectUDP(ap, r.Path, r.Kind == "dns")
		return
	}
	// A TCP call refused is a connect past the proxy, loopback too: named
	// once per destination on stderr and in the connection log.
	if ap, err := netip.ParseAddrPort(r.Addr); err == nil && r.Kind == "tcp" && r.Call != "bind" && r.Call != "listen" && n.proxy != nil {
		n.proxy.Direct(ap, r.Reason)
		return
	}
	what := r.Call + " " + r.Addr
	verb := "network: denied"
	switch r.Kind {
	case "internal":
		n.p.Warnf("internal error: %s: %s", r.Call, r.Reason)
		return
	case "udp":
		what = "a UDP socket (a DNS query, say)"
	case "inet":
		what = "an IP socket other than TCP"
	case "unix", "abstract":
		what = r.Call + " to " + r.Kind + " socket " + r.Path
	}
	if r.Call == "socket" && (r.Kind == "udp" || r.Kind == "inet") && len(n.run.Net.Allow) == 0 {
		// --net none: every IP socket is refused, TCP too, and there is
		// no proxy to point at.
		what, r.Reason = "an IP socket", "the command has no network (--net none)"
	}
	if r.Call == "socket" && n.proxy != nil {
		n.proxy.DirectSocket(r.Kind, r.Reason)
	}
	if (r.Kind == "udp" || r.Kind == "inet") && len(n.run.Net.Allow) > 0 {
		r.Reason += "; only TCP to what --allow-net admits, and DNS, leave the sandbox"
	}
	n.mu.Lock()
	first := !n.named[what] && len(n.named) < maxNamed
	if first {
		n.named[what] = true
	}
	n.mu.Unlock()
	if first {
		n.p.Warnf("%s %s: %s", verb, what, r.Reason)
	}
}

// maxNamed bounds how many refused names are said: a runner that tries
// names without end cannot grow corral's memory or its stderr.
const maxNamed = 256

func dialInside(link *stage.Link, port uint16) egress.DialFunc {
	return func(ctx context.Context) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		r, err := link.Call(ctx, stage.MsgPublishDial, &stage.PublishDial{Port: port})
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, errors.New("the init did not answer")
		}
		if err != nil {
			return nil, fmt.Errorf("ask the init for a connection: %w", err)
		}
		c := r.(*stage.PublishConn)
		if c.Errno != 0 {
			return nil, syscall.Errno(c.Errno)
		}
		f := os.NewFile(uintptr(c.FDs[0]), "published connection")
		defer f.Close()
		return net.FileConn(f)
	}
}

// forSubreaper is the plan of a subreaper-mode run: with an allowlist the
// proxy listens on the host's loopback first, so the plan can name it.
func (n *network) forSubreaper() (plan.Plan, string, error) {
	if !n.run.Isolated() {
		return n.run.ForSubreaper(plan.Subreaper{}) // --hide's socket checks
	}
	// A server on [::1] alone is published at 127.0.0.1 too (publish.go).
	if err := n.watchHost(); err != nil {
		return plan.Plan{}, "", &setuperr.SetupError{Step: "--publish: watch the host's listening sockets", Err: err}
	}
	found := plan.Subreaper{Userinfo: n.userinfo()}
	info, err := landlock.Describe()
	found.LandlockErr, found.LandlockABI, found.TCPPorts = err, info.ABI, err == nil && info.TCPPortRules()
	if n.run.Net.Proxy() && found.TCPPorts { // without them ForSubreaper refuses
		l, err := egress.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return plan.Plan{}, "", &setuperr.SetupError{Step: "listen for the egress proxy on the host's loopback", Err: unwrapSyscall(err)}
		}
		found.ProxyAddr, found.ProxyPort = l.Addr().String(), uint16(l.Addr().(*net.TCPAddr).Port)
		n.proxy.Serve(l)
	}
	if n.run.Net.Proxy() {
		// The runner's own lookups, answered by corral (egress.ServeDNS):
		// the checker brings its connects to port 53 here.
		dns, err := n.proxy.ServeDNS()
		if err != nil {
			return plan.Plan{}, "", &setuperr.SetupError{Step: "listen for the runner's DNS queries on the host's loopback", Err: unwrapSyscall(err)}
		}
		n.dns, found.DNS = dns, true
		// UDP sockets for the resolvers that ask over UDP: the checker
		// makes them and hands them over (SECCOMP_ADDFD_FLAG_SEND, 5.14);
		// on an older kernel they stay refused, and TCP answers glibc.
		found.UDP = seccomp.AddfdSendMissing() == ""
	}
	return n.run.ForSubreaper(found)
}

// unwrapSyscall keeps the errno of a net error, for SetupError's errno
// name.
func unwrapSyscall(err error) error {
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Err
	}
	return err
}

// The --publish ports on the host (publish.go holds the sockets).

// publishState follows the init's word on a --publish port: listen on the
// host while the runner's server listens inside.
func (n *network) publishState(s stage.PublishState) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, h := range n.published {
		if h.port != s.Port {
			continue
		}
		if !s.Listening {
			h.unlisten()
			return
		}
		if err := h.listen(n.proxy); err != nil {
			n.p.Warnf("network: --publish %d: listen on the host's 127.0.0.1:%d: %v", h.port, h.port, err)
		}
		return
	}
}

// watchHost is subreaper mode's: while the runner's server on a --publish
// port listens on [::1] and nothing listens on 127.0.0.1 (the port seen
// so for two looks in a row, so that a server that binds both addresses
// binds both before corral takes one), the host side listens on
// 127.0.0.1:PORT and forwards to [::1]:PORT. A 127.0.0.1 that another
// socket holds (a dual-stack one) is left to it.
func (n *network) watchHost() error {
	ports := n.run.Net.Publish
	if len(ports) == 0 {
		return nil
	}
	w, err := portwatch.Open()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	n.stopWatch = func() {
		cancel()
		<-done
	}
	go func() {
		defer close(done)
		defer w.Close()
		forwards := map[uint16]net.Listener{}
		defer func() {
			for _, l := range forwards {
				l.Close()
			}
		}()
		v6only := map[uint16]int{} // looks in a row
		t := time.NewTicker(portwatch.Interval)
		defer t.Stop()
		for {
			states, err := w.Look(ports)
			if err != nil {
				n.p.Warnf("network: --publish: stopped watching the host's loopback: %v", err)
				return
			}
			for _, port := range ports {
				s := states[port]
				if l := forwards[port]; l != nil {
					if !s.V6 { // its 127.0.0.1 is corral's own
						l.Close()
						delete(forwards, port)
						v6only[port] = 0
					}
					continue
				}
				if !s.V6 || s.V4 {
					v6only[port] = 0
					continue
				}
				if v6only[port]++; v6only[port] != 2 {
					continue
				}
				l, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
				if err != nil {
					if !errors.Is(err, syscall.EADDRINUSE) {
						n.p.Warnf("network: --publish %d: listen on the host's 127.0.0.1:%d for the server on [::1]: %v", port, port, err)
					}
					continue
				}
				forwards[port] = l
				n.proxy.Forward(l, fmt.Sprintf("--publish %d", port), dialLoopback6(port))
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return nil
}
