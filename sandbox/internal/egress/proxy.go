package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"
)

// Defaults for the zero values of Config's limits.
const (
	DefaultMaxConns         = 256
	DefaultMaxHeaderBytes   = 32 << 10
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultDialTimeout      = 10 * time.Second
)

// maxDeniedLines bounds the set of destinations already reported on
// stderr, so a runner that tries a million names costs a bounded amount of
// memory and of the user's terminal.
const maxDeniedLines = 1024

// Config configures a Proxy. Only Rules is required.
type Config struct {
	// Rules are the --allow-net destinations (ParseRule).
	Rules []Rule
	// Deny are the --deny-net destinations (ParseDenyRule): a match
	// refuses even where a rule of Rules allows.
	Deny []Rule
	// Resolver resolves names; nil means a LaunchResolver made by NewProxy
	// from /etc/hosts and /etc/resolv.conf as they are then (make the
	// Proxy before the runner exists).
	Resolver Resolver
	// Log receives a decision line per attempt and an end line per allowed
	// one; nil writes none. The Proxy does not close it.
	Log *Log
	// Stderr receives one line per refused destination, the cap warnings
	// and the log's write failure; nil discards them.
	Stderr io.Writer
	// MaxConns bounds the connections served at once, over every listener
	// of the Proxy (Serve and Forward alike). Beyond it a connection is
	// refused with a reason (HTTP 503, SOCKS reply 1, or closed for a
	// forward). A proxy connection takes its place only once its
	// credentials are checked and its request read; until then it is one
	// of at most MaxConns handshakes, the oldest of which is closed to make
	// room for a new one, so clients without the credentials never hold
	// the runner's places. 0 means DefaultMaxConns.
	MaxConns int
	// MaxHeaderBytes bounds an HTTP request's header (431 beyond it) and an
	// upstream response's header (502). 0 means DefaultMaxHeaderBytes.
	MaxHeaderBytes int
	// HandshakeTimeout bounds the whole handshake, from accept until the
	// request is read (HTTP) or the request message is read (SOCKS5): a
	// silent or trickling client is closed. It does not apply to a tunnel
	// once established, which may be idle for as long as it likes. 0 means
	// DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// DialTimeout bounds connecting to the destination (every address of a
	// name together), and a Forward's dial. 0 means DefaultDialTimeout.
	DialTimeout time.Duration
}

// Proxy is corral's egress proxy and port forwarder. It serves listeners it
// is given (Serve, Forward) until Close. Every goroutine it starts and every
// connection it holds ends in Close.
type Proxy struct {
	cfg    Config
	policy *Policy
	auth   credentials
	ctx    context.Context // cancelled by Close: aborts resolving and dialling
	cancel context.CancelFunc

	mu          sync.Mutex
	closed      bool
	listeners   map[net.Listener]struct{}
	conns       map[net.Conn]*connState
	seq         uint64 // orders handshakes, for eviction
	handshaking int    // accepted proxy connections not yet admitted, against MaxConns
	active      int    // connections being served, against MaxConns
	capWarned   bool
	denied      map[string]struct{}
	wg          sync.WaitGroup

	refusals refusalLimiter
	stderrMu sync.Mutex

	// The DNS responder's (dns.go): its UDP sockets, closed by Close, and
	// the addresses it answered with.
	packets  []net.PacketConn
	answered answers
	dnsLines refusalLimiter // the log's lines of answered lookups
	// The relay's routes (relay.go).
	relayRoutes routes
}

// connState is where a connection the Proxy holds stands.
type connState struct {
	stage   connStage
	seq     uint64
	evicted bool // closed while handshaking, to make room
}

type connStage int

const (
	stageHandshake connStage = iota // accepted by Serve, credentials not yet checked
	stageActive                     // counted against MaxConns
	stageDialled                    // a connection the Proxy made
)

// NewProxy returns a Proxy for cfg. It serves nothing until Serve or
// Forward is called. It fails only when no random bytes can be had for
// the proxy's credentials.
func NewProxy(cfg Config) (*Proxy, error) {
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.Resolver == nil {
		cfg.Resolver = NewLaunchResolver(HostsPath, ResolvConfPath)
	}
	auth, err := newCredentials()
	if err != nil {
		return nil, err
	}
	policy := NewPolicy(cfg.Rules, cfg.Resolver)
	policy.deny = append([]Rule(nil), cfg.Deny...)
	policy.local = interfaceAddrs()
	ctx, cancel := context.WithCancel(context.Background())
	return &Proxy{
		cfg:       cfg,
		policy:    policy,
		auth:      auth,
		ctx:       ctx,
		cancel:    cancel,
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[net.Conn]*connState),
		denied:    make(map[string]struct{}),
	}, nil
}

