package test

// The runner's socket calls checked by address (SPEC.md Network policy:
// "Enforcement" and "Unix sockets"; Sandbox policy: --hide), on the built
// binary in every mode, seen from the runner's side (test/netprobe says
// which call failed with which errno) and from outside (stderr, the
// --net-log, corral's descriptors). Anything that could dial an address
// off this machine runs in a network namespace of the test's own, with
// loopback only: nothing here dials out of the host's namespace.

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// netns is a network namespace of the test's own, with only loopback, up:
// a goroutine locked to an OS thread that unshared it runs what must
// happen inside (listening, starting corral, which inherits the thread's
// namespace). When the test ends the thread goes back to the test's
// namespace and is unlocked; the namespace ends with the last socket or
// process in it. The thread must not end with the goroutine: it may have
// started, before this test locked it, a corral of another test's, whose
// Pdeathsig (env.command) would then kill it (seen in a CI run: a pidns
// corral killed by SIGKILL in its grace). Should that thread be the main
// thread, /proc/net (the main thread's) shows the namespace while the
// test runs: other tests read /proc/thread-self/net.
type netns struct {
	do   chan func()
	quit chan struct{}
}

func newNetns(t *testing.T) *netns {
	t.Helper()
	n := &netns{do: make(chan func()), quit: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			ready <- fmt.Errorf("open this thread's network namespace: %w", err)
			return
		}
		defer unix.Close(home)
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ready <- fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
			return
		}
		// Back home and unlocked, the thread goes on serving the test
		// binary; where setns fails it stays locked and ends here.
		defer func() {
			if unix.Setns(home, unix.CLONE_NEWNET) == nil {
				runtime.UnlockOSThread()
			}
		}()
		if err := loopbackUp(); err != nil {
			ready <- err
			return
		}
		ready <- nil
		for {
			select {
			case f := <-n.do:
				f()
			case <-n.quit:
				return
			}
		}
	}()
	if err := <-ready; err != nil {
		missingFeature(t, "a network namespace of the test's own: "+err.Error())
	}
	t.Cleanup(func() { close(n.quit) })
	return n
}

// loopbackUp sets lo up in the calling thread's network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("SIOCGIFFLAGS lo: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("SIOCSIFFLAGS lo: %w", err)
	}
	return nil
}

// run runs f on the namespace's thread and waits for it. f must not call
// t.Fatal (it is not the test's goroutine).
func (n *netns) run(f func()) {
	done := make(chan struct{})
	n.do <- func() { defer close(done); f() }
	<-done
}

// acceptCounter accepts and closes connections, counting them.
type acceptCounter struct {
	ln net.Listener
	n  atomic.Int64
}

func (a *acceptCounter) port() int { return a.ln.Addr().(*net.TCPAddr).Port }

// serve counts the connections ln accepts until the test ends.
func serve(t *testing.T, ln net.Listener) *acceptCounter {
	a := &acceptCounter{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			a.n.Add(1)
			c.Close()
		}
	}()
	return a
}

// listen listens on TCP addr inside the namespace and counts accepts.
func (n *netns) listen(t *testing.T, addr string) *acceptCounter {
	t.Helper()
	var ln net.Listener
	var err error
	n.run(func() { ln, err = net.Listen("tcp", addr) })
	if err != nil {
		t.Fatalf("listening on %s in the test's network namespace: %v", addr, err)
	}
	return serve(t, ln)
}

// startIn is startCmd for a corral started inside the namespace.
func (e *env) startIn(n *netns, cmd *exec.Cmd) *running {
	e.t.Helper()
	r := &running{t: e.t, cmd: cmd, done: make(chan struct{}), stdout: &lockedBuffer{}, stderr: &lockedBuffer{}}
	cmd.Stdout, cmd.Stderr = r.stdout, r.stderr
	var err error
	n.run(func() { err = cmd.Start() })
	if err != nil {
		e.t.Fatalf("starting %v in the test's network namespace: %v", cmd.Args, err)
	}
	e.follow(r)
	return r
}

// A destination the proxy rules do not name, which the runner must never
// be able to dial directly: TEST-NET-1, only ever dialled from inside a
// namespace of the test's own.
const directTarget = "192.0.2.1:443"

// --- TCP by address (subreaper mode) ---------------------------------------

