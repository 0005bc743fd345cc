package egress

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkSetup's client and server are processes of their own (this
// test binary again, benchRole naming which): a real client is another
// process than corral, and a real server another again, whose wake-ups
// are the kernel's. With the three of them in one Go runtime, every hop
// through the proxy also waited for the one scheduler of all three.
const benchRole = "CORRAL_EGRESS_BENCH_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(benchRole) {
	case "echo":
		benchEchoServer()
	case "client":
		benchClient()
	default:
		os.Exit(m.Run())
	}
	os.Exit(0)
}

// benchEchoServer serves echo on a loopback port it prints, until its
// stdin closes.
func benchEchoServer() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println(l.Addr())
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { echo(c); c.Close() }()
		}
	}()
	io.Copy(io.Discard, os.Stdin)
}

// benchClient makes one connection per line of its stdin, as the line
// says ("WAY ADDR [ARG]"), and answers with the nanoseconds from its
// connect to the echo of its byte, or "error: …".
func benchClient() {
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		t0 := time.Now()
		err := clientOp(f)
		d := time.Since(t0)
		if err != nil {
			fmt.Println("error:", err)
			continue
		}
		fmt.Println(d.Nanoseconds())
	}
}

func clientOp(f []string) error {
	if len(f) < 2 {
		return fmt.Errorf("bad request %q", f)
	}
	c, err := net.Dial("tcp", f[1])
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(hangLimit))
	var r io.Reader = c
	switch f[0] {
	case "connect": // ADDR TARGET AUTH-HEADER-VALUE
		if _, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nProxy-Authorization: %s\r\n\r\n", f[2], strings.Join(f[3:], " ")); err != nil {
			return err
		}
		br := bufio.NewReader(c)
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return err
			}
			if len(line) == 2 {
				break
			}
		}
		r = br
	case "socks5": // ADDR TARGET USER:PASS
		user, pass, _ := strings.Cut(f[3], ":")
		target := netip.MustParseAddrPort(f[2])
		req := append([]byte{5, 1, 2, 1, byte(len(user))}, user...)
		req = append(append(req, byte(len(pass))), pass...)
		a := target.Addr().As4()
		req = append(append(req, 5, 1, 0, socksAtypIPv4), a[:]...)
		req = binary.BigEndian.AppendUint16(req, target.Port())
		if _, err := c.Write(req); err != nil {
			return err
		}
		var reply [14]byte
		if _, err := io.ReadFull(c, reply[:]); err != nil {
			return err
		}
		if reply[1] != 2 || reply[3] != 0 || reply[5] != 0 {
			return fmt.Errorf("SOCKS5 reply % x", reply)
		}
	}
	trips := 1
	if f[0] == "direct-round-trip" {
		trips = 2
	}
	for range trips {
		if _, err := c.Write([]byte{'x'}); err != nil {
			return err
		}
		if _, err := io.ReadFull(r, make([]byte, 1)); err != nil {
			return err
		}
	}
	return nil
}

// benchProc is a process of benchRole, its stdin and stdout.
type benchProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

// startBenchProc starts role; the benchmark's cleanup ends it.
func startBenchProc(b *testing.B, role string) *benchProc {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), benchRole+"="+role)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		in.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(hangLimit):
			cmd.Process.Kill()
			<-done
		}
	})
	return &benchProc{cmd: cmd, in: in, out: bufio.NewScanner(out)}
}

// line reads the process's next line.
func (p *benchProc) line(b *testing.B) string {
	if !p.out.Scan() {
		b.Fatalf("the %s process ended: %v", p.cmd.Env[len(p.cmd.Env)-1], p.out.Err())
	}
	s := p.out.Text()
	if rest, ok := strings.CutPrefix(s, "error: "); ok {
		b.Fatal(errors.New(rest))
	}
	return s
}

// timed has the client process make one connection and returns how long
// the client saw it take.
func (p *benchProc) timed(b *testing.B, req string) time.Duration {
	if _, err := io.WriteString(p.in, req+"\n"); err != nil {
		b.Fatal(err)
	}
	ns, err := strconv.ParseInt(p.line(b), 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return time.Duration(ns)
}
