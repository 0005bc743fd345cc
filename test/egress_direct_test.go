package test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Clients that ignore the proxy variables (SPEC.md Network policy; DESIGN.md
// "Transparent egress"), subreaper mode: the runner shares the host's
// network, and the socket checker, which runs in corral's own process, makes
// a connect an --allow-net entry admits on the runner's own socket. The
// namespace modes reach the host only through the proxy (their network
// namespace has loopback alone): not these tests' subject.

// subreaperOnly skips the namespace modes, saying why.
func subreaperOnly(t *testing.T, m mode) {
	t.Helper()
	if m.pidns() {
		t.Skip("direct connections are subreaper mode's (the checker connects the runner's socket on the host's network); a namespace mode's network has loopback only")
	}
}

// An IP entry and a CIDR entry are reached directly by a client with no
// proxy variables (curl --noproxy '*', python's urllib with the proxy
// variables removed); an address no entry covers, and a covered address
// on a port its entry does not admit, are refused and named once; a proxy
// client still goes through the proxy; the log has an allow line via
// direct, with the run, for each direct connection.
func TestDirectConnectAddressEntries(t *testing.T) {
	requireClients(t)
	forEachMode(t, func(t *testing.T, m mode) {
		subreaperOnly(t, m)
		e := newEnv(t, m)
		ip := startHTTP(t, "127.0.0.7", "")
		cidr := startHTTP(t, "127.0.0.9", "")
		other := startHTTP(t, "127.0.0.9", "") // covered by the CIDR entry, on a port it does not admit
		uncovered := startHTTP(t, "127.0.0.3", "")
		unset := "env -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY -u ALL_PROXY -u all_proxy -u NO_PROXY -u no_proxy"
		get := func(name, url, extra string) string {
			return fmt.Sprintf("%s curl -sS --max-time 10 %s -o \"$R\"/%[3]s.body -w '%%{http_code}' %s >\"$R\"/%[3]s.code 2>\"$R\"/%[3]s.err; echo $? >\"$R\"/%[3]s.exit\n",
				unset, extra, name, shq(url))
		}
		py := fmt.Sprintf("%s %s -c 'import sys,urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' %s >\"$R\"/py.body 2>\"$R\"/py.err\n",
			unset, python, shq(fmt.Sprintf("http://127.0.0.7:%d/py", ip.port)))
		proxied := fmt.Sprintf("curl -sS --max-time 10 -o \"$R\"/proxied.body -w '%%{http_code}' %s >\"$R\"/proxied.code 2>\"$R\"/proxied.err\n",
			shq(fmt.Sprintf("http://127.0.0.7:%d/proxied", ip.port)))
		runner, results := e.script(
			get("ip", fmt.Sprintf("http://127.0.0.7:%d/ip", ip.port), "--noproxy '*'") +
				get("cidr", fmt.Sprintf("http://127.0.0.9:%d/cidr", cidr.port), "--noproxy '*'") +
				get("cidr2", fmt.Sprintf("http://127.0.0.9:%d/cidr2", cidr.port), "--noproxy '*'") +
				get("otherport", fmt.Sprintf("http://127.0.0.9:%d/otherport", other.port), "--noproxy '*'") +
				get("uncovered", fmt.Sprintf("http://127.0.0.3:%d/uncovered", uncovered.port), "--noproxy '*'") +
				get("uncovered2", fmt.Sprintf("http://127.0.0.3:%d/uncovered2", uncovered.port), "--noproxy '*'") +
				py + proxied)
		log := e.file("net.log")
		res := e.run(e.args(netOpts("--log", log,
			"--allow-net", fmt.Sprintf("127.0.0.7:%d", ip.port),
			"--allow-net", fmt.Sprintf("127.0.0.8/30:%d", cidr.port)), runner), e.markerEnv())
		wantNetCode(t, res, 0)
		for _, c := range []struct {
			name string
			srv  *httpServer
		}{{"ip", ip}, {"cidr", cidr}, {"cidr2", cidr}, {"proxied", ip}} {
			code, _ := os.ReadFile(filepath.Join(results, c.name+".code"))
			body, _ := os.ReadFile(filepath.Join(results, c.name+".body"))
			if string(code) != "200" || string(body) != c.srv.hello("/"+c.name) {
				t.Errorf("%s: code %q body %q err %q; want the page, reached directly", c.name, code, body, readResult(t, results, c.name+".err"))
			}
		}
		if body := readResult(t, results, "py.body"); body != ip.hello("/py") {
			t.Errorf("python urllib without proxy variables: got %q (%s), want the page", body, readResult(t, results, "py.err"))
		}
		for _, name := range []string{"otherport", "uncovered", "uncovered2"} {
			if code, _ := os.ReadFile(filepath.Join(results, name+".code")); string(code) == "200" {
				t.Errorf("%s: reached an address no entry admits", name)
			}
		}
		if n := other.accepts.Load() + uncovered.accepts.Load(); n != 0 {
			t.Errorf("servers no entry admits accepted %d connection(s)", n)
		}
		wantDeniedLines(t, res.stderr, map[string]bool{
			fmt.Sprintf("direct connection to 127.0.0.3:%d", uncovered.port): true,
			fmt.Sprintf("direct connection to 127.0.0.9:%d", other.port):     true,
			fmt.Sprintf("direct connection to 127.0.0.7:%d", ip.port):        false,
			fmt.Sprintf("direct connection to 127.0.0.9:%d", cidr.port):      false,
		})

		data, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		allowed := map[string]int{}
		run := ""
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var d struct {
				Host, Address, Decision, Via, Run, Event string
				Port                                     int
			}
			if err := json.Unmarshal([]byte(line), &d); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			if run == "" {
				run = d.Run
			}
			if d.Run == "" || d.Run != run {
				t.Errorf("log line without the run's id: %s", line)
			}
			if d.Decision == "allow" && d.Via == "direct" {
				if d.Host != d.Address {
					t.Errorf("a direct allow names host %q, address %q: want the address", d.Host, d.Address)
				}
				allowed[fmt.Sprintf("%s:%d", d.Host, d.Port)]++
			}
		}
		// ip, py; cidr, cidr2: one line per connection.
		if allowed[fmt.Sprintf("127.0.0.7:%d", ip.port)] != 2 || allowed[fmt.Sprintf("127.0.0.9:%d", cidr.port)] != 2 {
			t.Errorf("log: want two allow lines via direct for each entry's address, got %v:\n%s", allowed, data)
		}
		e.assertGone()
	})
}

