package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
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
	// Resolver resolves names; nil means the host's (net.DefaultResolver).
	Resolver Resolver
	// Log receives one line per proxied connection; nil writes none. The
	// Proxy does not close it.
	Log *Log
	// Stderr receives one line per refused destination, the cap warnings
	// and the log's write failure; nil discards them.
	Stderr io.Writer
	// MaxConns bounds the connections served at once, over every listener
	// of the Proxy (Serve and Forward alike). Beyond it a connection is
	// refused with a reason (HTTP 503, SOCKS reply 1, or closed for a
	// forward). 0 means DefaultMaxConns.
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
	ctx    context.Context // cancelled by Close: aborts resolving and dialling
	cancel context.CancelFunc

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{}
	active    int // connections being served, against MaxConns
	refusing  int // over-cap connections being told so, also bounded by MaxConns
	capWarned bool
	denied    map[string]struct{}
	wg        sync.WaitGroup

	stderrMu sync.Mutex
}

// NewProxy returns a Proxy for cfg. It serves nothing until Serve or
// Forward is called.
func NewProxy(cfg Config) *Proxy {
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
	ctx, cancel := context.WithCancel(context.Background())
	return &Proxy{
		cfg:       cfg,
		policy:    NewPolicy(cfg.Rules, cfg.Resolver),
		ctx:       ctx,
		cancel:    cancel,
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[net.Conn]struct{}),
		denied:    make(map[string]struct{}),
	}
}

// Serve serves the HTTP and SOCKS5 proxy on l, telling them apart by the
// first byte a client sends (5: SOCKS5). It returns at once; the Proxy owns
// l from now on and closes it in Close. l may have been created in another
// network namespace (a listener made from a descriptor received over a
// socket): accepted connections stay in that namespace, while the proxy
// resolves and dials from its own.
func (p *Proxy) Serve(l net.Listener) {
	p.start(l, p.serveProxyConn, p.refuseOverCap)
}

// DialFunc connects a forwarded connection to its other end.
type DialFunc func(ctx context.Context) (net.Conn, error)

// Forward accepts on l and joins each connection to one made by dial,
// copying both ways with half-close, under the same connection cap and
// teardown as Serve. It returns at once; the Proxy owns l from now on. dial
// gets a context that ends at DialTimeout or Close; the connection it
// returns is owned by the Proxy. No policy applies and nothing is logged:
// the caller chose both ends.
func (p *Proxy) Forward(l net.Listener, dial DialFunc) {
	var warnOnce sync.Once
	p.start(l, func(c net.Conn) {
		p.serveForward(c, dial, &warnOnce)
	}, nil)
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
	var err error
	for _, l := range ls {
		if e := l.Close(); e != nil && !errors.Is(e, net.ErrClosed) && err == nil {
			err = e
		}
	}
	for _, c := range cs {
		c.Close()
	}
	p.wg.Wait()
	return err
}

// start registers l and runs its accept loop in a goroutine. handle serves
// a connection within the cap; refuse, when not nil, tells one over the cap
// why it is refused (nil: it is just closed).
func (p *Proxy) start(l net.Listener, handle, refuse func(net.Conn)) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.Close()
		return
	}
	p.listeners[l] = struct{}{}
	p.wg.Add(1)
	p.mu.Unlock()
	go p.acceptLoop(l, handle, refuse)
}

