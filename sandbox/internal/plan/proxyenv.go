package plan

import "strings"

// proxyVars are the variables clients read for a proxy. curl reads only
// the lower-case http_proxy (the upper-case one can be set by a CGI
// request's Proxy header) and the upper-case forms of the others; other
// clients differ, so both cases are set.
var proxyVars = []struct{ name, scheme string }{
	{"HTTP_PROXY", "http://"},
	{"HTTPS_PROXY", "http://"},
	// socks5h: the client hands the name to the proxy, which resolves it
	// under the policy; DNS is not reachable from inside anyway.
	{"ALL_PROXY", "socks5h://"},
}

// ProxyEnvFor returns the proxy variables for a proxy at addr
// (USER:PASS@HOST:PORT, the run's credentials and the address as the
// runner reaches it): HTTP_PROXY and HTTPS_PROXY = http://ADDR, ALL_PROXY =
// socks5h://ADDR, each also in lower case.
//
// The runner's environment must also lose NO_PROXY and no_proxy (and any
// earlier proxy variables): clients skip the proxy for the hosts listed
// there, and those connections would fail instead of being decided.
// WithProxyEnv does both.
func ProxyEnvFor(addr string) []string {
	env := make([]string, 0, 2*len(proxyVars))
	for _, v := range proxyVars {
		env = append(env, v.name+"="+v.scheme+addr, strings.ToLower(v.name)+"="+v.scheme+addr)
	}
	return env
}

// WithProxyEnv returns env without NO_PROXY, no_proxy (unless keepNoProxy:
// the user gave them with --setenv, for hosts a client should reach
// without the proxy, such as a --host-port service) and any proxy
// variable ProxyEnvFor sets, followed by ProxyEnvFor(addr).
func WithProxyEnv(env []string, addr string, keepNoProxy bool) []string {
	drop := map[string]bool{"NO_PROXY": !keepNoProxy}
	for _, v := range proxyVars {
		drop[v.name] = true
	}
	out := make([]string, 0, len(env)+2*len(proxyVars))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if drop[strings.ToUpper(name)] {
			continue
		}
		out = append(out, kv)
	}
	return append(out, ProxyEnvFor(addr)...)
}

// WithoutProxyEnv returns env without the proxy variables ProxyEnvFor
// sets, in either case: the caller's would name a proxy the runner
// cannot reach past the policy. NO_PROXY and no_proxy stay.
func WithoutProxyEnv(env []string) []string {
	drop := map[string]bool{}
	for _, v := range proxyVars {
		drop[v.name] = true
	}
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !drop[strings.ToUpper(name)] {
			out = append(out, kv)
		}
	}
	return out
}
