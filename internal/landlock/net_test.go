package landlock

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func init() {
	scenarios["net-none"] = scenarioNetNone
	scenarios["net-ports"] = scenarioNetPorts
	scenarios["net-port0"] = scenarioNetPort0
	scenarios["net-and-fs"] = scenarioNetAndFS
}

func TestPortRules(t *testing.T) {
	got := portRules(&NetPolicy{ConnectTCP: []uint16{443, 8080, 443}, BindTCP: []uint16{3000, 8080, 0}})
	want := []portRule{{443, netConnectTCP}, {8080, netConnectTCP | netBindTCP}, {3000, netBindTCP}, {0, netBindTCP}}
	if !slices.Equal(got, want) {
		t.Errorf("portRules: %+v, want %+v", got, want)
	}
	if portRules(nil) != nil || portRules(&NetPolicy{}) != nil {
		t.Error("no ports, yet rules")
	}
}

func TestRulesetNet(t *testing.T) {
	np := &NetPolicy{ConnectTCP: []uint16{80}}
	for abi := 1; abi <= knownABI+1; abi++ {
		attr, rep, err := ruleset(Policy{Net: np}, abi)
		var ae *ABIError
		if abi < 4 {
			if !errors.As(err, &ae) || ae.Need != 4 || ae.Have != abi || !strings.Contains(err.Error(), "Linux 6.7") {
				t.Errorf("ABI %d: Net: %v, want an *ABIError naming ABI 4", abi, err)
			}
			if describe(abi).TCPPortRules() {
				t.Errorf("ABI %d: TCPPortRules true", abi)
			}
			continue
		}
		if !describe(abi).TCPPortRules() {
			t.Errorf("ABI %d: TCPPortRules false", abi)
		}
		// Alone: no filesystem right handled, so files stay as they were.
		if err != nil || attr.handledNet != netBindTCP|netConnectTCP || attr.handledFS != 0 || attr.scoped != 0 ||
			attr.size() != 16 || strings.Join(rep.Net, ",") != "bind_tcp,connect_tcp" || len(rep.FS) != 0 {
			t.Errorf("ABI %d: Net alone: %+v %+v %v", abi, attr, rep, err)
		}
		// With the filesystem rules and IPC isolation: one ruleset.
		p := Policy{Writable: []string{"/tmp"}, Net: &NetPolicy{}, IsolateIPC: abi >= 6}
		attr, rep, err = ruleset(p, abi)
		if err != nil || attr.handledNet != netBindTCP|netConnectTCP || attr.handledFS != fsRightsAt(min(abi, knownABI)) || len(rep.Net) != 2 {
			t.Errorf("ABI %d: Net with Writable: %+v %+v %v", abi, attr, rep, err)
		}
	}
}

func TestPreviewNet(t *testing.T) {
	requireLandlock(t, 4)
	rep, err := Preview(Policy{Net: &NetPolicy{ConnectTCP: []uint16{1, 2}, BindTCP: []uint16{2, 3}}})
	if err != nil || rep.Rules != 3 || len(rep.Net) != 2 || len(rep.FS) != 0 {
		t.Errorf("Preview of a network-only policy: %+v, %v", rep, err)
	}
	if !(Policy{Net: &NetPolicy{}}).Active() {
		t.Error("an empty NetPolicy restricts TCP, yet the policy is not Active")
	}
}

// listener is a loopback TCP listener of the test process that accepts
// and closes, with SO_REUSEPORT so that a child's socket bound to its port
// (with the option too) is refused by nothing but Landlock.
func listener(t *testing.T) int {
	t.Helper()
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1) })
		return errors.Join(err, serr)
	}}
	ln, err := lc.Listen(context.Background(), "tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

func port(c *child, name string) int {
	p, err := strconv.Atoi(c.arg(name))
	if err != nil {
		c.fatalf("port %s: %v", name, err)
	}
	return p
}

// tcpConnect connects a new TCP socket of family to loopback:port from this
// thread.
func tcpConnect(family, port int) error {
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if family == unix.AF_INET6 {
		return unix.Connect(fd, &unix.SockaddrInet6{Port: port, Addr: [16]byte{15: 1}})
	}
	return unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
}

// tcpBind binds a new TCP socket with SO_REUSEPORT to 127.0.0.1:port and
// returns the port it got.
func tcpBind(port int) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		return 0, err
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return 0, err
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return 0, err
	}
	return sa.(*unix.SockaddrInet4).Port, nil
}

