package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/corral-sh/corral/internal/landlock"
	"github.com/corral-sh/corral/internal/setuperr"
)

// Check is the one validation: every contradiction is a usage error that
// names its option, and namespaces asked of subreaper mode are status 125.
func TestCheck(t *testing.T) {
	none := Namespaces{Net: true}
	for _, tc := range []struct {
		name string
		plan Plan
		flag string // "": no error; "125": a setup error
		want string
	}{
		{"plain", Plan{}, "", ""},
		{"bad mode", Plan{Mode: "fast"}, "--mode", "unknown mode"},
		{"host-port on the host network", Plan{Net: Network{HostPorts: []uint16{5432}}}, "--host-port", "needs --net none or --allow-net"},
		{"publish on the host network", Plan{Net: Network{Publish: []uint16{8080}}}, "--publish", "needs --net none or --allow-net"},
		{"host-port with --net none", Plan{Namespaces: none, Net: Network{HostPorts: []uint16{5432}}}, "", ""},
		{"publish with an allowlist", Plan{Net: Network{Allow: []string{"x.test"}, Publish: []uint16{8080}}}, "", ""},
		{"log without a policy", Plan{Net: Network{LogPath: "/l"}}, "--log", "give a filesystem or network policy option too"},
		{"log with --net none", Plan{Namespaces: none, Net: Network{LogPath: "/l"}}, "", ""},
		{"log with a filesystem rule", Plan{Privileges: Privileges{Landlock: landlock.Policy{ReadOnly: true}}, Net: Network{LogPath: "/l"}}, "", ""},
		{"proxy address from the caller", Plan{Net: Network{Allow: []string{"x.test"}, ProxyAddr: "127.0.0.1:1"}}, "Network.ProxyAddr", "corral's to set"},
		{"port 0", Plan{Namespaces: none, Net: Network{Publish: []uint16{0}}}, "--publish", "from 1 to 65535"},
		{"port twice", Plan{Namespaces: none, Net: Network{HostPorts: []uint16{7, 7}}}, "--host-port", "given twice"},
		{"namespaces in subreaper mode", Plan{Mode: ModeSubreaper, Namespaces: Namespaces{UTS: true}}, "125", "namespaces were requested"},
		{"--net none in subreaper mode", Plan{Mode: ModeSubreaper, Namespaces: none}, "", ""},
		{"overlay in subreaper mode", Plan{Mode: ModeSubreaper, Overlay: []string{"/p"}}, "125", "no mount namespace"},
		{"overlay in auto mode", Plan{Mode: ModeAuto, Overlay: []string{"/p"}}, "", ""},
		{"overlay relative", Plan{Overlay: []string{"p"}}, "--overlay", "absolute"},
		{"overlays nested", Plan{Overlay: []string{"/p", "/p/q"}}, "--overlay", "overlap"},
		{"changes without overlay", Plan{Changes: "/c"}, "--changes", "give --overlay DIR too"},
		{"deny without an allowlist", Plan{Namespaces: none, Net: Network{Deny: []string{"x.test"}}}, "--deny-net", "give --allow-net too"},
		{"deny with an allowlist", Plan{Net: Network{Allow: []string{"*.test"}, Deny: []string{"x.test"}}}, "", ""},
		{"allow-unix on the host network", Plan{Net: Network{AllowUnix: []string{"/run/s"}}}, "--allow-unix", "needs --net none or --allow-net"},
		{"allow-unix relative", Plan{Namespaces: none, Net: Network{AllowUnix: []string{"s"}}}, "--allow-unix", "absolute"},
		{"allow-unix with --net none", Plan{Namespaces: none, Net: Network{AllowUnix: []string{"/run/s"}}}, "", ""},
		{"ptrace alone", Plan{Privileges: Privileges{Keep: []int{19}}}, "", ""},
		{"ptrace with --net none", Plan{Namespaces: none, Privileges: Privileges{Keep: []int{19}}}, "--cap-add", "CAP_SYS_PTRACE cannot go with --net none: the runner could trace corral's"},
		{"sys_admin with --writable", Plan{Privileges: Privileges{Keep: []int{21}, Landlock: landlock.Policy{Writable: []string{"/tmp"}}}}, "--cap-add", "CAP_SYS_ADMIN cannot go with --writable"},
		{"mknod with --read-only", Plan{Privileges: Privileges{Keep: []int{27}, Landlock: landlock.Policy{ReadOnly: true}}}, "--cap-add", "CAP_MKNOD cannot go with --read-only"},
		{"bpf with --allow-net", Plan{Net: Network{Allow: []string{"x.test"}}, Privileges: Privileges{Keep: []int{39}}}, "--cap-add", "CAP_BPF cannot go with --allow-net"},
		{"net_admin with --isolate-ipc", Plan{Privileges: Privileges{Keep: []int{12}, Landlock: landlock.Policy{IsolateIPC: true}}}, "--cap-add", "CAP_NET_ADMIN cannot go with --isolate-ipc"},
		{"harmless cap with a policy", Plan{Namespaces: none, Privileges: Privileges{Keep: []int{10}}}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.plan.Check()
			var usage *UsageError
			var setup *setuperr.SetupError
			switch {
			case tc.flag == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.flag == "":
			case tc.flag == "125" && !errors.As(err, &setup):
				t.Fatalf("got %v, want a setup error", err)
			case tc.flag != "125" && (!errors.As(err, &usage) || usage.Flag != tc.flag):
				t.Fatalf("got %#v, want a usage error naming %s", err, tc.flag)
			}
			if err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%q lacks %q", err, tc.want)
			}
		})
	}
}

