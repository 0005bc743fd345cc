// Command netprobe reports the network a process sees, for corral's
// integration tests (test/config_test.go, test/network_test.go).
//
// Without steps it prints the interfaces and their flags (from the kernel
// over netlink, so the answer is this process's network namespace, unlike
// /sys/class/net, which shows the namespace of whoever mounted /sys),
// whether a TCP connect to -dial succeeds, and whether it can listen and
// connect on its own 127.0.0.1:
//
//	iface=NAME flags=FLAGS   one line per interface
//	dial=ok | dial=error: REASON
//	self=ok | self=error: REASON
//
// With steps (the arguments after the flags) it runs each in turn and
// prints one line per step, "STEP ARGS=RESULT"; a failure is
// "error: SYSCALL: ERRNO" where the kernel refused, so a test can tell a
// seccomp refusal of socket() from a refused connect. Steps:
//
//	tcp ADDR               connect over TCP (IPv4 or IPv6)
//	udp ADDR PAYLOAD       send one datagram
//	listen ADDR            bind and listen on TCP ADDR
//	pair                   an AF_UNIX socketpair moves a byte
//	self                   listen on 127.0.0.1, connect to it, move a byte
//	ifaces                 the interface lines above
//	echo ADDR DATA         connect, send DATA, shut down writing, read the
//	                       answer to EOF: "ok reply=%q"
//	hold ADDR READY        ignore SIGTERM, connect (ADDR "proxy:HOST:PORT"
//	                       goes through $HTTP_PROXY with CONNECT), send
//	                       "hold\n", create READY, then block forever
//	serve ADDR READY STOP  listen on ADDR, create READY, answer each
//	                       connection's bytes (read to EOF) with
//	                       "published:" + bytes; exit once STOP exists
//	tunnel TARGET UP       CONNECT TARGET through $HTTP_PROXY, send UP
//	                       bytes, shut down writing, count the answer:
//	                       "status N down=M" or "status N body=%q"
//	socks TARGET UP        the same through $ALL_PROXY (socks5h, the name
//	                       sent as a domain name): "reply N down=M"
//	socks-cmd CMD TARGET   a SOCKS5 request with command CMD (2 BIND,
//	                       3 UDP ASSOCIATE): "reply N"
//	load TARGET N SEQ DIR  N concurrent CONNECT tunnels through $HTTP_PROXY
//	                       to an echo server, each moving a byte, all held
//	                       open; then SEQ sequential ones. Synchronised with
//	                       the test by files in DIR: creates "ready", waits
//	                       for "go"; creates "held", waits for "release";
//	                       closes them, runs the sequential ones, creates
//	                       "done", waits for "finish"
//	unix PATH              connect to the Unix stream socket at PATH
//	unixgram PATH          send one datagram to the Unix datagram socket at
//	                       PATH (sendto with the address)
//	unix-self PATH         bind a Unix stream socket at PATH by its relative
//	                       name from PATH's directory, listen, and connect
//	                       to it by absolute and by relative path, each
//	                       connection moving a byte
//	unix-listen PATH READY bind and listen at PATH (mode 0777), create READY,
//	                       then block forever (a server outside the tree)
//	vsock                  socket(AF_VSOCK, SOCK_STREAM)
//	fd N                   write "ping" on the inherited descriptor N and
//	                       read the peer's 4-byte answer: "ok reply=%q"
//
// -marker is ignored: it only puts the test's marker in the command line,
// so the test can prove no netprobe survives.
package main

