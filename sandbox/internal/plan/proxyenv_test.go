package plan

import (
	"slices"
	"strings"
	"testing"
)

func TestWithProxyEnv(t *testing.T) {
	env := WithProxyEnv([]string{"PATH=/bin", "NO_PROXY=localhost", "no_proxy=*", "HTTPS_PROXY=http://old", "all_proxy=x", "HOME=/root"}, "127.0.0.1:3128", false)
	want := []string{"PATH=/bin", "HOME=/root",
		"HTTP_PROXY=http://127.0.0.1:3128", "http_proxy=http://127.0.0.1:3128",
		"HTTPS_PROXY=http://127.0.0.1:3128", "https_proxy=http://127.0.0.1:3128",
		"ALL_PROXY=socks5h://127.0.0.1:3128", "all_proxy=socks5h://127.0.0.1:3128"}
	if strings.Join(env, " ") != strings.Join(want, " ") {
		t.Errorf("got %q\nwant %q", env, want)
	}
}

// A NO_PROXY the user gave with --setenv stays; the proxy variables are
// still corral's.
func TestWithProxyEnvKeepsSetNoProxy(t *testing.T) {
	env := WithProxyEnv([]string{"NO_PROXY=127.0.0.1", "no_proxy=127.0.0.1", "HTTP_PROXY=http://old"}, "127.0.0.1:3128", true)
	want := []string{"NO_PROXY=127.0.0.1", "no_proxy=127.0.0.1",
		"HTTP_PROXY=http://127.0.0.1:3128", "http_proxy=http://127.0.0.1:3128",
		"HTTPS_PROXY=http://127.0.0.1:3128", "https_proxy=http://127.0.0.1:3128",
		"ALL_PROXY=socks5h://127.0.0.1:3128", "all_proxy=socks5h://127.0.0.1:3128"}
	if strings.Join(env, " ") != strings.Join(want, " ") {
		t.Errorf("got %q\nwant %q", env, want)
	}
}

// A localhost entry with a port is a --host-port too, in both modes, so a
// client that skips the proxy for loopback reaches the host's port; one
// without a port, or with *, is not; a published port stays the tree's.
func TestLocalhostEntriesArePorts(t *testing.T) {
	base := Plan{Net: Network{
		Allow:     []string{"localhost:8787", "LOCALHOST.:8787", "*.localhost:9000", "api.localhost:9001", "localhost", "localhost:*", "example.com:8000", "[::1]:7000", "localhost:5000"},
		HostPorts: []uint16{5432},
		Publish:   []uint16{5000},
	}}
	want := []uint16{5432, 8787, 9000, 9001}
	if got := base.ForPidns("u:p").Net.HostPorts; !slices.Equal(got, want) {
		t.Errorf("pidns: host ports %v; want %v", got, want)
	}
	sub, _, err := base.ForSubreaper(Subreaper{ProxyAddr: "127.0.0.1:4000", ProxyPort: 4000})
	if err != nil {
		t.Fatal(err)
	}
	if got := sub.Net.HostPorts; !slices.Equal(got, want) {
		t.Errorf("subreaper: host ports %v; want %v", got, want)
	}
	if !slices.Equal(base.Net.HostPorts, []uint16{5432}) {
		t.Errorf("the caller's plan changed: %v", base.Net.HostPorts)
	}
}