// Serve serves the HTTP and SOCKS5 proxy on l, telling them apart by the
// first byte a client sends (5: SOCKS5). It returns at once; the Proxy owns
// l from now on and closes it in Close. l may have been created in another
// network namespace (a listener made from a descriptor received over a
// socket): accepted connections stay in that namespace, while the proxy
// resolves and dials from its own.
func (p *Proxy) Serve(l net.Listener) {
	p.start(l, func(c net.Conn) { p.admit(c, stageHandshake, p.serveProxy) })
}

// DialFunc connects a forwarded connection to its other end.
type DialFunc func(ctx context.Context) (net.Conn, error)

// Forward accepts on l and joins each connection to one made by dial,
// copying both ways with half-close, under the same connection cap and
// teardown as Serve. It returns at once; the Proxy owns l from now on. dial
// gets a context that ends at DialTimeout or Close; the connection it
// returns is owned by the Proxy. No policy applies (the caller chose both
// ends) and no credentials are asked, but each connection is logged as an
// allowed attempt: host and port are l's address, address the other end's,
// and reason is what (e.g. "--host-port 5432").
func (p *Proxy) Forward(l net.Listener, what string, dial DialFunc) {
	var warnOnce sync.Once
	p.start(l, func(c net.Conn) {
		p.admit(c, stageActive, func(c net.Conn) { p.serveForward(c, l.Addr(), what, dial, &warnOnce) })
	})
}

// Close closes every listener and every connection of the Proxy, both
// sides, and waits for every goroutine it started to end. It returns once
// nothing of the Proxy remains; it does not close Config.Log. Later calls
// return nil at once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return nil
	}
	p.closed = true
	ls := make([]net.Listener, 0, len(p.listeners))
	for l := range p.listeners {
		ls = append(ls, l)
	}
	cs := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		cs = append(cs, c)
	}
	p.mu.Unlock()

	p.cancel()
	defer p.flushRefusals()
	var err error
	for _, l := range ls {
		if e := l.Close(); e != nil && !errors.Is(e, net.ErrClosed) && err == nil {
			err = e
		}
	}
	for _, c := range cs {
		c.Close()
	}
	p.mu.Lock()
	pcs := p.packets
	p.packets = nil
	p.mu.Unlock()
	for _, pc := range pcs {
		pc.Close()
	}
	p.wg.Wait()
	return err
}

// start registers l and runs its accept loop in a goroutine, which gives
// each connection to accepted.
func (p *Proxy) start(l net.Listener, accepted func(net.Conn)) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.Close()
		return
	}
	p.listeners[l] = struct{}{}
	p.wg.Add(1)
	p.mu.Unlock()
	go p.acceptLoop(l, accepted)
}

func (p *Proxy) acceptLoop(l net.Listener, accepted func(net.Conn)) {
	defer p.wg.Done()
	// A listener its owner closed (--publish's, while the runner's server
	// does not listen) is forgotten: a server that restarts often does not
	// grow the set.
	defer func() {
		p.mu.Lock()
		delete(p.listeners, l)
		p.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if p.isClosed() || errors.Is(err, net.ErrClosed) {
				return
			}
			if !transientAcceptError(err) {
				p.warnf("corral: network: stopped serving %s: %v\n", l.Addr(), err)
				return
			}
			// Out of descriptors or memory, or a connection reset
			// before it was accepted: wait a little, as net/http does,
			// rather than spin.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			t := time.NewTimer(backoff)
			select {
			case <-p.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		backoff = 0
		accepted(c)
	}
}

func transientAcceptError(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM,
		syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EINTR, syscall.EAGAIN, syscall.EPROTO, syscall.EPERM} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// admit registers c at stage and runs handle for it. A forward
// (stageActive) takes a place under MaxConns or is closed at once. A proxy
// connection (stageHandshake) takes a handshake place: when all MaxConns
// are taken, the oldest handshake is closed to make room, so a flood of
// connections that never authenticate delays the runner's by no more than
// its own handshake.
func (p *Proxy) admit(c net.Conn, stage connStage, handle func(net.Conn)) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		c.Close()
		return
	}
	var evict net.Conn
	switch {
	case stage == stageActive && p.active >= p.cfg.MaxConns:
		warn := p.overCapLocked()
		p.mu.Unlock()
		p.warnCap(warn)
		p.refusedEarly("", 0, p.overCapReason())
		c.Close()
		return
	case stage == stageActive:
		p.active++
	case p.handshaking >= p.cfg.MaxConns:
		evict = p.oldestHandshakeLocked()
		p.conns[evict].evicted = true
		fallthrough
	default:
		p.handshaking++
	}
	if evict != nil {
		p.handshaking--
	}
	p.seq++
	p.conns[c] = &connState{stage: stage, seq: p.seq}
	p.wg.Add(1)
	p.mu.Unlock()
	if evict != nil {
		evict.Close()
	}
	go func() {
		defer p.wg.Done()
		defer p.release(c)
		handle(c)
	}()
}

