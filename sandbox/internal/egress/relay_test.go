package egress

import (
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// relayDial connects to the relay from src, a fresh loopback port the
// route was noted for (as the engine's checker binds the runner's socket).
func relayDial(t *testing.T, relay net.Listener, src netip.AddrPort) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(src), Timeout: hangLimit}
	c, err := d.Dial("tcp", relay.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// freeSource is a loopback address and port nothing holds now.
func freeSource(t *testing.T) netip.AddrPort {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return netip.MustParseAddrPort(l.Addr().String())
}

// The relay (namespace modes): a route RelayRoute admits takes the
// connection from its source to the decided destination once, with its
// log lines via direct; a destination no entry admits gets no route; a
// connection from a source with no route (a second one from the same
// source, or one the checker never routed) is reset and reaches nothing;
// a route to port 53 is answered by the DNS responder; Nameservers are
// the launch resolver's.
func TestRelay(t *testing.T) {
	echo := startServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) { io.Copy(c, c) })
	dst := netip.MustParseAddrPort(echo.l.Addr().String())
	other := startServer(t, "tcp", "127.0.0.2:0", func(c net.Conn) { c.Write([]byte("wrong")) })
	dir := t.TempDir()
	hp, rp := filepath.Join(dir, "hosts"), filepath.Join(dir, "resolv.conf")
	os.WriteFile(hp, []byte("8.8.4.4 api.example\n"), 0o644)
	os.WriteFile(rp, []byte("nameserver 192.0.2.53\nnameserver 192.0.2.53\nnameserver ::1\n"), 0o644)
	logPath := filepath.Join(dir, "net.log")
	log, err := OpenLog(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	p := startProxy(t, Config{Resolver: NewLaunchResolver(hp, rp), Log: log}, "127.0.0.1:*", "api.example:443")
	if got := p.Nameservers(); len(got) != 2 || got[0] != netip.MustParseAddr("192.0.2.53") || got[1] != netip.IPv6Loopback() {
		t.Errorf("Nameservers: %v; want 192.0.2.53 and ::1, each once", got)
	}
	rl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.ServeRelay(rl)

	if ok, _ := p.RelayRoute(freeSource(t), netip.MustParseAddrPort(other.l.Addr().String())); ok {
		t.Error("a route to an address no entry admits")
	}
	// Admitted, but nothing listens there: the dial's errno, as the
	// runner's connect would have had it.
	closed := freeSource(t)
	if ok, e := p.RelayRoute(freeSource(t), closed); !ok || e != syscall.ECONNREFUSED {
		t.Errorf("a route to an admitted address where nothing listens: %v %v; want allowed, ECONNREFUSED", ok, e)
	}
	src := freeSource(t)
	if ok, e := p.RelayRoute(src, dst); !ok || e != 0 {
		t.Fatalf("a route to an address an IP entry admits: %v %v", ok, e)
	}
	c := relayDial(t, rl, src)
	c.SetDeadline(time.Now().Add(hangLimit))
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Errorf("through the relay: %q %v; want the echo", buf, err)
	}
	c.Close()

	if _, ok := p.relayRoutes.take(src, time.Now()); ok {
		t.Error("a route served twice")
	}
	// Never routed: reset, which may come before the connect returns.
	d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(freeSource(t)), Timeout: hangLimit}
	if c, err := d.Dial("tcp", rl.Addr().String()); err == nil {
		c.SetDeadline(time.Now().Add(hangLimit))
		if n, err := c.Read(buf); err == nil || n != 0 {
			t.Errorf("a connection with no route read %q %v; want it closed", buf[:n], err)
		}
		c.Close()
	}
	p.relayRoutes.put(src, relayRoute{dst: dst, noted: time.Now().Add(-2 * routeTTL)})
	if _, ok := p.relayRoutes.take(src, time.Now()); ok {
		t.Error("an expired route served")
	}

	// Port 53, at any address: corral's DNS answers.
	src = freeSource(t)
	if ok, e := p.RelayRoute(src, netip.MustParseAddrPort("203.0.113.9:53")); !ok || e != 0 {
		t.Fatalf("no route to port 53: %v %v", ok, e)
	}
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return relayDial(t, rl, src), nil
	}}
	got, err := r.LookupNetIP(context.Background(), "ip4", "api.example")
	if err != nil || len(got) != 1 || got[0] != netip.MustParseAddr("8.8.4.4") {
		t.Errorf("DNS over TCP through the relay: %v %v; want 8.8.4.4", got, err)
	}
	p.Close()
	data, _ := os.ReadFile(logPath)
	lines := string(data)
	for _, want := range []string{`"address":"127.0.0.1","decision":"allow","reason":"allowed by 127.0.0.1:*"`, `"event":"end","bytes_up":4,"bytes_down":4`} {
		if !strings.Contains(lines, want) {
			t.Errorf("log: want %s in\n%s", want, lines)
		}
	}
}
