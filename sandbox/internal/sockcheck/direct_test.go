package sockcheck

import (
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
)

// A connect Policy.Direct allows is made on the runner's socket with the
// address the checker copied once: a thread that rewrites the sockaddr
// during the check (scenarioTOCTOU, 127.0.0.1 and 127.0.0.2 on one port,
// with no proxy here: 127.0.0.1 is admitted by Direct alone) never gets
// its connect to the address Direct refused.
func TestDirectTOCTOU(t *testing.T) {
	allowed := listenTCP(t, "127.0.0.1:0")
	fake := listenTCP(t, fmt.Sprintf("127.0.0.2:%d", allowed.port()))
	want := netip.MustParseAddrPort(allowed.ln.Addr().String())
	var asked atomic.Int64
	pol := Policy{Net: true, TCP: true, Direct: func(d netip.AddrPort) bool {
		asked.Add(1)
		return d == want
	}}
	run(t, "toctou", pol, fmt.Sprintf("CORRAL_SOCKCHECK_PROXY=%d", allowed.port()))
	time.Sleep(50 * time.Millisecond) // let the accept loops catch up
	if n := fake.accepted.Load(); n != 0 {
		t.Errorf("127.0.0.2 accepted %d connections: a rewritten sockaddr reached the kernel", n)
	}
	if allowed.accepted.Load() == 0 || asked.Load() == 0 {
		t.Errorf("the admitted address accepted %d connections (Direct asked %d times): the test proves nothing",
			allowed.accepted.Load(), asked.Load())
	}
}