import (
	"bufio"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ioTimeout bounds every network wait, so a broken proxy fails a step
// instead of hanging the test.
const ioTimeout = 10 * time.Second

// syncTimeout bounds every wait for a file the test creates.
const syncTimeout = 60 * time.Second

func main() {
	flag.String("marker", "", "ignored; carried in the command line")
	dial := flag.String("dial", "", "TCP address to try to connect to")
	flag.Parse()
	if flag.NArg() > 0 {
		os.Exit(runSteps(flag.Args()))
	}
	if err := printIfaces(); err != nil {
		fmt.Fprintf(os.Stderr, "netprobe: interfaces: %v\n", err)
		os.Exit(1)
	}
	if *dial != "" {
		fmt.Printf("dial=%s\n", result(tryDial(*dial)))
	}
	fmt.Printf("self=%s\n", result(selfConnect()))
}

func printIfaces() error {
	ifaces, err := net.Interfaces()
	if err != nil {
		return err
	}
	for _, i := range ifaces {
		fmt.Printf("iface=%s flags=%s\n", i.Name, i.Flags)
	}
	return nil
}

// arity is how many arguments each step takes.
var arity = map[string]int{
	"tcp": 1, "udp": 2, "listen": 1, "pair": 0, "self": 0, "ifaces": 0,
	"echo": 2, "hold": 2, "serve": 3, "tunnel": 2, "socks": 2, "socks-cmd": 2, "load": 4,
	"unix": 1, "unixgram": 1, "unix-self": 1, "unix-listen": 2, "vsock": 0, "fd": 1,
}

func runSteps(args []string) int {
	for len(args) > 0 {
		name := args[0]
		n, ok := arity[name]
		if !ok || len(args) < 1+n {
			fmt.Fprintf(os.Stderr, "netprobe: unknown step or missing arguments: %q\n", args)
			return 2
		}
		a := args[1 : 1+n]
		args = args[1+n:]
		label := strings.Join(append([]string{name}, a...), " ")
		if name == "udp" {
			label = "udp " + a[0]
		}
		if name == "ifaces" {
			if err := printIfaces(); err != nil {
				fmt.Printf("ifaces=%s\n", result(err))
			}
			continue
		}
		fmt.Printf("%s=%s\n", label, step(name, a))
	}
	return 0
}

func step(name string, a []string) string {
	switch name {
	case "tcp":
		return result(tryDial(a[0]))
	case "udp":
		return result(sendUDP(a[0], a[1]))
	case "listen":
		ln, err := net.Listen("tcp", a[0])
		if err == nil {
			ln.Close()
		}
		return result(err)
	case "pair":
		return result(socketpair())
	case "self":
		return result(selfConnect())
	case "echo":
		reply, err := echo(a[0], a[1])
		if err != nil {
			return result(err)
		}
		return fmt.Sprintf("ok reply=%q", reply)
	case "hold":
		return result(hold(a[0], a[1]))
	case "serve":
		return result(serve(a[0], a[1], a[2]))
	case "tunnel", "socks":
		up, err := strconv.Atoi(a[1])
		if err != nil {
			return result(err)
		}
		if name == "tunnel" {
			return tunnelStep(a[0], up)
		}
		return socksStep(a[0], 1, up)
	case "socks-cmd":
		cmd, err := strconv.Atoi(a[0])
		if err != nil {
			return result(err)
		}
		return socksStep(a[1], byte(cmd), -1)
	case "load":
		return result(load(a))
	case "unix":
		return result(unixConnect(a[0]))
	case "unixgram":
		return result(unixSendto(a[0]))
	case "unix-self":
		return result(unixSelf(a[0]))
	case "unix-listen":
		return result(unixListen(a[0], a[1]))
	case "vsock":
		fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return result(os.NewSyscallError("socket", err))
		}
		unix.Close(fd)
		return "ok"
	case "fd":
		reply, err := pingFD(a[0])
		if err != nil {
			return result(err)
		}
		return fmt.Sprintf("ok reply=%q", reply)
	}
	return "error: unknown step"
}

// result is "ok" or "error: " and the failing system call and errno where
// the kernel said no, else the error's text.
func result(err error) string {
	if err == nil {
		return "ok"
	}
	var se *os.SyscallError
	if errors.As(err, &se) {
		var errno syscall.Errno
		if errors.As(se.Err, &errno) {
			return fmt.Sprintf("error: %s: %s (%v)", se.Syscall, unix.ErrnoName(errno), err)
		}
	}
	return "error: " + err.Error()
}

func tryDial(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return err
	}
	return conn.Close()
}

func sendUDP(addr, payload string) error {
	conn, err := net.Dial("udp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = conn.Write([]byte(payload))
	return err
}

func socketpair() error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("socketpair", err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	if _, err := unix.Write(fds[0], []byte("x")); err != nil {
		return os.NewSyscallError("write", err)
	}
	buf := make([]byte, 1)
	if n, err := unix.Read(fds[1], buf); err != nil || n != 1 || buf[0] != 'x' {
		return fmt.Errorf("read back %q: %v", buf[:max(n, 0)], err)
	}
	return nil
}

// selfConnect listens on 127.0.0.1, connects to itself and moves one byte.
func selfConnect() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	accepted := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			accepted <- err
			return
		}
		defer conn.Close()
		_, err = conn.Write([]byte("x"))
		accepted <- err
	}()
	conn, err := net.DialTimeout("tcp", ln.Addr().String(), 2*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1)
	if _, err := io.ReadFull(conn, buf); err != nil {
		return err
	}
	return <-accepted
}