// proxyUnset removes the proxy variables for one command.
const proxyUnset = "env -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY -u ALL_PROXY -u all_proxy -u NO_PROXY -u no_proxy"

// A client with no proxy variables resolves an admitted name through
// corral's DNS responder and connects to it directly: glibc's
// getaddrinfo (curl --noproxy '*', python's urllib), over TCP as
// RES_OPTIONS=use-vc asks, its connect to the nameserver's port 53 made to
// corral's responder. The runner empties /etc/hosts first (root shares
// it here), so the name is found by DNS alone, answered from the hosts
// file corral read at launch. A name no entry admits fails to resolve and
// is named once; the log has the lookups (via dns) and the connections
// (via direct) under the name.
func TestDirectConnectAnsweredNames(t *testing.T) {
	requireClients(t)
	forEachMode(t, func(t *testing.T, m mode) {
		subreaperOnly(t, m)
		e := newEnv(t, m)
		good := startHTTP(t, "127.0.0.2", "")
		bad := startHTTP(t, "127.0.0.3", "")
		get := func(name, url string) string {
			return fmt.Sprintf("%s curl -sS --max-time 10 --noproxy '*' -o \"$R\"/%[2]s.body -w '%%{http_code}' %s >\"$R\"/%[2]s.code 2>\"$R\"/%[2]s.err; echo $? >\"$R\"/%[2]s.exit\n",
				proxyUnset, name, shq(url))
		}
		runner, results := e.script(`echo "127.0.0.1 localhost" >/etc/hosts 2>"$R"/write.err || echo failed >"$R"/write.err
echo "$RES_OPTIONS" >"$R"/resoptions
` + get("name", fmt.Sprintf("http://good.test:%d/name", good.port)) +
			get("name2", fmt.Sprintf("http://GOOD.test.:%d/name2", good.port)) +
			get("bad", fmt.Sprintf("http://bad.test:%d/bad", bad.port)) +
			get("bad2", fmt.Sprintf("http://bad.test:%d/bad2", bad.port)) +
			fmt.Sprintf("%s %s -c 'import sys,urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' %s >\"$R\"/py.body 2>\"$R\"/py.err\n",
				proxyUnset, python, shq(fmt.Sprintf("http://good.test:%d/py", good.port))))
		log := e.file("net.log")
		rules := netOpts("--log", log, "--allow-net", fmt.Sprintf("good.test:%d", good.port),
			"--allow-net", fmt.Sprintf("127.0.0.2/32:%d", good.port)) // the SSRF guard's, for a loopback name
		res := e.startCmd(e.withHosts(e.args(rules, runner), e.markerEnv())).wait(corralTimeout)
		wantNetCode(t, res, 0)
		if w := readResult(t, results, "write.err"); w != "" {
			t.Skipf("the runner could not empty /etc/hosts here: %s", w)
		}
		if got := readResult(t, results, "resoptions"); got != "use-vc" {
			t.Errorf("RES_OPTIONS in the runner: %q, want use-vc", got)
		}
		for _, name := range []string{"name", "name2"} {
			code, _ := os.ReadFile(filepath.Join(results, name+".code"))
			body, _ := os.ReadFile(filepath.Join(results, name+".body"))
			if string(code) != "200" || string(body) != good.hello("/"+name) {
				t.Errorf("%s: code %q body %q err %q; want the page, the name answered by corral", name, code, body, readResult(t, results, name+".err"))
			}
		}
		if body := readResult(t, results, "py.body"); body != good.hello("/py") {
			t.Errorf("python urllib without proxy variables: got %q (%s), want the page", body, readResult(t, results, "py.err"))
		}
		for _, name := range []string{"bad", "bad2"} {
			if msg := readResult(t, results, name+".err"); !strings.Contains(msg, "resolve") {
				t.Errorf("%s: want a resolution failure, got %q", name, msg)
			}
		}
		if n := bad.accepts.Load(); n != 0 {
			t.Errorf("bad.test's server accepted %d connection(s)", n)
		}
		if n := strings.Count(res.stderr, "corral: network: denied lookup of bad.test: no rule allows this host\n"); n != 1 {
			t.Errorf("want one line naming the refused lookup of bad.test, got %d:\n%s", n, res.stderr)
		}
		if strings.Contains(res.stderr, "good.test") {
			t.Errorf("stderr names good.test, which was allowed:\n%s", res.stderr)
		}
		data, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		var dnsAllow, dnsDeny, direct int
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var d struct {
				Host, Address, Decision, Via, Run string
				Port                              int
			}
			if err := json.Unmarshal([]byte(line), &d); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			switch {
			case d.Via == "dns" && d.Decision == "allow" && d.Host == "good.test" && d.Address == "127.0.0.2" && d.Run != "":
				dnsAllow++
			case d.Via == "dns" && d.Decision == "deny" && d.Host == "bad.test":
				dnsDeny++
			case d.Via == "direct" && d.Decision == "allow" && d.Host == "good.test" && d.Port == good.port && d.Address == "127.0.0.2":
				direct++
			}
		}
		if dnsAllow == 0 || dnsDeny != 1 || direct != 3 {
			t.Errorf("log: %d dns allow lines for good.test (want some), %d dns deny lines for bad.test (want 1), %d direct allow lines for good.test (want 3):\n%s",
				dnsAllow, dnsDeny, direct, data)
		}
		e.assertGone()
	})
}