// Each mode's network plan is derived from the caller's, which stays as
// it was: the init gets a network namespace and the proxy's address
// inside; subreaper mode gets the socket filter and Landlock's ports.
func TestNetworkPlanPerMode(t *testing.T) {
	caller := Plan{Env: []string{"NO_PROXY=x", "A=1"}, Net: Network{Allow: []string{"x.test"}, HostPorts: []uint16{3128}, Publish: []uint16{3129}}}
	in := caller.ForPidns("u:p")
	if !in.Namespaces.Net || in.Net.ProxyAddr != "127.0.0.1:3130" {
		t.Errorf("pidns: namespace %v, proxy at %q; want a namespace and 127.0.0.1:3130 (past the runner's ports)", in.Namespaces.Net, in.Net.ProxyAddr)
	}
	if !strings.Contains(strings.Join(in.Env, " "), "HTTP_PROXY=http://u:p@127.0.0.1:3130") || strings.Contains(strings.Join(in.Env, " "), "NO_PROXY") {
		t.Errorf("pidns: the runner's environment %q", in.Env)
	}
	if caller.Namespaces.Net || caller.Net.ProxyAddr != "" || len(caller.Env) != 2 {
		t.Errorf("deriving changed the caller's plan: %+v", caller)
	}
	sub, how, err := caller.ForSubreaper(Subreaper{Userinfo: "u:p", ProxyAddr: "127.0.0.1:4000", ProxyPort: 4000, LandlockABI: 7, TCPPorts: true})
	if err != nil {
		t.Fatal(err)
	}
	if sub.Privileges.Sockets == nil || !sub.Privileges.Sockets.AllowTCP || sub.Privileges.Landlock.Net == nil {
		t.Fatalf("subreaper: %+v", sub.Privileges)
	}
	if got := sub.Privileges.Landlock.Net.ConnectTCP; len(got) != 2 || got[0] != 4000 || got[1] != 3128 {
		t.Errorf("subreaper connect ports %v, want [4000 3128]", got)
	}
	if !strings.Contains(how, "egress proxy at 127.0.0.1:4000") || !strings.Contains(strings.Join(sub.Env, " "), "http_proxy=http://u:p@127.0.0.1:4000") {
		t.Errorf("subreaper: %q, env %q", how, sub.Env)
	}
	if p, how, err := caller.ForSubreaper(Subreaper{LandlockABI: 3}); err != nil || p.Privileges.Landlock.Net != nil || !p.Net.TCPChecked || !p.Privileges.Notify || !strings.Contains(how, "no second layer") {
		t.Errorf("an allowlist without Landlock's TCP ports: %+v, %q, %v; want the checks alone, said", p.Privileges, how, err)
	}
	if p, _, err := (Plan{Namespaces: Namespaces{Net: true}}).ForSubreaper(Subreaper{LandlockABI: 3}); err != nil || p.Privileges.Sockets == nil || p.Privileges.Sockets.AllowTCP {
		t.Errorf("--net none without Landlock's ports: %+v, %v; want the socket filter alone", p.Privileges.Sockets, err)
	}
}

// Each capability that undoes the sandbox has its cost said; the
// numbers are capabilities(7)'s.
func TestCapCosts(t *testing.T) {
	for _, c := range []int{21, 19, 16, 39, 12, 17, 27} { // SYS_ADMIN, SYS_PTRACE, SYS_MODULE, BPF, NET_ADMIN, SYS_RAWIO, MKNOD
		if CapCost(c) == "" {
			t.Errorf("%s has no cost", CapName(c))
		}
	}
	if CapCost(10) != "" { // NET_BIND_SERVICE
		t.Error("CAP_NET_BIND_SERVICE has a cost")
	}
	p := Plan{Privileges: Privileges{Keep: []int{10, 19}}}
	if w := p.CapWarnings(); len(w) != 1 || !strings.Contains(w[0], "CAP_SYS_PTRACE") || !strings.Contains(w[0], "containment no longer holds") {
		t.Errorf("warnings %q", w)
	}
}

// The uid-0 warning: a network or IPC policy without a filesystem rule.
func TestRootWarning(t *testing.T) {
	for _, tc := range []struct {
		name string
		plan Plan
		uid  int
		want bool
	}{
		{"net none as root", Plan{Namespaces: Namespaces{Net: true}}, 0, true},
		{"allowlist as root", Plan{Net: Network{Allow: []string{"x.test"}}}, 0, true},
		{"isolate-ipc as root", Plan{Privileges: Privileges{Landlock: landlock.Policy{IsolateIPC: true}}}, 0, true},
		{"net none as another uid", Plan{Namespaces: Namespaces{Net: true}}, 1000, false},
		{"net none with --writable", Plan{Namespaces: Namespaces{Net: true}, Privileges: Privileges{Landlock: landlock.Policy{Writable: []string{"/tmp"}}}}, 0, false},
		{"net none with --read-only", Plan{Namespaces: Namespaces{Net: true}, Privileges: Privileges{Landlock: landlock.Policy{ReadOnly: true}}}, 0, false},
		{"no policy as root", Plan{}, 0, false},
		{"hide alone as root", Plan{Privileges: Privileges{Landlock: landlock.Policy{Hide: []string{"/x"}}}}, 0, false},
	} {
		w := tc.plan.RootWarning(tc.uid)
		if (w != "") != tc.want {
			t.Errorf("%s: %q, want a warning: %v", tc.name, w, tc.want)
		}
		if w != "" && (!strings.Contains(w, "--writable") || !strings.Contains(w, "--read-only")) {
			t.Errorf("%s: %q does not name --writable and --read-only", tc.name, w)
		}
	}
}