func (p *Proxy) oldestHandshakeLocked() net.Conn {
	var oldest net.Conn
	var seq uint64
	for c, st := range p.conns {
		if st.stage == stageHandshake && !st.evicted && (oldest == nil || st.seq < seq) {
			oldest, seq = c, st.seq
		}
	}
	return oldest
}

// promote moves a proxy connection whose credentials and request are
// read from its handshake place to a place under MaxConns. It returns
// false when none is free (or c was evicted): the caller tells the client.
func (p *Proxy) promote(c net.Conn) bool {
	p.mu.Lock()
	st := p.conns[c]
	if st == nil || st.evicted || st.stage != stageHandshake {
		p.mu.Unlock()
		return false
	}
	if p.active >= p.cfg.MaxConns {
		warn := p.overCapLocked()
		p.mu.Unlock()
		p.warnCap(warn)
		return false
	}
	p.active++
	p.handshaking--
	st.stage = stageActive
	p.mu.Unlock()
	return true
}

// overCapLocked notes an over-cap refusal and reports whether it is the
// first of an episode, which deserves a line on stderr.
func (p *Proxy) overCapLocked() bool {
	warn := !p.capWarned
	p.capWarned = true
	return warn
}

func (p *Proxy) warnCap(warn bool) {
	if warn {
		p.warnf("corral: network: refusing connections beyond %d at once (the limit); they get an error until some close\n", p.cfg.MaxConns)
	}
}

func (p *Proxy) overCapReason() string {
	return fmt.Sprintf("too many connections at once (limit %d)", p.cfg.MaxConns)
}

// release closes a connection accepted by admit and gives back its place.
func (p *Proxy) release(c net.Conn) {
	c.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.conns[c]
	delete(p.conns, c)
	switch {
	case st == nil:
	case st.stage == stageHandshake && !st.evicted:
		p.handshaking--
	case st.stage == stageActive:
		p.active--
		if p.active < p.cfg.MaxConns {
			// A new episode of overload deserves a new line.
			p.capWarned = false
		}
	}
}

// track registers a connection the Proxy made (a dialled one) so Close
// closes it. It returns false, having closed c, when the Proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = &connState{stage: stageDialled}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

func (p *Proxy) warnf(format string, args ...any) {
	if p.cfg.Stderr == nil {
		return
	}
	p.stderrMu.Lock()
	defer p.stderrMu.Unlock()
	fmt.Fprintf(p.cfg.Stderr, format, args...)
}

// open decides host (as the client sent it) and at's port and, when
// allowed, dials a checked address; it writes the decision line either
// way. It returns the connection, or nil with the decision (refused or
// not resolved) or the dial's error.
func (p *Proxy) open(host string, at *attempt) (net.Conn, Decision, error) {
	d := p.policy.Decide(p.ctx, host, at.port)
	if !d.Allowed {
		if d.Failed {
			at.allow(d.Reason)
			at.end()
		} else {
			at.deny(d.Reason)
		}
		return nil, d, nil
	}
	up, addr, err := p.dial(d.Addrs, at.port)
	at.address = addr.String()
	if err != nil {
		at.allow(dialErrorReason(err))
		at.end()
		return nil, d, err
	}
	at.allow(d.Reason)
	return up, d, nil
}

// dial connects to one of addrs (already checked) at port, in order, within
// DialTimeout, and registers the connection with the Proxy. It returns the
// address connected to, or on failure the last one tried.
func (p *Proxy) dial(addrs []netip.Addr, port uint16) (net.Conn, netip.Addr, error) {
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.DialTimeout)
	defer cancel()
	// No keepalive at the dial: its four setsockopt(2) would come before
	// the client's answer. keepAlive turns the same probes on once the
	// client has it.
	d := net.Dialer{KeepAlive: -1}
	var last netip.Addr
	lastErr := errors.New("no address to connect to")
	for _, a := range addrs {
		last = a
		c, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(a, port).String())
		if err == nil {
			if !p.track(c) {
				return nil, a, net.ErrClosed
			}
			return c, a, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, last, lastErr
}

// keepAlive turns TCP keepalive on for a connection dial made, as
// net.Dialer's defaults would have at the dial (probes after 15 s idle,
// 15 s apart, 9 of them): they tell a tunnel whose destination went away,
// which the client's own probes, answered by the proxy, cannot. It is
// called once the client has its answer (join, forwardRequest), so that
// its system calls are no part of the time to the first byte (about
// 10 µs of it here, with the listener's, Listen).
func keepAlive(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 15 * time.Second, Count: 9})
	}
}

