package test

import (
	"debug/elf"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
)

// UDP in subreaper mode (SPEC.md Network policy, "Where the answer comes
// from"; DESIGN.md "Transparent egress"): the runner shares the host's
// network, its UDP sockets are allowed for DNS only, and the socket
// checker holds every UDP connect, sendto, sendmsg and sendmmsg to its
// address. A resolver on a connected UDP socket (Go's own, busybox's
// nslookup) reaches corral's responder; a DNS query sent with an address on
// an unconnected socket (musl's resolver) cannot be answered there and is
// named; every other UDP destination is refused and named once, an
// admitted name's included. The namespace modes answer DNS inside their
// own network namespace: not these tests' subject.

// udpSink is a UDP server that counts the datagrams it gets.
type udpSink struct {
	port int
	got  atomic.Int64
}

func startUDPSink(t *testing.T, ip string) *udpSink {
	t.Helper()
	pc, err := net.ListenPacket("udp4", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	s := &udpSink{port: pc.LocalAddr().(*net.UDPAddr).Port}
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			s.got.Add(1)
		}
	}()
	t.Cleanup(func() { pc.Close() })
	return s
}

// requireStaticGo fails the test unless the helper is a static Go binary
// (CGO_ENABLED=0, as TestMain builds it): its resolver is then Go's own,
// which asks the nameservers of /etc/resolv.conf over connected UDP.
func requireStaticGo(t *testing.T) {
	t.Helper()
	f, err := elf.Open(helperBin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatalf("%s is dynamically linked: the test wants a static Go binary with the pure Go resolver", helperBin)
		}
	}
}

// Go's own resolver (a static binary, no proxy variables, --no-proxy-env)
// and busybox nslookup resolve an admitted name over UDP through corral's
// responder, and the Go client fetches the page directly; a name no entry
// admits fails to resolve. An unconnected DNS query (musl's way) is refused
// and named for what it is; UDP to an admitted name on another port, a
// python sendmsg with an address, a UDP connect and a sendto are refused
// and named once; the UDP server behind them gets nothing. The log has the
// refusals.
func TestUDPDNSSubreaper(t *testing.T) {
	requireClients(t)
	requireStaticGo(t)
	if _, err := os.Stat("/bin/busybox"); err != nil {
		missingFeature(t, "/bin/busybox is needed (busybox-static)")
	}
	forEachMode(t, func(t *testing.T, m mode) {
		subreaperOnly(t, m)
		e := newEnv(t, m)
		good := startHTTP(t, "127.0.0.2", "")
		sink := startUDPSink(t, "127.0.0.2")
		helper := strings.Join(e.helper(), " ")
		pySendmsg := `import socket,sys
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)
try:
    s.sendmsg([b"quic?"],[],0,(sys.argv[1],int(sys.argv[2])))
    print("sent")
except OSError as e:
    print(e.errno)`
		sinkAddr := fmt.Sprintf("127.0.0.2:%d", sink.port)
		runner, results := e.script(fmt.Sprintf(`echo "127.0.0.1 localhost" >/etc/hosts 2>"$R"/write.err || echo failed >"$R"/write.err
%[1]s udp-get %[2]s >"$R"/go.out 2>"$R"/go.err
%[1]s udp-get %[3]s >"$R"/gobad.out 2>"$R"/gobad.err
/bin/busybox nslookup good.test >"$R"/bb.out 2>&1
/bin/busybox nslookup bad.test >"$R"/bbbad.out 2>&1
%[1]s udp-try sendto:192.0.2.53:53 sendto:192.0.2.53:53 connect:%[4]s sendmsg:%[4]s sendto:%[4]s undevice >"$R"/try.out 2>"$R"/try.err
env -u RES_OPTIONS %[5]s -c 'import socket; print(socket.getaddrinfo("good.test", 80)[0][4][0])' >"$R"/udpglibc.out 2>"$R"/udpglibc.err
%[5]s -c %[6]s good.test %[7]d >"$R"/py.out 2>"$R"/py.err
%[5]s -c %[6]s 127.0.0.2 %[7]d >"$R"/py2.out 2>"$R"/py2.err
`, helper, shq(fmt.Sprintf("http://good.test:%d/go", good.port)), shq(fmt.Sprintf("http://bad.test:%d/gobad", good.port)),
			sinkAddr, python, shq(pySendmsg), sink.port))
		log := e.file("net.log")
		rules := netOpts("--no-proxy-env", "--log", log,
			"--allow-net", fmt.Sprintf("good.test:%d", good.port), "--allow-net", fmt.Sprintf("good.test:%d", sink.port),
			"--allow-net", fmt.Sprintf("127.0.0.2/32:%d", good.port)) // the SSRF guard's, for a loopback name
		res := e.startCmd(e.withHosts(e.args(rules, runner), e.markerEnv())).wait(corralTimeout)
		wantNetCode(t, res, 0)
		if w := readResult(t, results, "write.err"); w != "" {
			t.Skipf("the runner could not empty /etc/hosts here: %s", w)
		}
		if got := readResult(t, results, "go.out"); got != good.hello("/go") {
			t.Errorf("Go's resolver and client, no proxy variables: %q (%s), want the page", got, readResult(t, results, "go.err"))
		}
		if got := readResult(t, results, "gobad.out"); !strings.Contains(got, "no such host") {
			t.Errorf("Go's resolver, bad.test: %q, want a resolution failure", got)
		}
		if got := readResult(t, results, "bb.out"); !strings.Contains(got, "127.0.0.2") {
			t.Errorf("busybox nslookup good.test: %q, want its address", got)
		}
		if got := readResult(t, results, "bbbad.out"); !strings.Contains(got, "NXDOMAIN") || strings.Contains(got, "127.0.0.3") {
			t.Errorf("busybox nslookup bad.test: %q, want NXDOMAIN", got)
		}
		try := readResult(t, results, "try.out")
		for _, op := range []string{"sendto:192.0.2.53:53", "connect:" + sinkAddr, "sendmsg:" + sinkAddr, "sendto:" + sinkAddr} {
			if !strings.Contains(try, op+"=EACCES\n") && !strings.HasSuffix(try, op+"=EACCES") {
				t.Errorf("udp-try %s: want EACCES, got:\n%s%s", op, try, readResult(t, results, "try.err"))
			}
		}
		if !strings.Contains(try+"\n", "undevice=EPERM\n") {
			t.Errorf("udp-try: a UDP socket of the runner's could leave the loopback device it is held to:\n%s", try)
		}
		// glibc over UDP (no RES_OPTIONS=use-vc): its connected socket
		// takes corral's answers too (glibc 2.36; RES_OPTIONS stays for
		// the others).
		if got := readResult(t, results, "udpglibc.out"); got != "127.0.0.2" {
			t.Errorf("glibc's getaddrinfo over UDP: %q (%s), want 127.0.0.2", got, readResult(t, results, "udpglibc.err"))
		}
		for _, f := range []string{"py.out", "py2.out"} {
			if got := readResult(t, results, f); got != "13" {
				t.Errorf("python sendmsg with an address to UDP %s (%s): %q, want errno 13 (EACCES)", sinkAddr, f, got)
			}
		}
		if n := sink.got.Load(); n != 0 {
			t.Errorf("the UDP server at %s got %d datagram(s)", sinkAddr, n)
		}
		musl := "corral: network: helper sent a DNS query to 192.0.2.53:53 on an unconnected UDP socket (musl libc?); corral cannot answer it in subreaper mode: use --mode pidns, or a glibc build\n"
		if n := strings.Count(res.stderr, musl); n != 1 {
			t.Errorf("want the unconnected DNS query named once (%q), got %d:\n%s", musl, n, res.stderr)
		}
		wantDeniedLines(t, res.stderr, map[string]bool{
			"UDP to " + sinkAddr: true,
			"lookup of bad.test": true,
		})
		if strings.Contains(res.stderr, "good.test") {
			t.Errorf("stderr names good.test, which was allowed:\n%s", res.stderr)
		}
		data, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		var udpDeny, dnsDeny int
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var d struct {
				Host, Address, Decision, Via, Run string
				Port                              int
			}
			if err := json.Unmarshal([]byte(line), &d); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			switch {
			case d.Decision == "deny" && d.Via == "direct" && d.Address == "127.0.0.2" && d.Port == sink.port:
				udpDeny++
			case d.Decision == "deny" && d.Via == "dns" && d.Address == "192.0.2.53" && d.Port == 53:
				dnsDeny++
			}
		}
		if udpDeny != 1 || dnsDeny != 1 {
			t.Errorf("log: %d deny lines for UDP to %s (want 1), %d for the unconnected DNS query (want 1):\n%s", udpDeny, sinkAddr, dnsDeny, data)
		}
		e.assertGone()
	})
}

