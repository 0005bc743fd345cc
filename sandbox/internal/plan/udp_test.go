package plan

import (
	"slices"
	"testing"
)

// Subreaper mode under --allow-net admits UDP sockets (for DNS) only
// where the host found both corral's responder and a kernel that can hand
// the checker's sockets over; RES_OPTIONS=use-vc goes with DNS either way.
func TestSubreaperUDPForDNS(t *testing.T) {
	base := Plan{Net: Network{Allow: []string{"example.com:443"}}}
	for _, c := range []struct {
		found   Subreaper
		udp, vc bool
	}{
		{Subreaper{ProxyAddr: "127.0.0.1:4000", ProxyPort: 4000, DNS: true, UDP: true}, true, true},
		{Subreaper{ProxyAddr: "127.0.0.1:4000", ProxyPort: 4000, DNS: true}, false, true},
		{Subreaper{ProxyAddr: "127.0.0.1:4000", ProxyPort: 4000, UDP: true}, false, false},
	} {
		p, _, err := base.ForSubreaper(c.found)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Privileges.Sockets != nil && p.Privileges.Sockets.AllowUDP; got != c.udp {
			t.Errorf("%+v: AllowUDP %v, want %v", c.found, got, c.udp)
		}
		if got := slices.Contains(p.Env, "RES_OPTIONS=use-vc"); got != c.vc {
			t.Errorf("%+v: RES_OPTIONS=use-vc %v, want %v", c.found, got, c.vc)
		}
	}
	// --net none: no responder, so the host finds no DNS.
	none, _, err := (Plan{Namespaces: Namespaces{Net: true}}).ForSubreaper(Subreaper{UDP: true})
	if err != nil {
		t.Fatal(err)
	}
	if none.Privileges.Sockets == nil || none.Privileges.Sockets.AllowUDP {
		t.Errorf("--net none: sockets %+v, want UDP refused", none.Privileges.Sockets)
	}
}
