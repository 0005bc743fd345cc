package test

// The options of issue "cmd": --deny-net, the runner's environment
// (--setenv, --unsetenv, --clearenv, with --settings through
// CORRAL_SETTINGS), capabilities that undo the sandbox, and the uid-0
// warning (SPEC.md: Command line, Privileges of the runner, Network
// policy), on the built binary in every mode.

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// A --deny-net entry refuses what an --allow-net entry admits: by name,
// and by an address the name resolves to.
func TestDenyNet(t *testing.T) {
	requireClients(t)
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		good, bad, wild := startHTTP(t, "127.0.0.2", ""), startHTTP(t, "127.0.0.3", ""), startHTTP(t, "127.0.0.4", "")
		cases := []clientCase{
			{"deny-good", "curl", hostURL("good.test", good, "deny-good"), true, good},
			{"deny-by-name", "curl", hostURL("bad.test", bad, "deny-by-name"), false, bad},
			{"deny-by-address", "curl", hostURL("a.dev.test", wild, "deny-by-address"), false, wild},
			{"deny-tunnel-by-name", "curl-tunnel", hostURL("BAD.test", bad, "deny-tunnel-by-name"), false, bad},
		}
		var body strings.Builder
		for _, c := range cases {
			body.WriteString(c.shell())
		}
		runner, results := e.script(body.String())
		// Every name of the test and every loopback address is allowed on
		// every port; the deny entries take bad.test (every port) and
		// 127.0.0.4 back.
		flags := netOpts("--allow-net", "*.test:*", "--allow-net", "127.0.0.0/8:*", "--deny-net", "bad.test", "--deny-net", "127.0.0.4")
		res := e.startCmd(e.withHosts(e.args(flags, runner), e.markerEnv())).wait(corralTimeout)
		wantNetCode(t, res, 0)
		for _, c := range cases {
			c.check(t, results)
		}
		if n := bad.accepts.Load() + wild.accepts.Load(); n != 0 {
			t.Errorf("denied servers accepted %d connection(s)", n)
		}
		e.assertGone()
	})
}

// The runner's environment: --unsetenv with a glob, bubblewrap's
// two-argument --setenv (from a settings file named by CORRAL_SETTINGS
// too, which itself never reaches the runner), and --clearenv, after
// which only --setenv's variables and the proxy's are left.
func TestEnvironmentPolicy(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		settings := e.file("settings.json")
		e.writeFile(settings, `{"setenv": {"FROM_SETTINGS": "1", "A": "settings"}}`, 0o644)
		res := e.run(e.args(opts("", "0.5", "--unsetenv", "SECRET_*", "--setenv", "A", "one two", "--setenv", "B", "--net"),
			[]string{"/usr/bin/env"}), "SECRET_KEY=s", "SECRET_=s", "XSECRET_KEY=kept", "CORRAL_SETTINGS="+settings)
		wantCode(t, res, 0)
		got := parseEnv(res.stdout)
		for name, want := range map[string]string{"A": "one two", "B": "--net", "FROM_SETTINGS": "1", "XSECRET_KEY": "kept"} {
			if got[name] != want {
				t.Errorf("%s=%q, want %q; env:\n%s", name, got[name], want, res.stdout)
			}
		}
		for _, name := range []string{"SECRET_KEY", "SECRET_", "CORRAL_SETTINGS"} {
			if _, ok := got[name]; ok {
				t.Errorf("the runner got %s", name)
			}
		}

		res = e.run(e.args(opts("", "0.5", "--clearenv", "--setenv", "ONLY", "1"), []string{"/usr/bin/env"}), "KEEP=k")
		wantCode(t, res, 0)
		if out := strings.TrimSpace(res.stdout); out != "ONLY=1" {
			t.Errorf("--clearenv --setenv ONLY 1: the runner's environment is %q", out)
		}

		res = e.run(e.args(netOpts("--clearenv", "--setenv", "ONLY", "1", "--allow-net", "x.test"), []string{"/usr/bin/env"}), "KEEP=k")
		wantNetCode(t, res, 0)
		var names []string
		for name := range parseEnv(res.stdout) {
			names = append(names, name)
		}
		slices.Sort(names)
		want := []string{"ALL_PROXY", "HTTPS_PROXY", "HTTP_PROXY", "ONLY", "all_proxy", "http_proxy", "https_proxy"}
		if !m.pidns() {
			// Subreaper mode answers DNS over TCP: glibc is told so
			// (issue 34), like the proxy variables after --clearenv.
			want = []string{"ALL_PROXY", "HTTPS_PROXY", "HTTP_PROXY", "ONLY", "RES_OPTIONS", "all_proxy", "http_proxy", "https_proxy"}
		}
		if !slices.Equal(names, want) {
			t.Errorf("--clearenv with --allow-net: the runner's variables are %q, want %q", names, want)
		}
	})
}

// A capability that undoes the sandbox, given with a policy option, is a
// usage error naming it and what it would let the runner do; alone it is
// granted, and corral says once what it costs.
func TestCapabilityThatUndoesTheSandbox(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		ran := e.file("ran")
		res := e.run(e.args(opts("", "0.5", "--cap-add", "SYS_PTRACE", "--net", "none"), e.helper("exit", "-ready", ran)))
		wantCode(t, res, 2)
		if !strings.HasPrefix(res.stderr, "usage: --cap-add CAP_SYS_PTRACE cannot go with --net none: the runner could trace corral's own processes") {
			t.Errorf("stderr %q", res.stderr)
		}
		assertNotExist(t, ran)

		res = e.run(e.args(opts("", "0.5", "--cap-add", "SYS_PTRACE"), e.helper("exit", "-ready", ran)))
		wantCode(t, res, 0)
		if n := strings.Count(res.stderr, "corral: --cap-add CAP_SYS_PTRACE: the runner could trace corral's own processes"); n != 1 {
			t.Errorf("the cost is said %d times, want once: %q", n, res.stderr)
		}
		if _, err := os.Stat(ran); err != nil {
			t.Errorf("--cap-add SYS_PTRACE alone: the runner did not run: %v", res)
		}
	})
}

// A network or IPC policy for a uid-0 runner without a filesystem rule is
// said once, naming --writable and --read-only; corral probe as root says
// it too.
func TestRootRunnerWarning(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		const warning = "the runner runs as uid 0 and owns root's files"
		res := e.run(e.args(opts("", "0.5", "--net", "none"), e.helper("exit")))
		wantNetCode(t, res, 0)
		n := strings.Count(res.stderr, warning)
		switch {
		case m.uid() == 0 && n != 1:
			t.Errorf("uid 0, --net none: the warning appears %d times, want once: %q", n, res.stderr)
		case m.uid() == 0 && !(strings.Contains(res.stderr, "--writable") && strings.Contains(res.stderr, "--read-only")):
			t.Errorf("the warning does not name --writable and --read-only: %q", res.stderr)
		case m.uid() != 0 && n != 0:
			t.Errorf("uid %d: warned of uid 0: %q", m.uid(), res.stderr)
		}
		res = e.run(e.args(opts("", "0.5", "--net", "none", "--read-only"), e.helper("exit")))
		wantNetCode(t, res, 0)
		if strings.Contains(res.stderr, warning) {
			t.Errorf("--read-only given, yet warned: %q", res.stderr)
		}
		probe := e.run([]string{"probe"})
		wantCode(t, probe, 0)
		if said := strings.Contains(probe.stdout, warning); said != (m.uid() == 0) {
			t.Errorf("corral probe as uid %d: says the uid-0 note: %v\n%s", m.uid(), said, probe.stdout)
		}
	})
}
