package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"time"
)

// egressns is a client with Go's own resolver (this program is built with
// CGO_ENABLED=0: the pure-Go resolver, which reads /etc/resolv.conf and
// asks the nameserver over a connected UDP socket) and no proxy support:
// the transparent-egress tests' static Go binary (test/egress_ns_test.go).
//
//	egressns -get HOST:PORT/PATH   GET over HTTP/1.0, print the body
//	egressns -echo HOST:PORT       send -line, print the line that comes back
//	egressns -lookup NAME          print the addresses Go's resolver finds
func cmdEgressNS(fs *flag.FlagSet) func(*common) error {
	get := fs.String("get", "", "HOST:PORT/PATH to GET")
	echo := fs.String("echo", "", "HOST:PORT of a line-echo server")
	line := fs.String("line", "ping", "the line -echo sends")
	lookup := fs.String("lookup", "", "a name to resolve")
	v6first := fs.Bool("v6first", false, "-get: try the name's IPv6 addresses first, then its IPv4 ones, one at a time, as many clients do")
	return func(c *common) error {
		if err := c.setup(false); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var r net.Resolver // PreferGo is what a CGO_ENABLED=0 build has anyway
		r.PreferGo = true
		d := net.Dialer{Resolver: &r}
		switch {
		case *lookup != "":
			addrs, err := r.LookupHost(ctx, *lookup)
			if err != nil {
				return err
			}
			fmt.Println(strings.Join(addrs, " "))
		case *get != "":
			hostport, path, _ := strings.Cut(*get, "/")
			dial := d.DialContext
			if *v6first {
				dial = func(ctx context.Context, network, hostport string) (net.Conn, error) {
					return dialInOrder(ctx, &r, hostport)
				}
			}
			conn, err := dial(ctx, "tcp", hostport)
			if err != nil {
				return err
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			host, _, _ := net.SplitHostPort(hostport)
			if _, err := fmt.Fprintf(conn, "GET /%s HTTP/1.0\r\nHost: %s\r\n\r\n", path, host); err != nil {
				return err
			}
			resp, err := io.ReadAll(conn)
			if err != nil {
				return err
			}
			_, body, ok := strings.Cut(string(resp), "\r\n\r\n")
			if !ok {
				return fmt.Errorf("no HTTP answer: %q", resp)
			}
			fmt.Print(body)
		case *echo != "":
			conn, err := d.DialContext(ctx, "tcp", *echo)
			if err != nil {
				return err
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := fmt.Fprintln(conn, *line); err != nil {
				return err
			}
			got, err := bufio.NewReader(conn).ReadString('\n')
			if err != nil {
				return err
			}
			fmt.Print(got)
		default:
			return fmt.Errorf("egressns: give -get, -echo or -lookup")
		}
		return nil
	}
}

// dialInOrder connects to the IPv6 addresses of hostport's name, then to
// its IPv4 ones, one after the other, until one connects: a client that
// goes on to the next address only when a connect fails.
func dialInOrder(ctx context.Context, r *net.Resolver, hostport string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, err
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	sort.SliceStable(addrs, func(i, j int) bool { return addrs[i].Is6() && !addrs[j].Is6() })
	var d net.Dialer
	err = fmt.Errorf("%s has no address", host)
	for _, a := range addrs {
		var c net.Conn
		if c, err = d.DialContext(ctx, "tcp", net.JoinHostPort(a.String(), port)); err == nil {
			return c, nil
		}
	}
	return nil, err
}
