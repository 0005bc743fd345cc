package plan

import (
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
