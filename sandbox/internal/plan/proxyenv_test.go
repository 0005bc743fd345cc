package plan

import (
	"strings"
	"testing"
)

func TestWithProxyEnv(t *testing.T) {
	env := WithProxyEnv([]string{"PATH=/bin", "NO_PROXY=localhost", "no_proxy=*", "HTTPS_PROXY=http://old", "all_proxy=x", "HOME=/root"}, "127.0.0.1:3128")
	want := []string{"PATH=/bin", "HOME=/root",
		"HTTP_PROXY=http://127.0.0.1:3128", "http_proxy=http://127.0.0.1:3128",
		"HTTPS_PROXY=http://127.0.0.1:3128", "https_proxy=http://127.0.0.1:3128",
		"ALL_PROXY=socks5h://127.0.0.1:3128", "all_proxy=socks5h://127.0.0.1:3128"}
	if strings.Join(env, " ") != strings.Join(want, " ") {
		t.Errorf("got %q\nwant %q", env, want)
	}
}