// In subreaper mode the proxy's port and a --host-port are open on the
// host's loopback, and Landlock's rules are ports alone: the checker holds
// each TCP connect to the exact address (SPEC.md Network policy,
// Enforcement: "No connection to another host on an allowed port
// number"). Another loopback host listening on the proxy's port and on
// the --host-port is refused with EACCES and never sees a connection,
// while the proxy's address and 127.0.0.1:HOSTPORT work.
func TestCheckedConnectExactAddress(t *testing.T) {
	t.Parallel()
	e := newEnv(t, modes[0]) // subreaper
	ns := newNetns(t)
	host := ns.listen(t, "127.0.0.1:0")
	hp := strconv.Itoa(host.port())
	otherHP := ns.listen(t, "127.0.0.2:"+hp)
	runner, results := e.script(fmt.Sprintf(`hp=${HTTP_PROXY#http://}; hp=${hp##*@}; hp=${hp%%/}
echo "$hp" >"$R"/addr.tmp && mv "$R"/addr.tmp "$R"/addr
waitfor "$R"/go
$NP tcp "$hp" tcp "127.0.0.2:${hp##*:}" tcp "[::ffff:127.0.0.2]:${hp##*:}" tcp 127.0.0.1:%[1]s tcp 127.0.0.2:%[1]s >"$R"/probe
`, hp))
	r := e.startIn(ns, e.command(e.args(netOpts("--allow-net", "example.test", "--host-port", hp), runner), e.markerEnv()))
	r.waitFile(filepath.Join(results, "addr"))
	proxy := readResult(t, results, "addr")
	ap, err := netip.ParseAddrPort(proxy)
	if err != nil || !ap.Addr().IsLoopback() {
		t.Fatalf("the runner's proxy address %q is not a loopback ADDR:PORT (%v)", proxy, err)
	}
	pp := strconv.Itoa(int(ap.Port()))
	// Another loopback host on the proxy's port: a server that, reached,
	// would be a way around the proxy.
	otherPP := ns.listen(t, "127.0.0.2:"+pp)
	if err := os.WriteFile(filepath.Join(results, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res := r.wait(corralTimeout)
	wantNetCode(t, res, 0)
	steps := probeLines(readResult(t, results, "probe"))
	t.Logf("netprobe: %q", steps)
	wantStep(t, steps, "tcp "+proxy, "ok", "the proxy's own address")
	wantStep(t, steps, "tcp 127.0.0.1:"+hp, "ok", "127.0.0.1:PORT of --host-port")
	for _, addr := range []string{"127.0.0.2:" + pp, "[::ffff:127.0.0.2]:" + pp, "127.0.0.2:" + hp} {
		wantStep(t, steps, "tcp "+addr, "error: connect: EACCES", "another loopback host on an allowed port")
	}
	if n := otherPP.n.Load(); n != 0 {
		t.Errorf("127.0.0.2 on the proxy's port %s accepted %d connections from the runner", pp, n)
	}
	if n := otherHP.n.Load(); n != 0 {
		t.Errorf("127.0.0.2 on the --host-port %s accepted %d connections from the runner", hp, n)
	}
	for deadline := time.Now().Add(goneTimeout); host.n.Load() < 1 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if n := host.n.Load(); n != 1 {
		t.Errorf("the --host-port service accepted %d connections, want 1", n)
	}
	e.assertGone()
}

// --- Unix sockets by path --------------------------------------------------

// unixHost is what the test serves outside the runner's tree: a stream
// socket and a datagram socket bound in the test's directory (which uid
// 65534 can traverse), each file mode 0777 so that nothing but the
// checker stands in the way, and a connection to a third one, whose
// client end the runner inherits as fd 3 and whose server end answers
// "ping" with "pong".
type unixHost struct {
	stream, dgram string
	accepts       *atomic.Int64
	datagrams     *atomic.Int64
	inherited     *os.File
}

func startUnixHost(t *testing.T, dir string) unixHost {
	t.Helper()
	h := unixHost{stream: filepath.Join(dir, "host.sock"), dgram: filepath.Join(dir, "hostd.sock"),
		accepts: &atomic.Int64{}, datagrams: &atomic.Int64{}}
	ln, err := net.Listen("unix", h.stream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() }) // removes the file
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.accepts.Add(1)
			c.Close()
		}
	}()
	pc, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: h.dgram, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close(); os.Remove(h.dgram) })
	go func() {
		b := make([]byte, 64)
		for {
			if _, _, err := pc.ReadFrom(b); err != nil {
				return
			}
			h.datagrams.Add(1)
		}
	}()
	for _, p := range []string{h.stream, h.dgram} {
		if err := os.Chmod(p, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	// The inherited connection: to a path-bound socket outside the tree.
	inh := filepath.Join(dir, "inherit.sock")
	iln, err := net.Listen("unix", inh)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { iln.Close() })
	go func() {
		c, err := iln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(corralTimeout))
		b := make([]byte, 4)
		if _, err := c.Read(b); err == nil && string(b) == "ping" {
			c.Write([]byte("pong"))
		}
		c.Read(b) // hold it until the runner is gone
	}()
	c, err := net.Dial("unix", inh)
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.(*net.UnixConn).File()
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	h.inherited = f
	return h
}

