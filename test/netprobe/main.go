// Command netprobe reports the network a process sees, for corral's
// integration tests (test/config_test.go): the interfaces and their flags
// (from the kernel over netlink, so the answer is this process's network
// namespace, unlike /sys/class/net, which shows the namespace of whoever
// mounted /sys), whether a TCP connect to -dial succeeds, and whether it can
// listen and connect on its own 127.0.0.1.
//
// Output, one KEY=VALUE a line:
//
//	iface=NAME flags=FLAGS   one line per interface
//	dial=ok | dial=error: REASON
//	self=ok | self=error: REASON
//
// -marker is ignored: it only puts the test's marker in the command line,
// so the test can prove no netprobe survives.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

func main() {
	flag.String("marker", "", "ignored; carried in the command line")
	dial := flag.String("dial", "", "TCP address to try to connect to")
	flag.Parse()
	ifaces, err := net.Interfaces()
	if err != nil {
		fmt.Fprintf(os.Stderr, "netprobe: interfaces: %v\n", err)
		os.Exit(1)
	}
	for _, i := range ifaces {
		fmt.Printf("iface=%s flags=%s\n", i.Name, i.Flags)
	}
	if *dial != "" {
		fmt.Printf("dial=%s\n", result(tryDial(*dial)))
	}
	fmt.Printf("self=%s\n", result(selfConnect()))
}

func result(err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return "ok"
}

func tryDial(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return err
	}
	return conn.Close()
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