func hasIPv6() bool {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	return unix.Bind(fd, &unix.SockaddrInet6{Addr: [16]byte{15: 1}}) == nil
}

// controls proves, before Restrict, that the kernel alone lets this
// process connect to and bind what the scenario then expects refused.
func controls(c *child, connect []int, bind []int) {
	for _, p := range connect {
		if err := tcpConnect(unix.AF_INET, p); err != nil {
			c.fatalf("connect to 127.0.0.1:%d before Restrict: %v", p, err)
		}
	}
	for _, p := range bind {
		if _, err := tcpBind(p); err != nil {
			c.fatalf("bind 127.0.0.1:%d before Restrict: %v", p, err)
		}
	}
}

func TestNetNone(t *testing.T) {
	requireLandlock(t, 4)
	runChild(t, "net-none", map[string]string{"listen": strconv.Itoa(listener(t)), "bound": strconv.Itoa(listener(t)), "dir": t.TempDir()}, nil)
}

func scenarioNetNone(c *child) {
	listen, bound, dir := port(c, "listen"), port(c, "bound"), c.arg("dir")
	controls(c, []int{listen}, []int{0, bound})
	if _, err := os.Stat("/bin/bash"); err == nil {
		out, err := exec.Command("/bin/bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/"+strconv.Itoa(listen)).CombinedOutput()
		if err != nil {
			c.fatalf("bash connecting to 127.0.0.1:%d before Restrict: %v %q", listen, err, out)
		}
		bashConnected = true
	}
	rep := restrict(c, Policy{Net: &NetPolicy{}})
	if len(rep.FS) != 0 || len(rep.Net) != 2 || rep.Rules != 0 {
		c.errorf("report of a network-only policy: %+v", rep)
	}
	c.denied("connect to a loopback listener", tcpConnect(unix.AF_INET, listen))
	if hasIPv6() {
		c.denied("connect to [::1]", tcpConnect(unix.AF_INET6, listen))
	}
	_, err := tcpBind(0)
	c.denied("bind to port 0 (an ephemeral port)", err)
	_, err = tcpBind(bound)
	c.denied("bind to a port", err)

	// Landlock handles TCP only: UDP is seccomp's to refuse.
	if conn, err := net.ListenPacket("udp4", "127.0.0.1:0"); err != nil {
		c.errorf("UDP under a network-only ruleset: %v, want it to work (Landlock rules TCP only)", err)
	} else {
		conn.Close()
	}
	// No filesystem right is handled: files are as they were.
	c.ok("write a file under a network-only ruleset", os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o600))
	// A process started now is bound too (bash's /dev/tcp connects).
	if bashConnected {
		out, err := exec.Command("/bin/bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/"+strconv.Itoa(listen)).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "Permission denied") {
			c.errorf("bash started after Restrict, connecting to 127.0.0.1:%d: %v %q, want permission denied", listen, err, out)
		}
	}
}

// bashConnected is set by the control connect through bash's /dev/tcp,
// which only bash has.
var bashConnected bool

func TestNetPorts(t *testing.T) {
	requireLandlock(t, 4)
	runChild(t, "net-ports", map[string]string{
		"allowed": strconv.Itoa(listener(t)), "other": strconv.Itoa(listener(t)),
		"bindok": strconv.Itoa(listener(t)), "bindno": strconv.Itoa(listener(t)),
	}, nil)
}

