package sandbox

// The host side of the network policy (README.md, "Network policy"): the
// egress proxy and the port forwards run in the process the caller
// started, outside the runner's sandbox, on sockets made where the runner
// lives. In pidns mode the init makes the proxy's and the --host-port
// listening sockets inside the runner's network namespace and hands them
// over the stage socket (a socket keeps its namespace, whoever holds it),
// and each --publish connection gets a socket the init connected inside.
// In subreaper mode the proxy listens on the host's loopback, and the
// runner's socket filter and Landlock's TCP ports keep it to the proxy,
// the --host-port ports and its --publish ports.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/corral-sh/corral/internal/landlock"
	"github.com/corral-sh/corral/internal/seccomp"
	"github.com/corral-sh/corral/sandbox/internal/egress"
	"github.com/corral-sh/corral/sandbox/internal/stage"
)

// proxyPortInside is the proxy's port inside a new network namespace,
// where nothing else listens yet: the first free of these past the
// runner's own --host-port and --publish ports.
const proxyPortInside = 3128

// network is the host side's part of one run's network policy.
type network struct {
	p     *stage.Proc
	plan  *stage.Network
	proxy *egress.Proxy // nil: nothing to serve
	log   *egress.Log

	// --publish in pidns mode: the host listeners, and the init's answers
	// to the dials they wait on.
	published []net.Listener
	mu        sync.Mutex
	link      *stage.Link
	nextID    uint64
	pending   map[uint64]chan *stage.PublishConn
}

// openNetwork readies the host side of the network policy before anything
// of the runner exists: the rules, the connection log.
func openNetwork(p *stage.Proc, plan *stage.Plan) (*network, error) {
	n := &network{p: p, plan: &plan.Net, pending: map[uint64]chan *stage.PublishConn{}}
	if !plan.Isolated() {
		return n, nil
	}
	var rules []egress.Rule
	for _, d := range plan.Net.Allow {
		r, err := egress.ParseRule(d)
		if err != nil {
			return nil, &SetupError{Step: "network policy", Err: err}
		}
		rules = append(rules, r)
	}
	if plan.Net.LogPath != "" {
		log, err := egress.OpenLog(plan.Net.LogPath)
		if err != nil {
			return nil, &SetupError{Step: "open the connection log " + plan.Net.LogPath, Err: err,
				Hint: "--net-log creates a new file (mode 0600) and never follows a symlink; give a path in a directory you may write"}
		}
		n.log = log
	}
	n.proxy = egress.NewProxy(egress.Config{Rules: rules, Log: n.log, Stderr: p.Stderr})
	return n, nil
}

// close ends every proxied connection and forward and removes every
// listener, before corral exits.
func (n *network) close() {
	if n == nil || n.proxy == nil {
		return
	}
	n.closePublished()
	n.proxy.Close()
	if n.log != nil {
		n.log.Close()
	}
}

// closePublished removes the --publish listeners of a pidns attempt that
// did not start (auto mode then runs subreaper mode, where the runner
// listens on the host itself).
func (n *network) closePublished() {
	for _, l := range n.published {
		l.Close()
	}
	n.published = nil
}

// forPidns returns the plan the init gets: a network namespace for any
// network policy and, with a proxy, the runner's environment naming it at
// its address inside.
func (n *network) forPidns(plan stage.Plan) stage.Plan {
	// An allowlist is a network namespace too: the proxy is its only way
	// out.
	plan.Namespaces.Net = plan.Isolated()
	if !plan.Net.Proxy() {
		return plan
	}
	port := proxyPortInside
	for taken(plan.Net, port) {
		port++
	}
	plan.Net.ProxyAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	plan.Env = stage.WithProxyEnv(plan.Env, n.proxy.Userinfo()+"@"+plan.Net.ProxyAddr)
	return plan
}

func taken(n stage.Network, port int) bool {
	for _, p := range append(append([]uint16{}, n.HostPorts...), n.Publish...) {
		if int(p) == port {
			return true
		}
	}
	return false
}

// listenPublished makes the host's --publish listeners, before the init
// exists: a port already taken on the host is a setup error.
func (n *network) listenPublished() error {
	for _, port := range n.plan.Publish {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
		if err != nil {
			return &SetupError{Step: fmt.Sprintf("--publish %d: listen on the host's 127.0.0.1:%d", port, port), Err: unwrapSyscall(err),
				Hint: "another program listens there; stop it or publish another port"}
		}
		n.published = append(n.published, l)
	}
	return nil
}