func echo(addr, data string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(ioTimeout))
	if _, err := conn.Write([]byte(data)); err != nil {
		return "", err
	}
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		return "", err
	}
	reply, err := io.ReadAll(conn)
	return string(reply), err
}

func hold(addr, ready string) error {
	signal.Ignore(syscall.SIGTERM)
	var conn net.Conn
	if target, ok := strings.CutPrefix(addr, "proxy:"); ok {
		c, status, body, err := connectHTTP(target)
		if err != nil {
			return err
		}
		if status != 200 {
			c.Close()
			return fmt.Errorf("proxy answered %d: %q", status, body)
		}
		conn = c
	} else {
		c, err := net.DialTimeout("tcp", addr, ioTimeout)
		if err != nil {
			return err
		}
		conn = c
	}
	if _, err := conn.Write([]byte("hold\n")); err != nil {
		return err
	}
	if err := os.WriteFile(ready, nil, 0o644); err != nil {
		return err
	}
	for {
		time.Sleep(time.Hour)
	}
}

func serve(addr, ready, stop string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				data, err := io.ReadAll(conn)
				if err != nil {
					return
				}
				conn.Write(append([]byte("published:"), data...))
			}()
		}
	}()
	if err := os.WriteFile(ready, nil, 0o644); err != nil {
		return err
	}
	return waitFile(stop)
}

func waitFile(path string) error {
	deadline := time.Now().Add(syncTimeout)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not appear within %v", path, syncTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// proxyAddr is host:port of the proxy URL in the environment variable,
// and its credentials (USER:PASS@ before the address).
func proxyAddr(variable, scheme string) (string, *url.Userinfo, error) {
	raw := os.Getenv(variable)
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != scheme || u.Host == "" {
		return "", nil, fmt.Errorf("$%s is %q, not a %s:// URL", variable, raw, scheme)
	}
	return u.Host, u.User, nil
}

// proxyAuthorization is the Proxy-Authorization line (with its CRLF) for
// user, or "" without credentials.
func proxyAuthorization(user *url.Userinfo) string {
	if user == nil {
		return ""
	}
	pass, _ := user.Password()
	return "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(user.Username()+":"+pass)) + "\r\n"
}

// connectHTTP opens a CONNECT tunnel to target through $HTTP_PROXY and
// returns the connection, the proxy's status and, unless it is 200, the
// body of its answer.
func connectHTTP(target string) (net.Conn, int, string, error) {
	addr, user, err := proxyAddr("HTTP_PROXY", "http")
	if err != nil {
		return nil, 0, "", err
	}
	conn, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		return nil, 0, "", err
	}
	conn.SetDeadline(time.Now().Add(ioTimeout))
	if _, err := fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", target, target, proxyAuthorization(user)); err != nil {
		conn.Close()
		return nil, 0, "", err
	}
	// Read the answer's head byte by byte: a buffered reader could swallow
	// the first bytes of the tunnel.
	var head []byte
	b := make([]byte, 1)
	for !strings.HasSuffix(string(head), "\r\n\r\n") {
		if _, err := io.ReadFull(conn, b); err != nil {
			conn.Close()
			return nil, 0, "", fmt.Errorf("reading the proxy's answer (so far %q): %w", head, err)
		}
		head = append(head, b[0])
		if len(head) > 64<<10 {
			conn.Close()
			return nil, 0, "", fmt.Errorf("proxy answer head too long")
		}
	}
	fields := strings.Fields(string(head))
	if len(fields) < 2 {
		conn.Close()
		return nil, 0, "", fmt.Errorf("malformed proxy answer %q", head)
	}
	status, err := strconv.Atoi(fields[1])
	if err != nil {
		conn.Close()
		return nil, 0, "", fmt.Errorf("malformed proxy answer %q", head)
	}
	conn.SetDeadline(time.Time{})
	if status == 200 {
		return conn, status, "", nil
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(ioTimeout))
	body, _ := io.ReadAll(io.LimitReader(conn, 64<<10))
	return nil, status, string(head) + string(body), nil
}

// exchange sends up bytes, shuts down writing, and counts the answer to EOF.
func exchange(conn net.Conn, up int) (int64, error) {
	conn.SetDeadline(time.Now().Add(ioTimeout))
	if _, err := conn.Write(make([]byte, up)); err != nil {
		return 0, err
	}
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		return 0, err
	}
	return io.Copy(io.Discard, conn)
}

