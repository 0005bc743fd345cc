package test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Clients that ignore the proxy variables in the namespace modes (SPEC.md
// Network policy, "Clients that ignore the proxy variables"; DESIGN.md
// "Transparent egress"). The runner's network namespace has loopback
// only: corral answers its DNS queries on the nameservers' own addresses
// inside, and its TCP connects off loopback reach a relay of corral's,
// which dials the checked address from outside.
//
// Each test builds its own network: an "outside" network namespace, where
// corral runs, and a "servers" one, joined by a veth pair
// (198.51.100.1 outside; 198.51.100.2, .3 and .53 on the servers' side,
// public addresses to the SSRF guard and none of them the outside's own).
// The servers' side has a DNS server at 198.51.100.53, which corral's
// resolver, read at launch from a resolv.conf naming it, asks; the runner
// sees the same resolv.conf, and a hosts file with localhost alone, so
// every name it finds comes from corral's responder.

// nsNet is one test's network.
type nsNet struct {
	outside, servers int    // pids of the processes holding the two namespaces
	resolv, hosts    string // the files bound over /etc/resolv.conf and /etc/hosts
}

const (
	nsGoodIP = "198.51.100.2" // good.test, echo.test
	nsBadIP  = "198.51.100.3" // bad.test, and the IP literal no entry admits
	nsDNSIP  = "198.51.100.53"
	nsGood6  = "2001:db8:100::2" // good6.test, IPv6 alone
	// dual.test's IPv6 address, which no route reaches from the outside
	// namespace: a host without IPv6, as many are.
	nsNoRoute6 = "2001:db8:200::2"
)

// nsNames are the test DNS server's A and AAAA records.
var nsNames = map[string][]string{"good.test": {nsGoodIP}, "echo.test": {nsGoodIP}, "bad.test": {nsBadIP}, "good6.test": {nsGood6}, "dual.test": {nsNoRoute6, nsGoodIP}}

// nsEgressOnly skips subreaper mode, saying why.
func nsEgressOnly(t *testing.T, m mode) {
	t.Helper()
	if !m.pidns() {
		t.Skip("subreaper mode's direct connections are test/egress_direct_test.go's: there the runner shares the host's network")
	}
}

// newNSNet makes the two namespaces, the veth pair and the DNS server.
func newNSNet(t *testing.T, e *env) *nsNet {
	t.Helper()
	for _, tool := range []string{"/usr/bin/unshare", "/usr/bin/nsenter", "/usr/sbin/ip", "/usr/bin/setpriv"} {
		if _, err := os.Stat(tool); err != nil {
			missingFeature(t, tool+" is needed to build the test's network")
		}
	}
	n := &nsNet{outside: holdNetns(t), servers: holdNetns(t)}
	ip := func(pid int, script string) {
		t.Helper()
		out, err := exec.Command("/usr/bin/nsenter", "--net=/proc/"+strconv.Itoa(pid)+"/ns/net", "--", "/bin/sh", "-ec", script).CombinedOutput()
		if err != nil {
			t.Fatalf("setting up the test's network: %v: %s", err, out)
		}
	}
	ip(n.outside, fmt.Sprintf(`ip link set lo up
ip link add va type veth peer name vb netns %d
ip addr add 198.51.100.1/24 dev va
ip addr add 2001:db8:100::1/64 dev va nodad
ip link set va up`, n.servers))
	ip(n.servers, fmt.Sprintf(`ip link set lo up
ip addr add %s/24 dev vb
ip addr add %s/24 dev vb
ip addr add %s/24 dev vb
ip addr add %s/64 dev vb nodad
ip link set vb up`, nsGoodIP, nsBadIP, nsDNSIP, nsGood6))
	n.resolv, n.hosts = e.file("resolv.conf"), e.file("hosts")
	e.writeFile(n.resolv, "nameserver "+nsDNSIP+"\n", 0o644)
	// A name the hosts file alone gives (Kubernetes' hostAliases): the
	// runner reads it itself, corral read it at launch.
	e.writeFile(n.hosts, "127.0.0.1 localhost\n"+nsGoodIP+" fromhosts.test\n", 0o644)
	n.inServers(t, func() { startNSDNS(t) })
	return n
}

// holdNetns starts a process in a new network namespace and returns its
// pid once it is there; the test's end kills it.
func holdNetns(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("/usr/bin/unshare", "--net", "--", "/bin/sleep", "600")
	// No Pdeathsig: it fires when the thread that started the child
	// ends, which a Go test's threads do; the cleanup kills it by pid.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	own, _ := os.Readlink("/proc/self/ns/net")
	for i := 0; ; i++ {
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid)); err == nil && ns != own {
			return cmd.Process.Pid
		}
		if i > 1000 {
			t.Fatal("unshare --net did not make a network namespace")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// inServers runs f on a thread in the servers' namespace: the sockets it
// makes stay there (a socket keeps its namespace), whoever serves them.
func (n *nsNet) inServers(t *testing.T, f func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		// The thread goes back to its own namespace before it is
		// unlocked. Not left to end with the goroutine: a thread that
		// ends fires the Pdeathsig of a child forked on it (corral's).
		runtime.LockOSThread()
		own, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			done <- err
			return // the thread ends, locked, in its own namespace
		}
		defer unix.Close(own)
		fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", n.servers), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			err = unix.Setns(fd, unix.CLONE_NEWNET)
			unix.Close(fd)
		}
		if err != nil {
			done <- err
			return
		}
		f()
		if err := unix.Setns(own, unix.CLONE_NEWNET); err != nil {
			done <- err
			return // locked: the thread ends rather than serve others in the wrong namespace
		}
		runtime.UnlockOSThread()
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatalf("entering the servers' network namespace: %v", err)
	}
}