func scenarioNetPorts(c *child) {
	allowed, other, bindOK, bindNo := port(c, "allowed"), port(c, "other"), port(c, "bindok"), port(c, "bindno")
	controls(c, []int{allowed, other}, []int{0, bindOK, bindNo})
	rep := restrict(c, Policy{Net: &NetPolicy{ConnectTCP: []uint16{uint16(allowed)}, BindTCP: []uint16{uint16(bindOK)}}})
	if rep.Rules != 2 {
		c.errorf("report: %+v, want 2 rules", rep)
	}
	c.ok("connect to the allowed port", tcpConnect(unix.AF_INET, allowed))
	c.denied("connect to another port", tcpConnect(unix.AF_INET, other))
	// A connect right is no bind right, and the other way round.
	c.denied("connect to the bind port", tcpConnect(unix.AF_INET, bindOK))
	_, err := tcpBind(allowed)
	c.denied("bind to the connect port", err)
	if got, err := tcpBind(bindOK); err != nil || got != bindOK {
		c.errorf("bind to the allowed port: %d, %v", got, err)
	}
	_, err = tcpBind(bindNo)
	c.denied("bind to another port", err)
	_, err = tcpBind(0)
	c.denied("bind to port 0 without a rule for it", err)
	if hasIPv6() {
		// Nothing listens on [::1]: refused by the peer means Landlock
		// let the connect through, EACCES that it did not.
		if err := tcpConnect(unix.AF_INET6, allowed); !errors.Is(err, unix.ECONNREFUSED) {
			c.errorf("connect to [::1] on the allowed port: %v, want ECONNREFUSED (allowed, nobody there)", err)
		}
		c.denied("connect to [::1] on another port", tcpConnect(unix.AF_INET6, other))
	}
}

func TestNetPort0(t *testing.T) {
	requireLandlock(t, 4)
	runChild(t, "net-port0", map[string]string{"bound": strconv.Itoa(listener(t))}, nil)
}

// A rule for port 0 allows bind(2) to port 0, which the kernel turns into
// an ephemeral port; it allows no bind to a port named.
func scenarioNetPort0(c *child) {
	bound := port(c, "bound")
	controls(c, nil, []int{0, bound})
	restrict(c, Policy{Net: &NetPolicy{BindTCP: []uint16{0}}})
	if got, err := tcpBind(0); err != nil || got == 0 {
		c.errorf("bind to port 0 with a rule for it: port %d, %v; want an ephemeral port", got, err)
	}
	_, err := tcpBind(bound)
	c.denied("bind to a named port with only port 0 allowed", err)
}

func TestNetAndFS(t *testing.T) {
	requireLandlock(t, 4)
	runChild(t, "net-and-fs", map[string]string{
		"dir": tree(t, "file"), "outside": tree(t, "file"),
		"allowed": strconv.Itoa(listener(t)), "other": strconv.Itoa(listener(t)),
	}, nil)
}

func scenarioNetAndFS(c *child) {
	dir, outside := c.arg("dir"), c.arg("outside")
	allowed, other := port(c, "allowed"), port(c, "other")
	controls(c, []int{allowed, other}, nil)
	rep := restrict(c, Policy{Writable: []string{dir}, Net: &NetPolicy{ConnectTCP: []uint16{uint16(allowed)}}})
	if len(rep.FS) == 0 || len(rep.Net) != 2 {
		c.errorf("report of a combined policy: %+v", rep)
	}
	expectWritable(c, dir)
	expectReadOnly(c, outside)
	c.ok("connect to the allowed port", tcpConnect(unix.AF_INET, allowed))
	c.denied("connect to another port", tcpConnect(unix.AF_INET, other))
}

func init() { scenarios["net-tfo"] = scenarioNetTFO }

// TCP Fast Open connects from sendto(2) without a connect(2) call: the
// kernel's Landlock must refuse it all the same.
func TestNetFastOpen(t *testing.T) {
	requireLandlock(t, 4)
	runChild(t, "net-tfo", map[string]string{"listen": strconv.Itoa(listener(t))}, nil)
}

func fastOpen(port int) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Sendto(fd, []byte("x"), unix.MSG_FASTOPEN, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
}

func scenarioNetTFO(c *child) {
	listen := port(c, "listen")
	if err := fastOpen(listen); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EPIPE) {
			c.missingFeature("TCP Fast Open for clients is off here (net.ipv4.tcp_fastopen): %v", err)
		}
		c.fatalf("sendto MSG_FASTOPEN before Restrict: %v", err)
	}
	restrict(c, Policy{Net: &NetPolicy{}})
	c.denied("sendto MSG_FASTOPEN (a connect without connect(2))", fastOpen(listen))
}