// socksLogin offers username/password when the URL has credentials (no
// authentication otherwise) and completes the negotiation.
func socksLogin(conn net.Conn, user *url.Userinfo) error {
	offer := []byte{5, 1, 0}
	if user != nil {
		offer = []byte{5, 1, 2}
	}
	if _, err := conn.Write(offer); err != nil {
		return err
	}
	method := make([]byte, 2)
	if _, err := io.ReadFull(conn, method); err != nil {
		return fmt.Errorf("reading the method choice: %w", err)
	}
	if method[0] != 5 || method[1] != offer[2] {
		return fmt.Errorf("method choice %v", method)
	}
	if user == nil {
		return nil
	}
	pass, _ := user.Password()
	req := append([]byte{1, byte(len(user.Username()))}, user.Username()...)
	req = append(append(req, byte(len(pass))), pass...)
	if _, err := conn.Write(req); err != nil {
		return err
	}
	if _, err := io.ReadFull(conn, method); err != nil {
		return fmt.Errorf("reading the authentication status: %w", err)
	}
	if method[1] != 0 {
		return fmt.Errorf("authentication status %v", method)
	}
	return nil
}

func tunnelStep(target string, up int) string {
	conn, status, body, err := connectHTTP(target)
	if err != nil {
		return result(err)
	}
	if status != 200 {
		return fmt.Sprintf("status %d body=%q", status, body)
	}
	defer conn.Close()
	down, err := exchange(conn, up)
	if err != nil {
		return fmt.Sprintf("status 200 %s", result(err))
	}
	return fmt.Sprintf("status 200 down=%d", down)
}

// socksStep sends a SOCKS5 request with command cmd for target (its host
// as a domain name, or as an address when it is one) through $ALL_PROXY;
// with up >= 0 and success it then exchanges bytes as tunnelStep does.
func socksStep(target string, cmd byte, up int) string {
	addr, user, err := proxyAddr("ALL_PROXY", "socks5h")
	if err != nil {
		return result(err)
	}
	host, portText, err := net.SplitHostPort(target)
	if err != nil {
		return result(err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return result(err)
	}
	conn, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		return result(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(ioTimeout))
	if err := socksLogin(conn, user); err != nil {
		return result(err)
	}
	req := []byte{5, cmd, 0}
	if ip := net.ParseIP(host); ip == nil {
		req = append(req, 3, byte(len(host)))
		req = append(req, host...)
	} else if ip4 := ip.To4(); ip4 != nil {
		req = append(append(req, 1), ip4...)
	} else {
		req = append(append(req, 4), ip.To16()...)
	}
	req = append(req, byte(port>>8), byte(port))
	if _, err := conn.Write(req); err != nil {
		return result(err)
	}
	r := bufio.NewReader(conn)
	reply := make([]byte, 4)
	if _, err := io.ReadFull(r, reply); err != nil {
		return result(fmt.Errorf("reading the reply: %w", err))
	}
	if reply[1] != 0 || up < 0 {
		return fmt.Sprintf("reply %d", reply[1])
	}
	var skip int
	switch reply[3] {
	case 1:
		skip = 4 + 2
	case 4:
		skip = 16 + 2
	case 3:
		l, err := r.ReadByte()
		if err != nil {
			return result(err)
		}
		skip = int(l) + 2
	}
	if _, err := io.ReadFull(r, make([]byte, skip)); err != nil {
		return result(err)
	}
	if r.Buffered() > 0 {
		return "error: the proxy sent bytes before the reply ended"
	}
	down, err := exchange(conn, up)
	if err != nil {
		return fmt.Sprintf("reply 0 %s", result(err))
	}
	return fmt.Sprintf("reply 0 down=%d", down)
}

// load: see the package comment.
func load(a []string) error {
	target, dir := a[0], a[3]
	n, err := strconv.Atoi(a[1])
	if err != nil {
		return err
	}
	seq, err := strconv.Atoi(a[2])
	if err != nil {
		return err
	}
	signalFile := func(name string) error { return os.WriteFile(dir+"/"+name, nil, 0o644) }
	if err := signalFile("ready"); err != nil {
		return err
	}
	if err := waitFile(dir + "/go"); err != nil {
		return err
	}
	conns := make([]net.Conn, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conns[i], errs[i] = pingTunnel(target)
		}()
	}
	wg.Wait()
	failed := 0
	var first error
	for i, err := range errs {
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
			continue
		}
		defer conns[i].Close()
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d concurrent tunnels failed, the first: %w", failed, n, first)
	}
	if err := signalFile("held"); err != nil {
		return err
	}
	if err := waitFile(dir + "/release"); err != nil {
		return err
	}
	for _, c := range conns {
		c.Close()
	}
	for i := range seq {
		c, err := pingTunnel(target)
		if err != nil {
			return fmt.Errorf("sequential tunnel %d of %d: %w", i+1, seq, err)
		}
		c.Close()
	}
	if err := signalFile("done"); err != nil {
		return err
	}
	return waitFile(dir + "/finish")
}