// corral is corral with args run in the outside namespace, with the
// test's resolv.conf and hosts file bound over the system's in a mount
// namespace of its own, as the mode's user.
func (n *nsNet) corral(e *env, args []string, extraEnv ...string) *exec.Cmd {
	drop := `exec "$@"`
	if e.m.rootless {
		drop = fmt.Sprintf(`exec setpriv --reuid %d --regid %d --clear-groups -- "$@"`, nobodyUID, nobodyGID)
	}
	script := `set -e; mount --make-rprivate /; mount --bind "$0" /etc/resolv.conf; mount --bind "$1" /etc/hosts; shift; ` + drop
	cmd := e.command(append([]string{"--net=/proc/" + strconv.Itoa(n.outside) + "/ns/net", "--", "/bin/sh", "-c", script,
		n.resolv, n.hosts, corralBin}, args...), extraEnv...)
	cmd.Path, cmd.Args[0] = "/usr/bin/nsenter", "nsenter"
	cmd.SysProcAttr.Credential = nil // root until setpriv
	cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWNS
	return cmd
}

// startNSDNS serves the test's names over UDP at nsDNSIP:53: the A and
// AAAA records of nsNames, an empty answer for another type, NXDOMAIN for
// any other name.
func startNSDNS(t *testing.T) {
	pc, err := net.ListenPacket("udp4", nsDNSIP+":53")
	if err != nil {
		t.Errorf("the test's DNS server: %v", err)
		return
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			k, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if out := nsDNSAnswer(buf[:k]); out != nil {
				pc.WriteTo(out, from)
			}
		}
	}()
}

