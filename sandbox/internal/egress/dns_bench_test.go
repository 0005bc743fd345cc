package egress

import (
	"context"
	"testing"
)

// One answer of corral's DNS responder for an admitted name (parse, the
// policy, the launch resolver, the table, the answer), beside the launch
// resolver's own lookup of the same name, which every answer makes.
func BenchmarkDNSAnswer(b *testing.B) {
	p, _ := dnsProxyB(b)
	q := []byte{0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 3, 'a', 'p', 'i', 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 0, 0, 1, 0, 1}
	b.ReportAllocs()
	for b.Loop() {
		if out := p.answerDNS(q, dnsUDPMax); len(out) <= dnsHeaderLen {
			b.Fatal("no answer")
		}
	}
}

func BenchmarkLaunchResolverLookup(b *testing.B) {
	p, _ := dnsProxyB(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.cfg.Resolver.LookupNetIP(context.Background(), "ip", "api.example"); err != nil {
			b.Fatal(err)
		}
	}
}

func dnsProxyB(b *testing.B) (*testProxy, DNSAddrs) {
	return dnsProxy(b, "8.8.4.4 api.example\n", "api.example:443")
}