// unixSteps are netprobe's steps for the Unix socket checks, and own the
// runner's own socket's path.
func (h unixHost) steps(own string) string {
	return fmt.Sprintf("unix %s unixgram %s unix-self %s pair fd 3", shq(h.stream), shq(h.dgram), shq(own))
}

// policies are the network policies the Unix socket checks hold under.
var policies = []struct {
	name string
	opts []string
}{
	{"net-none", []string{"--net", "none"}},
	{"allow-net", []string{"--allow-net", "example.test"}},
}

// Under --net none and --allow-net, in every mode, the runner may connect
// only to path-bound Unix sockets its own tree bound (SPEC.md Network
// policy, Unix sockets): a stream and a datagram socket the test bound
// outside are refused with EACCES (and see nothing), one the runner binds
// itself (by a relative name) is reached by absolute and by relative
// path, and a socketpair and an inherited connected socket (fd 3, to a
// path-bound socket outside) keep working. Without a policy the same
// outside sockets are reachable: the refusal is the checker's, not the
// file's mode.
func TestUnixSocketsOnlyTheTrees(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		for _, pol := range append([]struct {
			name string
			opts []string
		}{{"no-policy", nil}}, policies...) {
			t.Run(pol.name, func(t *testing.T) {
				e := newEnv(t, m)
				h := startUnixHost(t, e.dir)
				own := filepath.Join(e.dir, "own")
				if err := os.Mkdir(own, 0o777); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(own, 0o777); err != nil {
					t.Fatal(err)
				}
				ownSock := filepath.Join(own, "own.sock")
				runner, results := e.script("$NP " + h.steps(ownSock) + " >\"$R\"/probe\n")
				cmd := e.command(e.args(netOpts(pol.opts...), runner), e.markerEnv())
				cmd.ExtraFiles = []*os.File{h.inherited}
				res := e.startCmd(cmd).wait(corralTimeout)
				wantNetCode(t, res, 0)
				steps := probeLines(readResult(t, results, "probe"))
				t.Logf("netprobe: %q", steps)
				outside := "error: connect: EACCES"
				outsideDgram := "error: sendto: EACCES"
				if pol.opts == nil {
					outside, outsideDgram = "ok", "ok"
				}
				wantStep(t, steps, "unix "+h.stream, outside, "a stream socket bound outside the tree")
				wantStep(t, steps, "unixgram "+h.dgram, outsideDgram, "a datagram socket bound outside the tree")
				wantStep(t, steps, "unix-self "+ownSock, "ok", "a socket the tree bound itself, by absolute and relative path")
				wantStep(t, steps, "pair", "ok", "socketpair")
				wantStep(t, steps, "fd 3", `ok reply="pong"`, "an inherited connected Unix socket")
				if pol.opts != nil {
					// The datagram may still be in flight: give it a moment.
					time.Sleep(50 * time.Millisecond)
					if n := h.accepts.Load(); n != 0 {
						t.Errorf("the outside stream socket accepted %d connections from the runner", n)
					}
					if n := h.datagrams.Load(); n != 0 {
						t.Errorf("the outside datagram socket received %d datagrams from the runner", n)
					}
					if !namesRefusal(res.stderr, h.stream) {
						t.Errorf("stderr does not name the refused socket %s:\n%s", h.stream, res.stderr)
					}
				}
				e.assertGone()
			})
		}
	})
}

// namesRefusal reports whether stderr has a line "corral: network:
// denied …" naming what.
func namesRefusal(stderr, what string) bool {
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(line, "corral: network: denied ") && strings.Contains(line, " "+what+":") {
			return true
		}
	}
	return false
}

