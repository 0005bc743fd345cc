package main

// Commands for the tests of UDP in subreaper mode (issue 34):
//
//	udp-get URL                    resolve URL's host with Go's own resolver
//	                               (this program is built with CGO_ENABLED=0:
//	                               static, the pure Go resolver reading
//	                               /etc/resolv.conf) and GET URL directly,
//	                               reading no proxy variable; print the body,
//	                               or "error: ..." and exit 1
//	udp-try OP...                  attempt each OP, print "OP=ok" or
//	                               "OP=ERRNO" a line each. OPs (ADDR is an
//	                               IPv4 address):
//	                                 sendto:ADDR:PORT (a datagram with the
//	                                 address on an unconnected socket, as
//	                                 musl's resolver sends its queries),
//	                                 connect:ADDR:PORT (a UDP connect),
//	                                 sendmsg:ADDR:PORT (sendmsg with the
//	                                 address, on an unconnected socket),
//	                                 undevice (take a UDP socket off the
//	                                 device it is bound to)
//	udp-toctou NS:53 SINK:PORT N   connect a UDP socket to NS:53 (corral's
//	                               responder takes it), then N times sendmsg a
//	                               DNS query with msg_name NS:53 while another
//	                               thread flips those bytes between NS:53 and
//	                               SINK:PORT; print "ok=A refused=R other=O"

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func cmdUDPGet(fs *flag.FlagSet) func(*common) error {
	return func(c *common) error {
		if err := c.setup(false); err != nil {
			return err
		}
		if len(c.args) != 1 {
			return errors.New("udp-get URL")
		}
		resolver := &net.Resolver{PreferGo: true}
		dialer := &net.Dialer{Timeout: 10 * time.Second, Resolver: resolver}
		client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
			Proxy:       nil, // no proxy variable is read
			DialContext: dialer.DialContext,
		}}
		resp, err := client.Get(c.args[0])
		if err != nil {
			fmt.Printf("error: %v\n", err)
			os.Exit(1)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			fmt.Printf("error: %v\n", err)
			os.Exit(1)
		}
		fmt.Print(string(body))
		return nil
	}
}

func cmdUDPTry(fs *flag.FlagSet) func(*common) error {
	return func(c *common) error {
		if err := c.setup(false); err != nil {
			return err
		}
		var out strings.Builder
		for _, op := range c.args {
			fmt.Fprintf(&out, "%s=%s\n", op, errnoName(udpTry(op)))
		}
		_, err := os.Stdout.WriteString(out.String())
		return err
	}
}

// dnsQuery is a query for example.test's A record.
var dnsQuery = []byte{0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0,
	7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 4, 't', 'e', 's', 't', 0, 0, 1, 0, 1}

func udpTry(op string) error {
	verb, arg, _ := strings.Cut(op, ":")
	if verb == "undevice" {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.SetsockoptString(fd, unix.SOL_SOCKET, unix.SO_BINDTODEVICE, "")
	}
	ap, err := netip.ParseAddrPort(arg)
	if err != nil {
		return err
	}
	sa := &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	switch verb {
	case "sendto":
		return unix.Sendto(fd, dnsQuery, 0, sa)
	case "connect":
		return unix.Connect(fd, sa)
	case "sendmsg":
		_, err := unix.SendmsgN(fd, dnsQuery, nil, sa, 0)
		return err
	}
	return fmt.Errorf("unknown op %q", verb)
}

// sockaddr4 is a raw sockaddr_in for ap.
func sockaddr4(ap netip.AddrPort) []byte {
	b := make([]byte, unix.SizeofSockaddrInet4)
	binary.NativeEndian.PutUint16(b, unix.AF_INET)
	binary.BigEndian.PutUint16(b[2:], ap.Port())
	a := ap.Addr().As4()
	copy(b[4:], a[:])
	return b
}

func cmdUDPToctou(fs *flag.FlagSet) func(*common) error {
	return func(c *common) error {
		if err := c.setup(false); err != nil {
			return err
		}
		if len(c.args) != 3 {
			return errors.New("udp-toctou NS:53 SINK:PORT N")
		}
		ns, err := netip.ParseAddrPort(c.args[0])
		if err != nil {
			return err
		}
		sink, err := netip.ParseAddrPort(c.args[1])
		if err != nil {
			return err
		}
		var n int
		if _, err := fmt.Sscan(c.args[2], &n); err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("socket: %w", err)
		}
		defer unix.Close(fd)
		if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: ns.Addr().As4(), Port: int(ns.Port())}); err != nil {
			return fmt.Errorf("connect %s: %w", ns, err)
		}
		// Drain the answers, so that the socket's queue never fills.
		go func() {
			buf := make([]byte, 512)
			for {
				if _, err := unix.Read(fd, buf); err != nil && err != unix.EINTR {
					return
				}
			}
		}()
		good, bad := sockaddr4(ns), sockaddr4(sink)
		name := make([]byte, len(good))
		copy(name, good)
		iov := unix.Iovec{Base: &dnsQuery[0]}
		iov.SetLen(len(dnsQuery))
		hdr := unix.Msghdr{Name: &name[0], Namelen: uint32(len(name)), Iov: &iov}
		hdr.SetIovlen(1)
		var stop atomic.Bool
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // another thread rewrites the address all along
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				src := good
				if i&1 == 1 {
					src = bad
				}
				for j := range name {
					*(*byte)(unsafe.Pointer(&name[j])) = src[j]
				}
			}
		}()
		var ok, refused, other int
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for i := 0; i < n && ctx.Err() == nil; i++ {
			_, _, e := unix.Syscall(unix.SYS_SENDMSG, uintptr(fd), uintptr(unsafe.Pointer(&hdr)), 0)
			switch e {
			case 0:
				ok++
			case unix.EACCES:
				refused++
			default:
				other++
			}
		}
		stop.Store(true)
		wg.Wait()
		fmt.Printf("ok=%d refused=%d other=%d\n", ok, refused, other)
		return nil
	}
}