// pingTunnel opens a CONNECT tunnel to an echo server and moves one byte
// each way.
func pingTunnel(target string) (net.Conn, error) {
	conn, status, body, err := connectHTTP(target)
	if err != nil {
		return nil, err
	}
	if status != 200 {
		return nil, fmt.Errorf("proxy answered %d: %q", status, body)
	}
	conn.SetDeadline(time.Now().Add(ioTimeout))
	if _, err := conn.Write([]byte("x")); err != nil {
		conn.Close()
		return nil, err
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(conn, b); err != nil {
		conn.Close()
		return nil, fmt.Errorf("reading the echo: %w", err)
	}
	conn.SetDeadline(time.Time{})
	return conn, nil
}

// unixConnect connects a Unix stream socket to path with connect(2)
// itself, so the errno is the kernel's (or the checker's) answer.
func unixConnect(path string) error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	defer unix.Close(fd)
	return os.NewSyscallError("connect", unix.Connect(fd, &unix.SockaddrUnix{Name: path}))
}

// unixSendto sends one datagram to path from an unbound datagram socket.
func unixSendto(path string) error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	defer unix.Close(fd)
	return os.NewSyscallError("sendto", unix.Sendto(fd, []byte("x"), 0, &unix.SockaddrUnix{Name: path}))
}

// unixSelf: see the package comment. The step's cwd is PATH's directory
// from then on.
func unixSelf(path string) error {
	dir, name := filepath.Dir(path), filepath.Base(path)
	if err := os.Chdir(dir); err != nil {
		return err
	}
	os.Remove(name)
	ln, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	defer unix.Close(ln)
	if err := unix.Bind(ln, &unix.SockaddrUnix{Name: name}); err != nil {
		return os.NewSyscallError("bind", err)
	}
	if err := unix.Listen(ln, 8); err != nil {
		return os.NewSyscallError("listen", err)
	}
	for _, target := range []string{path, name} {
		c, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return os.NewSyscallError("socket", err)
		}
		err = unix.Connect(c, &unix.SockaddrUnix{Name: target})
		if err == nil {
			_, err = unix.Write(c, []byte("x"))
		}
		unix.Close(c)
		if err != nil {
			return fmt.Errorf("to %s: %w", target, os.NewSyscallError("connect", err))
		}
		a, _, err := unix.Accept4(ln, unix.SOCK_CLOEXEC)
		if err != nil {
			return os.NewSyscallError("accept4", err)
		}
		b := make([]byte, 1)
		n, err := unix.Read(a, b)
		unix.Close(a)
		if err != nil || n != 1 || b[0] != 'x' {
			return fmt.Errorf("to %s: read back %q: %v", target, b[:max(n, 0)], err)
		}
	}
	return nil
}

func unixListen(path, ready string) error {
	os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	defer ln.Close()
	if err := os.Chmod(path, 0o777); err != nil {
		return err
	}
	if err := os.WriteFile(ready, nil, 0o644); err != nil {
		return err
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		c.Close()
	}
}

// pingFD writes "ping" on descriptor text and reads 4 bytes back, waiting
// at most ioTimeout.
func pingFD(text string) (string, error) {
	fd, err := strconv.Atoi(text)
	if err != nil {
		return "", err
	}
	if _, err := unix.Write(fd, []byte("ping")); err != nil {
		return "", os.NewSyscallError("write", err)
	}
	var reply []byte
	deadline := time.Now().Add(ioTimeout)
	for len(reply) < 4 {
		left := time.Until(deadline)
		if left <= 0 {
			return "", fmt.Errorf("no answer within %v (so far %q)", ioTimeout, reply)
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, int(left/time.Millisecond)+1); err != nil && err != unix.EINTR {
			return "", os.NewSyscallError("poll", err)
		}
		if pfd[0].Revents == 0 {
			continue
		}
		b := make([]byte, 4-len(reply))
		n, err := unix.Read(fd, b)
		if err != nil {
			return "", os.NewSyscallError("read", err)
		}
		if n == 0 {
			return "", fmt.Errorf("EOF after %q", reply)
		}
		reply = append(reply, b[:n]...)
	}
	return string(reply), nil
}