// --hide DIR alone, without a network policy (SPEC.md Sandbox policy:
// "no Unix socket there can be connected to"), in every mode: a socket
// beneath DIR is refused with EACCES and sees nothing; one outside is
// reachable.
func TestHideUnixSockets(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		hidden := filepath.Join(e.dir, "hidden")
		if err := os.Mkdir(hidden, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(hidden, 0o777); err != nil {
			t.Fatal(err)
		}
		in := startUnixHost(t, hidden)
		outside := filepath.Join(e.dir, "outside")
		if err := os.Mkdir(outside, 0o755); err != nil {
			t.Fatal(err)
		}
		out := startUnixHost(t, outside)
		runner, results := e.script(fmt.Sprintf("$NP unix %s unix %s >\"$R\"/probe\n", shq(in.stream), shq(out.stream)))
		res := e.run(e.args(netOpts("--hide", hidden), runner), e.markerEnv())
		wantCode(t, res, 0)
		steps := probeLines(readResult(t, results, "probe"))
		t.Logf("netprobe: %q", steps)
		wantStep(t, steps, "unix "+in.stream, "error: connect: EACCES", "a socket beneath --hide")
		wantStep(t, steps, "unix "+out.stream, "ok", "a socket outside --hide")
		if n := in.accepts.Load(); n != 0 {
			t.Errorf("the socket beneath --hide accepted %d connections from the runner", n)
		}
		e.assertGone()
	})
}

// --- vsock ------------------------------------------------------------------

// AF_VSOCK, which no network namespace separates, is refused with EACCES
// under every network policy in every mode (SPEC.md Network policy): in
// pidns mode the runner's new network namespace did not stop it.
func TestVsockRefused(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		for _, pol := range policies {
			t.Run(pol.name, func(t *testing.T) {
				e := newEnv(t, m)
				runner, results := e.script("$NP vsock >\"$R\"/probe\n")
				res := e.run(e.args(netOpts(pol.opts...), runner), e.markerEnv())
				wantNetCode(t, res, 0)
				steps := probeLines(readResult(t, results, "probe"))
				wantStep(t, steps, "vsock", "error: socket: EACCES", "socket(AF_VSOCK) under "+pol.name)
				e.assertGone()
			})
		}
	})
}

// --- direct attempts named ---------------------------------------------------

// A client that ignores the proxy variables is told why it fails (SPEC.md
// Network policy, Enforcement): with --allow-net and --net-log, in every
// mode, a runner that connects twice straight to a destination gets an
// error both times (EACCES from the checker in subreaper mode; in a
// namespace mode, no route), stderr names the destination exactly once,
// and the log has one deny decision line for it. Under --net none (pidns
// modes: in subreaper mode the socket itself is refused, so there is no
// connect to name) the line says the command has no network.
func TestDirectAttemptNamedOnce(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		cases := []struct {
			name string
			opts []string
			why  string
		}{{"allow-net", []string{"--allow-net", "example.test"}, "no --allow-net entry admits it"}}
		if m.pidns() {
			cases = append(cases, struct {
				name string
				opts []string
				why  string
			}{"net-none", []string{"--net", "none"}, "the command has no network (--net none)"})
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				e := newEnv(t, m)
				ns := newNetns(t)
				log := e.file("net.log")
				opts := c.opts
				if c.name == "allow-net" {
					opts = append(opts, "--net-log", log)
				}
				runner, results := e.script(fmt.Sprintf("$NP tcp %[1]s >\"$R\"/first\n$NP tcp %[1]s >\"$R\"/second\n", directTarget))
				res := e.startIn(ns, e.command(e.args(netOpts(opts...), runner), e.markerEnv())).wait(corralTimeout)
				wantNetCode(t, res, 0)
				for _, name := range []string{"first", "second"} {
					got := probeLines(readResult(t, results, name))["tcp "+directTarget]
					want := "error: connect: "
					if !m.pidns() {
						want += "EACCES"
					}
					if !strings.HasPrefix(got, want) {
						t.Errorf("the %s direct connect to %s: %q, want %q…", name, directTarget, got, want)
					}
				}
				line := "corral: network: denied direct connection to " + directTarget + ": " + c.why
				if n := strings.Count(res.stderr, line+"\n"); n != 1 {
					t.Errorf("stderr names the direct attempt %d times, want exactly once (%q):\n%s", n, line, res.stderr)
				}
				if c.name != "allow-net" {
					e.assertGone()
					return
				}
				data, err := os.ReadFile(log)
				if err != nil {
					t.Fatalf("--net-log: %v", err)
				}
				var denies []map[string]any
				for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
					if l == "" {
						continue
					}
					var doc map[string]any
					if err := json.Unmarshal([]byte(l), &doc); err != nil {
						t.Fatalf("--net-log line is not one JSON object: %v: %q", err, l)
					}
					if doc["address"] == "192.0.2.1" || doc["host"] == "192.0.2.1" {
						denies = append(denies, doc)
					}
				}
				if len(denies) != 1 {
					t.Fatalf("--net-log has %d lines for %s, want one deny decision line:\n%s", len(denies), directTarget, data)
				}
				wantState(t, denies[0], map[string]any{"decision": "deny", "port": 443, "host": "192.0.2.1"})
				if r, _ := denies[0]["reason"].(string); r == "" {
					t.Errorf("the deny line gives no reason: %v", denies[0])
				}
				e.assertGone()
			})
		}
	})
}