// Listen makes a listener for Serve on this host: the connections it
// accepts have no TCP keepalive. Their other end is a client on this
// host, whose end the kernel reports by closing its connection, so the
// probes could tell nothing, and their four setsockopt(2) would come
// before each connection's first byte.
func Listen(network, address string) (net.Listener, error) {
	lc := net.ListenConfig{KeepAlive: -1}
	return lc.Listen(context.Background(), network, address)
}

// dialErrorReason says why a dial failed, without the addresses Go's error
// repeats.
func dialErrorReason(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ENETUNREACH):
		return "network unreachable"
	case errors.Is(err, syscall.EHOSTUNREACH):
		return "host unreachable"
	case errors.Is(err, net.ErrClosed), errors.Is(err, context.Canceled):
		return "proxy shutting down"
	case errors.As(err, &ne) && ne.Timeout():
		return "connect timed out"
	}
	var se syscall.Errno
	if errors.As(err, &se) {
		return se.Error()
	}
	return err.Error()
}

// serveProxy tells SOCKS5 from HTTP by the first byte and serves c.
func (p *Proxy) serveProxy(c net.Conn) {
	c.SetDeadline(time.Now().Add(p.cfg.HandshakeTimeout))
	hl := &headerLimit{r: c, n: p.cfg.MaxHeaderBytes, on: true}
	br := getReader(hl)
	defer putReader(br)
	first, err := br.Peek(1)
	if err != nil {
		return // silent until the deadline, or gone
	}
	if first[0] == socksVersion {
		p.serveSOCKS(c, br)
		return
	}
	p.serveHTTP(c, br, hl)
}

func (p *Proxy) serveForward(c net.Conn, local net.Addr, what string, dial DialFunc, warnOnce *sync.Once) {
	at := p.newAttempt("", 0)
	at.via = ViaDirect // the runner's own connect, relayed: no proxy protocol
	if ap, err := netip.ParseAddrPort(local.String()); err == nil {
		at.host, at.port = ap.Addr().Unmap().String(), ap.Port()
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.DialTimeout)
	up, err := dial(ctx)
	cancel()
	if err != nil {
		if !p.isClosed() {
			warnOnce.Do(func() {
				p.warnf("corral: network: forwarding %s: cannot connect to the other end (further failures not shown): %v\n", c.LocalAddr(), err)
			})
		}
		at.allow(what + "; cannot connect: " + dialErrorReason(err))
		at.end()
		return
	}
	if !p.track(up) {
		return
	}
	defer p.untrack(up)
	if ap, err := netip.ParseAddrPort(up.RemoteAddr().String()); err == nil {
		at.address = ap.Addr().Unmap().String()
	}
	at.allow(what)
	defer at.end()
	at.up, at.down = p.join(c, up, nil, false)
}

// headerLimit caps the bytes read while a handshake is parsed; once the
// handshake is done it is switched off and reads pass through.
type headerLimit struct {
	r   io.Reader
	n   int
	on  bool
	hit bool
}

var errHeaderTooLarge = errors.New("header too large")

func (h *headerLimit) Read(b []byte) (int, error) {
	if !h.on {
		return h.r.Read(b)
	}
	if h.n <= 0 {
		h.hit = true
		return 0, errHeaderTooLarge
	}
	if len(b) > h.n {
		b = b[:h.n]
	}
	n, err := h.r.Read(b)
	h.n -= n
	return n, err
}

var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4<<10) }}

func getReader(r io.Reader) *bufio.Reader {
	br := readerPool.Get().(*bufio.Reader)
	br.Reset(r)
	return br
}

func putReader(br *bufio.Reader) {
	br.Reset(nil)
	readerPool.Put(br)
}

// pending takes the bytes a client sent ahead of the handshake's end (a TLS
// ClientHello right after CONNECT, say) out of br, to be forwarded first.
func pending(br *bufio.Reader) []byte {
	n := br.Buffered()
	if n == 0 {
		return nil
	}
	b, _ := br.Peek(n)
	out := append([]byte(nil), b...)
	br.Discard(n)
	return out
}

// lingerClose ends a refused client's connection without a reset: unread
// bytes in the receive queue at close make the kernel send RST, which can
// destroy the answer before the client reads it. So shut down the write
// side, read what is left for a moment, then close.
func lingerClose(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	c.SetReadDeadline(time.Now().Add(time.Second))
	buf := getBuf()
	defer putBuf(buf)
	for range 16 {
		if _, err := c.Read(*buf); err != nil {
			break
		}
	}
}