// --no-proxy-env: the runner gets no proxy variables (the caller's are
// dropped too) and keeps the caller's NO_PROXY; in subreaper mode a client
// that honours proxy variables, given none, reaches an admitted name
// directly. Without --allow-net the flag is a usage error.
func TestNoProxyEnv(t *testing.T) {
	requireClients(t)
	forEachMode(t, func(t *testing.T, m mode) {
		subreaperOnly(t, m)
		e := newEnv(t, m)
		good := startHTTP(t, "127.0.0.2", "")
		runner, results := e.script(fmt.Sprintf(`env >"$R"/env
curl -sS --max-time 10 -o "$R"/get.body -w '%%{http_code}' %s >"$R"/get.code 2>"$R"/get.err
`, shq(fmt.Sprintf("http://good.test:%d/get", good.port))))
		rules := netOpts("--no-proxy-env", "--allow-net", fmt.Sprintf("good.test:%d", good.port),
			"--allow-net", fmt.Sprintf("127.0.0.2/32:%d", good.port))
		res := e.startCmd(e.withHosts(e.args(rules, runner), e.markerEnv(),
			"NO_PROXY=example.org", "HTTP_PROXY=http://192.0.2.1:3128", "https_proxy=http://192.0.2.1:3128")).wait(corralTimeout)
		wantNetCode(t, res, 0)
		vars := parseEnv(readResult(t, results, "env"))
		for name, v := range vars {
			if strings.HasSuffix(strings.ToUpper(name), "_PROXY") && strings.ToUpper(name) != "NO_PROXY" {
				t.Errorf("the runner has %s=%s under --no-proxy-env", name, v)
			}
		}
		if vars["NO_PROXY"] != "example.org" {
			t.Errorf("the caller's NO_PROXY: %q in the runner, want example.org", vars["NO_PROXY"])
		}
		code, _ := os.ReadFile(filepath.Join(results, "get.code"))
		if body, _ := os.ReadFile(filepath.Join(results, "get.body")); string(code) != "200" || string(body) != good.hello("/get") {
			t.Errorf("curl with no proxy variables: code %q body %q err %q; want the page, reached directly", code, body, readResult(t, results, "get.err"))
		}
		usage := e.run(e.args([]string{"--no-proxy-env"}, []string{"/bin/true"}))
		if usage.code != 2 || !strings.Contains(usage.stderr, "--no-proxy-env") {
			t.Errorf("--no-proxy-env without --allow-net: want a usage error (2) naming it, got %v", usage)
		}
		e.assertGone()
	})
}