// A runner thread that rewrites a sendmsg's address while the checker
// looks changes nothing: a UDP socket connected to the nameserver (made to
// corral's responder) sends queries with msg_name the nameserver while
// another thread flips those bytes to a UDP server's address; every
// datagram the checker lets go reaches the responder, the server gets
// none.
func TestUDPSendmsgTOCTOU(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		subreaperOnly(t, m)
		e := newEnv(t, m)
		sink := startUDPSink(t, "127.0.0.2")
		runner := e.helper("udp-toctou", "192.0.2.53:53", fmt.Sprintf("127.0.0.2:%d", sink.port), "3000")
		rules := netOpts("--no-proxy-env", "--allow-net", fmt.Sprintf("good.test:%d", sink.port))
		res := e.startCmd(e.withHosts(e.args(rules, runner), e.markerEnv())).wait(corralTimeout)
		wantNetCode(t, res, 0)
		var ok, refused, other int
		if _, err := fmt.Sscanf(strings.TrimSpace(res.stdout), "ok=%d refused=%d other=%d", &ok, &refused, &other); err != nil {
			t.Fatalf("udp-toctou: %q: %v\n%s", res.stdout, err, res.stderr)
		}
		t.Logf("udp-toctou: %s", strings.TrimSpace(res.stdout))
		if n := sink.got.Load(); n != 0 {
			t.Errorf("the UDP server got %d datagram(s): a rewritten msg_name reached the kernel (ok=%d refused=%d)", n, ok, refused)
		}
		if ok == 0 || other != 0 {
			t.Errorf("udp-toctou: ok=%d refused=%d other=%d; want some sent to the responder and nothing but EACCES refused", ok, refused, other)
		}
		e.assertGone()
	})
}
