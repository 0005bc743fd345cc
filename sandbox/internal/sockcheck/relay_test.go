package sockcheck

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func init() { scenarios["relaytoctou"] = scenarioRelayTOCTOU }

// The relay's destinations in the TOCTOU scenario: documentation
// addresses (TEST-NET-3), one admitted and one not, on one port.
var (
	relayGood = [4]byte{203, 0, 113, 1}
	relayBad  = [4]byte{203, 0, 113, 2}
)

// scenarioRelayTOCTOU: another thread flips the sockaddr between an
// admitted destination off loopback and a refused one while this thread
// connects. Each connect the checker allows must reach the relay (the
// peer is the relay's address, CORRAL_SOCKCHECK_RELAY), never either
// destination itself; each other is EACCES.
func scenarioRelayTOCTOU(c *child) {
	port, relay := envInt("DPORT"), envInt("RELAY")
	good, bad := sockaddr4(relayGood, port), sockaddr4(relayBad, port)
	sa := make([]byte, len(good))
	copy(sa, good)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // an unlocked goroutine: another thread
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			src := good
			if i&1 == 1 {
				src = bad
			}
			for j := range sa {
				*(*byte)(unsafe.Pointer(&sa[j])) = src[j]
			}
		}
	}()
	ok, refused := 0, 0
	for range 600 {
		fd := tcpSocket(c, unix.AF_INET)
		switch e := rawConnect(fd, sa); e {
		case 0:
			ok++
			p, err := unix.Getpeername(fd)
			if err != nil || p.(*unix.SockaddrInet4).Addr != lo || p.(*unix.SockaddrInet4).Port != relay {
				c.errorf("connected to %v, not the relay at 127.0.0.1:%d", p, relay)
			}
		case unix.EACCES:
			refused++
		default:
			c.errorf("connect: %v", errName(e))
		}
		unix.Close(fd)
	}
	stop.Store(true)
	wg.Wait()
	fmt.Printf("allowed %d refused %d\n", ok, refused)
}

// testRelay is a Relay whose routes admit relayGood alone, remembering
// every source it noted.
type testRelay struct {
	v4      netip.AddrPort
	good    netip.AddrPort
	mu      sync.Mutex
	routed  map[netip.AddrPort]netip.AddrPort
	refused atomic.Int64
}

func (r *testRelay) Addrs() (netip.AddrPort, netip.AddrPort) { return r.v4, netip.AddrPort{} }
func (r *testRelay) Local(a netip.Addr) bool                 { return a.IsLoopback() }
func (r *testRelay) Route(src, dst netip.AddrPort) (bool, unix.Errno) {
	if dst != r.good {
		r.refused.Add(1)
		return false, 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.routed[src] = dst
	return true, 0
}

// In a namespace mode the checker makes a TCP connect off loopback to the
// relay, after Route decided the address it copied: a thread that rewrites
// the sockaddr during the check never gets a connection routed to the
// address Route refused, and every connection the relay accepts comes
// from a source routed to the admitted one.
func TestRelayTOCTOU(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	var sources []netip.AddrPort
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			sources = append(sources, netip.MustParseAddrPort(c.RemoteAddr().String()))
			mu.Unlock()
			c.Close()
		}
	}()
	relayAt := netip.MustParseAddrPort(ln.Addr().String())
	const port = 4242
	r := &testRelay{v4: relayAt, good: netip.AddrPortFrom(netip.AddrFrom4(relayGood), port), routed: map[netip.AddrPort]netip.AddrPort{}}
	var refusals atomic.Int64
	pol := Policy{Net: true, Relay: r, Report: func(Refusal) { refusals.Add(1) }}
	run(t, "relaytoctou", pol, fmt.Sprintf("CORRAL_SOCKCHECK_DPORT=%d", port), fmt.Sprintf("CORRAL_SOCKCHECK_RELAY=%d", relayAt.Port()))
	time.Sleep(50 * time.Millisecond) // let the accept loop catch up
	mu.Lock()
	defer mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(sources) == 0 || r.refused.Load() == 0 {
		t.Fatalf("the relay accepted %d connections and Route refused %d: the test proves nothing", len(sources), r.refused.Load())
	}
	for _, src := range sources {
		if dst, ok := r.routed[src]; !ok || dst != r.good {
			t.Errorf("the relay accepted a connection from %v, routed to %v (%v)", src, dst, ok)
		}
	}
	if refusals.Load() != r.refused.Load() {
		t.Errorf("%d refusals reported, Route refused %d", refusals.Load(), r.refused.Load())
	}
}