// --- no listener without a policy --------------------------------------------

// seccompListeners counts the seccomp user-notification listeners among
// pid's descriptors: "anon_inode:seccomp notify" (older kernels put the
// name in brackets).
func seccompListeners(t *testing.T, pid int) int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		if link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && strings.Trim(strings.TrimPrefix(link, "anon_inode:"), "[]") == "seccomp notify" {
			n++
		}
	}
	return n
}

// The checker is paid for only where it is asked for (sockcheck's package
// doc, Cost): a plain run and --timeout leave no seccomp listener in
// corral's processes (the host side, and the init in pidns mode);
// --writable (every mode: its refusals are named), --net none and --hide
// leave exactly one, in the process that checks (corral in subreaper
// mode, the init in pidns mode), while the runner sleeps.
func TestSeccompListenerOnlyWithAPolicy(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		for _, c := range []struct {
			name string
			opts []string
			want int
		}{
			{"plain", nil, 0},
			{"timeout", []string{"--timeout", "60"}, 0},
			{"writable", []string{"--writable", "DIR"}, 1}, // every mode: refused writes named (issue 35)
			{"net-none", []string{"--net", "none"}, 1},
			{"hide", []string{"--hide", "HIDDEN"}, 1},
		} {
			t.Run(c.name, func(t *testing.T) {
				e := newEnv(t, m)
				hidden := e.file("hidden")
				if err := os.Mkdir(hidden, 0o755); err != nil {
					t.Fatal(err)
				}
				var opts []string
				for _, o := range c.opts {
					opts = append(opts, strings.NewReplacer("HIDDEN", hidden, "DIR", e.dir).Replace(o))
				}
				// Not in the test's directory itself: beneath --hide's
				// parent Landlock lets nothing be created.
				run := e.file("run")
				if err := os.Mkdir(run, 0o777); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(run, 0o777); err != nil {
					t.Fatal(err)
				}
				ready := filepath.Join(run, "ready")
				r := e.start(e.args(opts, e.helper("sleep", "-ready", ready)))
				r.waitFile(ready)
				corral := r.cmd.Process.Pid
				procs := []int{corral}
				if m.pidns() {
					procs = append(procs, initPID(t, corral))
				}
				total := 0
				for _, pid := range procs {
					n := seccompListeners(t, pid)
					total += n
					if n > 0 && pid != procs[len(procs)-1] {
						t.Errorf("corral process %d holds %d seccomp listeners; the checking process is %d", pid, n, procs[len(procs)-1])
					}
				}
				// Subreaper mode checks metadata and write-intent calls
				// (issue 33); namespace modes look at them to name what
				// the mounts refuse, and refuse protected paths (issue 35).
				want := c.want
				if total != want {
					t.Errorf("corral's processes %v hold %d seccomp listeners (anon_inode:seccomp notify), want %d", procs, total, want)
				}
				r.signal(unix.SIGTERM)
				wantCode(t, r.wait(corralTimeout), 128+int(unix.SIGTERM))
				e.assertGone()
			})
		}
	})
}

// corralKnows reports whether corral's --help names flag.
func corralKnows(t *testing.T, flag string) bool {
	t.Helper()
	out, _ := exec.Command(corralBin, "--help").CombinedOutput()
	return strings.Contains(string(out), flag+" ")
}

// --allow-unix PATH (SPEC.md Network policy) opens exactly the socket it
// names under --net none, in every mode: the named stream socket is
// reached, the datagram socket beside it is still refused. Skipped until
// corral has the flag.
func TestAllowUnixOpensOnlyThatSocket(t *testing.T) {
	if !corralKnows(t, "--allow-unix") {
		t.Skip("corral has no --allow-unix yet (SPEC.md Network policy)")
	}
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		h := startUnixHost(t, e.dir)
		runner, results := e.script(fmt.Sprintf("$NP unix %s unixgram %s >\"$R\"/probe\n", shq(h.stream), shq(h.dgram)))
		res := e.run(e.args(netOpts("--net", "none", "--allow-unix", h.stream), runner), e.markerEnv())
		wantNetCode(t, res, 0)
		steps := probeLines(readResult(t, results, "probe"))
		wantStep(t, steps, "unix "+h.stream, "ok", "the socket --allow-unix names")
		wantStep(t, steps, "unixgram "+h.dgram, "error: sendto: EACCES", "a socket --allow-unix does not name")
		e.assertGone()
	})
}