func nsDNSAnswer(q []byte) []byte {
	if len(q) < 12 || binary.BigEndian.Uint16(q[4:6]) != 1 {
		return nil
	}
	i := 12
	var labels []string
	for i < len(q) && q[i] != 0 {
		l := int(q[i])
		if l > 63 || i+1+l > len(q) {
			return nil
		}
		labels = append(labels, string(q[i+1:i+1+l]))
		i += 1 + l
	}
	if i+5 > len(q) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[i+1 : i+3])
	question := q[12 : i+5]
	addrs, known := nsNames[strings.ToLower(strings.Join(labels, "."))]
	flags, count := uint16(0x8180), uint16(0)
	var answer []byte
	if !known {
		flags |= 3 // NXDOMAIN
	}
	for _, a := range addrs {
		ip := net.ParseIP(a)
		switch {
		case qtype == 1 && ip.To4() != nil:
			answer = append(answer, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4)
			answer = append(answer, ip.To4()...)
		case qtype == 28 && ip.To4() == nil:
			answer = append(answer, 0xc0, 12, 0, 28, 0, 1, 0, 0, 0, 60, 0, 16)
			answer = append(answer, ip.To16()...)
		default:
			continue
		}
		count++
	}
	out := binary.BigEndian.AppendUint16(nil, binary.BigEndian.Uint16(q[0:2]))
	out = binary.BigEndian.AppendUint16(out, flags|uint16(q[2]&1)<<8) // RD as asked
	out = binary.BigEndian.AppendUint16(out, 1)
	out = binary.BigEndian.AppendUint16(out, count)
	out = append(out, 0, 0, 0, 0)
	out = append(out, question...)
	return append(out, answer...)
}

// nsLogLine is a line of the run's log.
type nsLogLine struct {
	ID                                       int
	Host, Address, Decision, Via, Run, Event string
	Port                                     int
	BytesUp                                  int64 `json:"bytes_up"`
	BytesDown                                int64 `json:"bytes_down"`
}

func readNSLog(t *testing.T, path string) []nsLogLine {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []nsLogLine
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var l nsLogLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, l)
	}
	return out
}