func (p *Proxy) acceptLoop(l net.Listener, handle, refuse func(net.Conn)) {
	defer p.wg.Done()
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
		p.admit(c, handle, refuse)
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

// admit starts handle for c within the cap, or has refuse tell c it is
// over the cap, or, past twice the cap or without refuse, closes it at once.
func (p *Proxy) admit(c net.Conn, handle, refuse func(net.Conn)) {
	p.mu.Lock()
	switch {
	case p.closed:
		p.mu.Unlock()
		c.Close()
		return
	case p.active < p.cfg.MaxConns:
		p.active++
		p.conns[c] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go func() {
			defer p.wg.Done()
			defer p.release(c, true)
			handle(c)
		}()
		return
	}
	warn := !p.capWarned
	p.capWarned = true
	tell := refuse != nil && p.refusing < p.cfg.MaxConns
	if tell {
		p.refusing++
		p.conns[c] = struct{}{}
		p.wg.Add(1)
	}
	p.mu.Unlock()
	// The line comes first, so it is there by the time the client sees
	// the refusal.
	if warn {
		p.warnf("corral: network: refusing connections beyond %d at once (the limit); they get an error until some close\n", p.cfg.MaxConns)
	}
	if !tell {
		c.Close()
		return
	}
	go func() {
		defer p.wg.Done()
		defer p.release(c, false)
		refuse(c)
	}()
}

// release closes a connection accepted by admit and gives back its slot.
func (p *Proxy) release(c net.Conn, counted bool) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	if counted {
		p.active--
		if p.active < p.cfg.MaxConns {
			// A new episode of overload deserves a new line.
			p.capWarned = false
		}
	} else {
		p.refusing--
	}
	p.mu.Unlock()
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
	p.conns[c] = struct{}{}
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

// reportDenied prints the one stderr line for a refused destination, the
// first time it is refused.
func (p *Proxy) reportDenied(host string, port uint16, reason string) {
	dest := net.JoinHostPort(host, strconv.Itoa(int(port)))
	p.mu.Lock()
	_, seen := p.denied[dest]
	full := len(p.denied) >= maxDeniedLines
	if !seen && !full {
		p.denied[dest] = struct{}{}
	}
	if !seen && full {
		// One marker entry says the "more not shown" line was printed.
		_, seen = p.denied[""]
		p.denied[""] = struct{}{}
		p.mu.Unlock()
		if !seen {
			p.warnf("corral: network: more destinations denied; not shown (see --net-log)\n")
		}
		return
	}
	p.mu.Unlock()
	if !seen {
		p.warnf("corral: network: denied %s: %s\n", dest, reason)
	}
}

// attempt is one proxied connection, from the request to its end: what the
// connection log records.
type attempt struct {
	p       *Proxy
	start   time.Time
	host    string // for display: a normalised name, an IP address, or a quoted oddity
	port    uint16
	address string
	up      int64
	down    int64
}

func (p *Proxy) newAttempt(rawHost string, port uint16) *attempt {
	return &attempt{p: p, start: time.Now(), host: displayHost(rawHost), port: port}
}

// deny records a refusal by policy: the stderr line (once per destination)
// and the log line.
func (a *attempt) deny(reason string) {
	a.p.reportDenied(a.host, a.port, reason)
	a.log("deny", reason)
}

func (a *attempt) log(decision, reason string) {
	a.p.cfg.Log.write(&Entry{
		Time:      logTime(a.start),
		Host:      a.host,
		Port:      a.port,
		Address:   a.address,
		Decision:  decision,
		Reason:    reason,
		BytesUp:   a.up,
		BytesDown: a.down,
	}, a.p.cfg.Stderr)
}

// displayHost is host as the log and stderr show it: an IP address in its
// canonical form, a valid name normalised, anything else quoted (it came
// from the runner and may hold any byte).
func displayHost(host string) string {
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap().String()
	}
	if n, err := normalizeName(host); err == nil {
		return n
	}
	return strconv.Quote(host)
}

// dial connects to one of addrs (already checked) at port, in order, within
// DialTimeout, and registers the connection with the Proxy. It returns the
// address connected to, or on failure the last one tried.
func (p *Proxy) dial(addrs []netip.Addr, port uint16) (net.Conn, netip.Addr, error) {
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.DialTimeout)
	defer cancel()
	var d net.Dialer
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

// serveProxyConn tells SOCKS5 from HTTP by the first byte and serves c.
func (p *Proxy) serveProxyConn(c net.Conn) {
	p.serveProxy(c, false)
}

// refuseOverCap speaks enough of either protocol to tell the client why it
// is refused, then closes.
func (p *Proxy) refuseOverCap(c net.Conn) {
	p.serveProxy(c, true)
}

func (p *Proxy) serveProxy(c net.Conn, overCap bool) {
	c.SetDeadline(time.Now().Add(p.cfg.HandshakeTimeout))
	hl := &headerLimit{r: c, n: p.cfg.MaxHeaderBytes, on: true}
	br := getReader(hl)
	defer putReader(br)
	first, err := br.Peek(1)
	if err != nil {
		return // silent until the deadline, or gone
	}
	if first[0] == socksVersion {
		p.serveSOCKS(c, br, overCap)
		return
	}
	p.serveHTTP(c, br, hl, overCap)
}

func (p *Proxy) serveForward(c net.Conn, dial DialFunc, warnOnce *sync.Once) {
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.DialTimeout)
	up, err := dial(ctx)
	cancel()
	if err != nil {
		if !p.isClosed() {
			warnOnce.Do(func() {
				p.warnf("corral: network: forwarding %s: cannot connect to the other end (further failures not shown): %v\n", c.LocalAddr(), err)
			})
		}
		return
	}
	if !p.track(up) {
		return
	}
	defer p.untrack(up)
	p.join(c, up, nil)
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