// Real ssh past the proxy (SPEC.md Network policy, "Clients that ignore
// the proxy variables"): an sshd on the host's loopback, and `ssh
// root@good.test true` under --allow-net good.test:PORT (with the IP entry
// the SSRF guard needs for a loopback name) and nothing else: ssh knows no
// proxy variables; its connect is made on its own socket.
func TestDirectConnectSSH(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		subreaperOnly(t, m)
		if m.rootless {
			t.Skip("the test's sshd logs in root")
		}
		for _, tool := range []string{"/usr/sbin/sshd", "/usr/bin/ssh", "/usr/bin/ssh-keygen"} {
			if _, err := os.Stat(tool); err != nil {
				missingFeature(t, tool+" is needed (.ci/run installs openssh-server)")
			}
		}
		e := newEnv(t, m)
		port := freePort(t, "127.0.0.2")
		keygen := func(path string) {
			if out, err := exec.Command("/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path).CombinedOutput(); err != nil {
				t.Fatalf("ssh-keygen: %v: %s", err, out)
			}
		}
		hostKey, userKey := e.file("host_key"), e.file("user_key")
		keygen(hostKey)
		keygen(userKey)
		pub, err := os.ReadFile(userKey + ".pub")
		if err != nil {
			t.Fatal(err)
		}
		e.writeFile(e.file("authorized_keys"), string(pub), 0o600)
		os.MkdirAll("/run/sshd", 0o755) // sshd's privilege separation directory
		sshd := exec.Command("/usr/sbin/sshd", "-D", "-e", "-f", "/dev/null",
			"-o", "ListenAddress=127.0.0.2:"+strconv.Itoa(port), "-o", "HostKey="+hostKey,
			"-o", "AuthorizedKeysFile="+e.file("authorized_keys"), "-o", "PermitRootLogin=prohibit-password",
			"-o", "StrictModes=no", "-o", "UsePAM=no", "-o", "PidFile=none")
		var sshdLog strings.Builder
		sshd.Stderr = &sshdLog
		if err := sshd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			sshd.Process.Kill()
			sshd.Wait()
		})
		for i := 0; ; i++ { // wait for its listener
			c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.2", strconv.Itoa(port)))
			if err == nil {
				c.Close()
				break
			}
			if i > 500 {
				t.Fatalf("sshd did not listen: %s", sshdLog.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		runner, results := e.script(fmt.Sprintf(`%s ssh -F /dev/null -i %s -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -p %d root@good.test 'echo ssh-ok' >"$R"/out 2>"$R"/err
`, proxyUnset, shq(userKey), port))
		rules := netOpts("--allow-net", fmt.Sprintf("good.test:%d", port), "--allow-net", fmt.Sprintf("127.0.0.2:%d", port))
		res := e.startCmd(e.withHosts(e.args(rules, runner), e.markerEnv())).wait(corralTimeout)
		wantNetCode(t, res, 0)
		if out := readResult(t, results, "out"); out != "ssh-ok" {
			t.Errorf("ssh root@good.test: %q, stderr %q; want ssh-ok\nsshd: %s", out, readResult(t, results, "err"), sshdLog.String())
		}
		e.assertGone()
	})
}