// With no proxy variables (--no-proxy-env), in a namespace mode: glibc's
// getaddrinfo (curl, python's urllib), Go's own resolver (a static Go
// binary) and busybox's nslookup resolve an admitted name through corral's
// responder on the nameserver's address inside, and curl, python and the
// Go binary get its page through the relay; a line-echo server on another
// admitted name answers; a name with an IPv6 address alone is reached
// over IPv6; a name whose IPv6 address no route reaches is reached over
// IPv4, its IPv6 connect failing as it would have; a name the hosts file read at launch gives is reached; UDP
// to an admitted address, not DNS (QUIC's port), fails; a name no entry admits fails to resolve and is
// named once; an IP literal no entry admits is refused and named once, and
// its server never sees a connection. The log has the lookups (via dns)
// and each relayed connection's decision and end lines (via direct), with
// the run's id.
func TestEgressNSClients(t *testing.T) {
	requireClients(t)
	forEachMode(t, func(t *testing.T, m mode) {
		nsEgressOnly(t, m)
		e := newEnv(t, m)
		n := newNSNet(t, e)
		var good, good6, bad, hosts, dual *httpServer
		var echo *tcpServer
		n.inServers(t, func() {
			good = startHTTP(t, nsGoodIP, "")
			hosts = startHTTP(t, nsGoodIP, "")
			dual = startHTTP(t, nsGoodIP, "")
			good6 = startHTTP(t, nsGood6, "")
			bad = startHTTP(t, nsBadIP, "")
			echo = startTCP(t, nsGoodIP, true, nil)
		})
		if _, err := os.Stat("/bin/busybox"); err != nil {
			missingFeature(t, "/bin/busybox is needed: its nslookup has a resolver of its own")
		}
		get := func(name, url string) string {
			return fmt.Sprintf("curl -sS --max-time 10 -o \"$R\"/%[1]s.body -w '%%{http_code}' %s >\"$R\"/%[1]s.code 2>\"$R\"/%[1]s.err\n", name, shq(url))
		}
		goodURL := func(path string) string { return fmt.Sprintf("http://good.test:%d/%s", good.port, path) }
		runner, results := e.script(get("curl", goodURL("curl")) +
			get("curl6", fmt.Sprintf("http://good6.test:%d/curl6", good6.port)) +
			get("hosts", fmt.Sprintf("http://fromhosts.test:%d/hosts", hosts.port)) +
			// A client that binds its socket to the any-address first.
			fmt.Sprintf("%s -c 'import socket; s = socket.socket(); s.bind((\"0.0.0.0\", 0)); s.connect((\"good.test\", %d)); s.sendall(b\"GET /bound HTTP/1.0\\r\\n\\r\\n\"); print(b\"\".join(iter(lambda: s.recv(4096), b\"\")).split(b\"\\r\\n\\r\\n\", 1)[1].decode())' >\"$R\"/bound.body 2>\"$R\"/bound.err\n", python, good.port) +
			fmt.Sprintf("%s -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b\"x\", (\"%s\", 443))' 2>\"$R\"/udp.err; echo $? >\"$R\"/udp.exit\n", python, nsGoodIP) +
			fmt.Sprintf("%s -c 'import sys,urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' %s >\"$R\"/py.body 2>\"$R\"/py.err\n",
				python, shq(goodURL("py"))) +
			fmt.Sprintf("%s >\"$R\"/go.body 2>\"$R\"/go.err\n", strings.Join(e.helper("egressns", "-get", fmt.Sprintf("good.test:%d/go", good.port)), " ")) +
			fmt.Sprintf("%s >\"$R\"/dual.body 2>\"$R\"/dual.err\n", strings.Join(e.helper("egressns", "-v6first", "-get", fmt.Sprintf("dual.test:%d/dual", dual.port)), " ")) +
			fmt.Sprintf("%s >\"$R\"/echo.out 2>\"$R\"/echo.err\n", strings.Join(e.helper("egressns", "-echo", fmt.Sprintf("echo.test:%d", echo.port), "-line", "hello-echo"), " ")) +
			"/bin/busybox nslookup good.test >\"$R\"/nslookup.out 2>&1\n" +
			get("bad", fmt.Sprintf("http://bad.test:%d/bad", bad.port)) +
			get("bad2", fmt.Sprintf("http://bad.test:%d/bad2", bad.port)) +
			get("ip", fmt.Sprintf("http://%s:%d/ip", nsBadIP, bad.port)) +
			get("ip2", fmt.Sprintf("http://%s:%d/ip2", nsBadIP, bad.port)) +
			"exit 0\n")
		log := e.file("net.log")
		res := e.startCmd(n.corral(e, e.args(netOpts("--no-proxy-env", "--log", log,
			"--allow-net", fmt.Sprintf("good.test:%d", good.port),
			"--allow-net", fmt.Sprintf("echo.test:%d", echo.port),
			"--allow-net", fmt.Sprintf("good6.test:%d", good6.port),
			"--allow-net", fmt.Sprintf("fromhosts.test:%d", hosts.port),
			"--allow-net", fmt.Sprintf("dual.test:%d", dual.port)), runner), e.markerEnv())).wait(corralTimeout)
		wantNetCode(t, res, 0)

		if code, body := readResult(t, results, "curl.code"), readResult(t, results, "curl.body"); code != "200" || body != good.hello("/curl") {
			t.Errorf("curl (glibc): code %q body %q err %q; want the page through the relay", code, body, readResult(t, results, "curl.err"))
		}
		if code, body := readResult(t, results, "curl6.code"), readResult(t, results, "curl6.body"); code != "200" || body != good6.hello("/curl6") {
			t.Errorf("curl to a name with an IPv6 address alone: code %q body %q err %q; want the page through the relay", code, body, readResult(t, results, "curl6.err"))
		}
		if code, body := readResult(t, results, "hosts.code"), readResult(t, results, "hosts.body"); code != "200" || body != hosts.hello("/hosts") {
			t.Errorf("a name from the hosts file read at launch: code %q body %q err %q; want the page", code, body, readResult(t, results, "hosts.err"))
		}
		if body := readResult(t, results, "bound.body"); body != good.hello("/bound") {
			t.Errorf("a socket bound to 0.0.0.0 first: %q (%s); want the page", body, readResult(t, results, "bound.err"))
		}
		if readResult(t, results, "udp.exit") == "0" {
			t.Errorf("UDP to an admitted name's address, not DNS, was sent")
		}
		if body := readResult(t, results, "py.body"); body != good.hello("/py") {
			t.Errorf("python urllib (glibc): %q (%s); want the page", body, readResult(t, results, "py.err"))
		}
		if body := readResult(t, results, "go.body"); body != good.hello("/go") {
			t.Errorf("a static Go binary (Go's resolver): %q (%s); want the page", body, readResult(t, results, "go.err"))
		}
		if body := readResult(t, results, "dual.body"); body != dual.hello("/dual") {
			t.Errorf("a name whose IPv6 address no route reaches, and an IPv4 one: %q (%s); want the page over IPv4 (the IPv6 connect failing as it would have)", body, readResult(t, results, "dual.err"))
		}
		if out := readResult(t, results, "echo.out"); out != "hello-echo" {
			t.Errorf("line echo on echo.test: %q (%s); want hello-echo", out, readResult(t, results, "echo.err"))
		}
		if out := readResult(t, results, "nslookup.out"); !strings.Contains(out, nsGoodIP) {
			t.Errorf("busybox nslookup good.test: want %s in\n%s", nsGoodIP, out)
		}
		for _, name := range []string{"bad", "bad2"} {
			if msg := readResult(t, results, name+".err"); !strings.Contains(msg, "resolve") {
				t.Errorf("%s: want a resolution failure, got %q", name, msg)
			}
		}
		for _, name := range []string{"ip", "ip2"} {
			if code := readResult(t, results, name+".code"); code == "200" {
				t.Errorf("%s: reached %s, which no entry admits", name, nsBadIP)
			}
		}
		if k := bad.accepts.Load(); k != 0 {
			t.Errorf("the server no entry admits accepted %d connection(s)", k)
		}
		if k := strings.Count(res.stderr, "corral: network: denied lookup of bad.test: no rule allows this host\n"); k != 1 {
			t.Errorf("want one line naming the refused lookup of bad.test, got %d:\n%s", k, res.stderr)
		}
		wantDeniedLines(t, res.stderr, map[string]bool{
			fmt.Sprintf("direct connection to %s:%d", nsBadIP, bad.port):   true,
			fmt.Sprintf("direct connection to %s:%d", nsGoodIP, good.port): false,
		})
		if strings.Contains(res.stderr, "good.test") || strings.Contains(res.stderr, "echo.test") || strings.Contains(res.stderr, nsGoodIP+":53") || strings.Contains(res.stderr, nsNoRoute6) {
			t.Errorf("stderr names an admitted name or address:\n%s", res.stderr)
		}

		lines := readNSLog(t, log)
		allowed := map[int]nsLogLine{} // by id: the relayed connections
		var dnsAllow, dnsDeny, ends int
		for _, l := range lines {
			if l.Run == "" || l.Run != lines[0].Run {
				t.Errorf("log line without the run's id: %+v", l)
			}
			switch {
			case l.Via == "dns" && l.Decision == "allow" && l.Host == "good.test" && l.Address == nsGoodIP:
				dnsAllow++
			case l.Via == "dns" && l.Decision == "deny" && l.Host == "bad.test":
				dnsDeny++
			case l.Via == "direct" && l.Decision == "allow":
				allowed[l.ID] = l
			case l.Via == "direct" && l.Event == "end":
				if a, ok := allowed[l.ID]; ok && a.Host == "good.test" && l.BytesDown > 0 {
					ends++
				}
			}
		}
		good4 := 0
		for _, a := range allowed {
			if a.Host == "good.test" && a.Port == good.port && a.Address == nsGoodIP {
				good4++
			}
		}
		// curl, python, Go, the bound socket: one connection each.
		if dnsAllow == 0 || dnsDeny != 1 || good4 != 4 || ends != 4 {
			t.Errorf("log: %d dns allow lines for good.test (want some), %d dns deny for bad.test (want 1), %d direct allow lines for good.test (want 4), %d end lines with bytes (want 4):\n%+v",
				dnsAllow, dnsDeny, good4, ends, lines)
		}
		e.assertGone()
	})
}

