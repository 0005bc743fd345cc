package plan

import (
	"errors"
	"strings"
	"testing"

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
		{"net-log without a proxy", Plan{Namespaces: none, Net: Network{LogPath: "/l"}}, "--net-log", "give --allow-net too"},
		{"proxy address from the caller", Plan{Net: Network{Allow: []string{"x.test"}, ProxyAddr: "127.0.0.1:1"}}, "Network.ProxyAddr", "corral's to set"},
		{"port 0", Plan{Namespaces: none, Net: Network{Publish: []uint16{0}}}, "--publish", "from 1 to 65535"},
		{"port twice", Plan{Namespaces: none, Net: Network{HostPorts: []uint16{7, 7}}}, "--host-port", "given twice"},
		{"namespaces in subreaper mode", Plan{Mode: ModeSubreaper, Namespaces: Namespaces{UTS: true}}, "125", "namespaces were requested"},
		{"--net none in subreaper mode", Plan{Mode: ModeSubreaper, Namespaces: none}, "", ""},
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