// serveInside serves the listeners the init made inside the runner's
// namespace: the proxy's, and one per --host-port, each dialled on the
// host's loopback.
func (n *network) serveInside(ls *stage.NetListeners) error {
	fds := ls.FDs
	listen := func(fd int, name string) (net.Listener, error) {
		f := os.NewFile(uintptr(fd), name)
		defer f.Close()
		return net.FileListener(f)
	}
	if ls.ProxyAddr != "" {
		l, err := listen(fds[0], "proxy listener")
		if err != nil {
			return &SetupError{Step: "serve the egress proxy's socket", Err: err}
		}
		n.proxy.Serve(l)
		fds = fds[1:]
	}
	for i, port := range ls.HostPorts {
		l, err := listen(fds[i], "host-port listener")
		if err != nil {
			return &SetupError{Step: fmt.Sprintf("serve --host-port %d", port), Err: err}
		}
		n.proxy.Forward(l, fmt.Sprintf("--host-port %d", port), dialHost(port))
	}
	return nil
}

func dialHost(port uint16) egress.DialFunc {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))
	return func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
}

// forwardPublished serves the --publish listeners once the init can
// answer dials on link: each connection gets a socket the init connected
// to the runner's server inside.
func (n *network) forwardPublished(link *stage.Link) {
	n.mu.Lock()
	n.link = link
	n.mu.Unlock()
	for i, l := range n.published {
		n.proxy.Forward(l, fmt.Sprintf("--publish %d", n.plan.Publish[i]), n.dialInside(n.plan.Publish[i]))
	}
	n.published = nil // the proxy owns and closes them now
}

func (n *network) dialInside(port uint16) egress.DialFunc {
	return func(ctx context.Context) (net.Conn, error) {
		reply := make(chan *stage.PublishConn, 1)
		n.mu.Lock()
		n.nextID++
		id := n.nextID
		n.pending[id] = reply
		link := n.link
		n.mu.Unlock()
		defer func() {
			n.mu.Lock()
			delete(n.pending, id)
			n.mu.Unlock()
		}()
		if err := link.Send(stage.MsgPublishDial, &stage.PublishDial{ID: id, Port: port}); err != nil {
			return nil, fmt.Errorf("ask the init for a connection: %w", err)
		}
		select {
		case c := <-reply:
			if c.Errno != 0 {
				return nil, syscall.Errno(c.Errno)
			}
			f := os.NewFile(uintptr(c.FDs[0]), "published connection")
			defer f.Close()
			return net.FileConn(f)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Second):
			return nil, errors.New("the init did not answer")
		}
	}
}

// answered routes the init's answer to the dial that waits for it; one no
// dial waits for (it timed out) is closed.
func (n *network) answered(c *stage.PublishConn) {
	n.mu.Lock()
	reply, ok := n.pending[c.ID]
	n.mu.Unlock()
	if ok {
		reply <- c
		return
	}
	for _, fd := range c.FDs {
		syscall.Close(fd)
	}
}

// forSubreaper returns the plan of a subreaper-mode run with the network
// policy on the runner: the socket filter, Landlock's TCP ports where the
// kernel has them (required for anything but --net none), and, with an
// allowlist, the proxy on the host's loopback in the runner's environment.
func (n *network) forSubreaper(plan stage.Plan) (stage.Plan, string, error) {
	if !plan.Isolated() {
		return plan, "", nil
	}
	tcp := plan.Net.Proxy() || len(plan.Net.HostPorts) > 0 || len(plan.Net.Publish) > 0
	plan.Privileges.Sockets = &seccomp.SocketRules{AllowTCP: tcp}
	info, err := landlock.Describe()
	ports := err == nil && info.TCPPortRules()
	if tcp && !ports {
		why := "this kernel's Landlock has no TCP port rules (ABI 4, Linux 6.7)"
		if err != nil {
			why = err.Error()
		}
		return plan, "", &SetupError{Step: "network policy in subreaper mode", Err: stage.PlainError(why),
			Hint: "--allow-net, --host-port and --publish need a network namespace (pidns mode) or Landlock's TCP port rules; corral does not run the command with more network than asked"}
	}
	var connect []uint16
	how := "seccomp socket filter"
	if plan.Net.Proxy() {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return plan, "", &SetupError{Step: "listen for the egress proxy on the host's loopback", Err: unwrapSyscall(err)}
		}
		plan.Net.ProxyAddr = l.Addr().String()
		plan.Env = stage.WithProxyEnv(plan.Env, n.proxy.Userinfo()+"@"+plan.Net.ProxyAddr)
		connect = append(connect, uint16(l.Addr().(*net.TCPAddr).Port))
		n.proxy.Serve(l)
		how += ", egress proxy at " + plan.Net.ProxyAddr
	}
	if ports {
		connect = append(connect, plan.Net.HostPorts...)
		plan.Privileges.Landlock.Net = &landlock.NetPolicy{ConnectTCP: connect, BindTCP: plan.Net.Publish}
		how += fmt.Sprintf(", Landlock ABI %d TCP ports (connect %v, bind %v)", info.ABI, connect, plan.Net.Publish)
	}
	return plan, how, nil
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