// Real ssh, which knows no proxy variables, in a namespace mode: an sshd
// the test runs on the servers' side, and `ssh root@good.test` and `git
// clone root@good.test:REPO` under --allow-net good.test:PORT alone: the
// name answered by corral, the connection relayed.
func TestEgressNSSSH(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		nsEgressOnly(t, m)
		for _, tool := range []string{"/usr/sbin/sshd", "/usr/bin/ssh", "/usr/bin/ssh-keygen"} {
			if _, err := os.Stat(tool); err != nil {
				missingFeature(t, tool+" is needed (.ci/run installs openssh-server)")
			}
		}
		e := newEnv(t, m)
		n := newNSNet(t, e)
		var port int
		n.inServers(t, func() { port = freePort(t, nsGoodIP) })
		keygen := func(path string) {
			if out, err := exec.Command("/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path).CombinedOutput(); err != nil {
				t.Fatalf("ssh-keygen: %v: %s", err, out)
			}
		}
		hostKey, userKey := e.file("host_key"), e.file("user_key")
		keygen(hostKey)
		keygen(userKey)
		if m.rootless { // the client runs as uid 65534, the key must be its own
			if err := os.Chown(userKey, nobodyUID, nobodyGID); err != nil {
				t.Fatal(err)
			}
		}
		pub, err := os.ReadFile(userKey + ".pub")
		if err != nil {
			t.Fatal(err)
		}
		e.writeFile(e.file("authorized_keys"), string(pub), 0o600)
		os.MkdirAll("/run/sshd", 0o755) // sshd's privilege separation directory
		sshd := exec.Command("/usr/bin/nsenter", "--net=/proc/"+strconv.Itoa(n.servers)+"/ns/net", "--",
			"/usr/sbin/sshd", "-D", "-e", "-f", "/dev/null",
			"-o", "ListenAddress="+nsGoodIP+":"+strconv.Itoa(port), "-o", "HostKey="+hostKey,
			"-o", "AuthorizedKeysFile="+e.file("authorized_keys"), "-o", "PermitRootLogin=prohibit-password",
			"-o", "StrictModes=no", "-o", "UsePAM=no", "-o", "PidFile=none")
		var sshdLog lockedBuffer
		sshd.Stderr = &sshdLog
		if err := sshd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			sshd.Process.Kill() // nsenter execs sshd: this pid is sshd's
			sshd.Wait()
		})
		n.inServers(t, func() { // wait for its listener
			for i := 0; ; i++ {
				c, err := net.Dial("tcp", net.JoinHostPort(nsGoodIP, strconv.Itoa(port)))
				if err == nil {
					c.Close()
					return
				}
				if i > 500 {
					t.Errorf("sshd did not listen: %s", sshdLog.String())
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
		// A repository to clone over ssh, as git clone git@host:… does.
		repo := e.file("repo.git")
		for _, args := range [][]string{{"init", "-q", "--bare", repo}, {"-C", repo, "config", "uploadpack.allowAnySHA1InWant", "true"}} {
			if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v: %s", args, err, out)
			}
		}
		seed := e.file("seed")
		for _, args := range [][]string{{"init", "-q", seed}, {"-C", seed, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "over-ssh"},
			{"-C", seed, "push", "-q", repo, "HEAD:refs/heads/main"}} {
			if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v: %s", args, err, out)
			}
		}
		sshCmd := fmt.Sprintf("ssh -F /dev/null -i %s -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -p %d", shq(userKey), port)
		runner, results := e.script(fmt.Sprintf(`%s root@good.test 'echo ssh-ok' >"$R"/out 2>"$R"/err
GIT_SSH_COMMAND=%s git clone -q -b main root@good.test:%s "$R"/clone 2>"$R"/clone.err && git -C "$R"/clone log --format=%%s >"$R"/clone.log
exit 0
`, sshCmd, shq(sshCmd), shq(repo)))
		res := e.startCmd(n.corral(e, e.args(netOpts("--allow-net", fmt.Sprintf("good.test:%d", port)), runner), e.markerEnv())).wait(corralTimeout)
		wantNetCode(t, res, 0)
		if out := readResult(t, results, "out"); out != "ssh-ok" {
			t.Errorf("ssh root@good.test: %q, stderr %q; want ssh-ok\nsshd: %s", out, readResult(t, results, "err"), sshdLog.String())
		}
		if log := readResult(t, results, "clone.log"); log != "over-ssh" {
			t.Errorf("git clone over ssh: log %q, stderr %q; want the commit over-ssh", log, readResult(t, results, "clone.err"))
		}
		e.assertGone()
	})
}
