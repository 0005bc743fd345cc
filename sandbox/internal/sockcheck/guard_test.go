package sockcheck

import (
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

func init() { scenarios["panic"] = scenarioPanic }

// scenarioPanic makes three refused connects; corral's side panics while
// it handles the first (TestCheckerPanicFailsClosed).
func scenarioPanic(c *child) {
	other := envInt("OTHER")
	want(c, "a refused connect corral's side panics on", connect4(c, lo, other), unix.EACCES)
	want(c, "the next refused connect", connect4(c, lo, other), unix.EACCES)
	want(c, "a connect allowed", connect4(c, lo, envInt("PROXY")), 0)
}

// A bug of corral's that panics while it handles one of the runner's
// calls fails that call closed (EACCES), is named once as an internal
// error, and ends only that worker: corral and the other workers go on
// (no stack trace, no lost tree).
func TestCheckerPanicFailsClosed(t *testing.T) {
	proxy := listenTCP(t, "127.0.0.1:0")
	other := listenTCP(t, "127.0.0.1:0")
	var internal, refusals atomic.Int32
	var panicked atomic.Bool
	pol := Policy{Net: true, TCP: true, ProxyAddr: netip.MustParseAddrPort(proxy.ln.Addr().String())}
	pol.Report = func(r Refusal) {
		if r.Kind == "internal" {
			internal.Add(1)
			return
		}
		refusals.Add(1)
		if panicked.CompareAndSwap(false, true) {
			panic("a bug in the checker")
		}
	}
	run(t, "panic", pol, fmt.Sprintf("CORRAL_SOCKCHECK_OTHER=%d", other.port()),
		fmt.Sprintf("CORRAL_SOCKCHECK_PROXY=%d", proxy.port()))
	if n := other.accepted.Load(); n != 0 {
		t.Errorf("the refused port accepted %d connections", n)
	}
	if internal.Load() != 1 || refusals.Load() != 2 {
		t.Errorf("%d internal errors and %d refusals reported; want 1 and 2", internal.Load(), refusals.Load())
	}
}
