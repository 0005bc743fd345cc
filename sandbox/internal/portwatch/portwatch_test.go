package portwatch

import (
	"net"
	"strconv"
	"testing"
)

func freePort(t *testing.T) uint16 {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return uint16(l.Addr().(*net.TCPAddr).Port)
}

func TestLook(t *testing.T) {
	w, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	p4, p6, pAny, pAny6, pNone := freePort(t), freePort(t), freePort(t), freePort(t), freePort(t)
	for _, c := range []struct {
		network, addr string
		port          uint16
	}{{"tcp", "127.0.0.1", p4}, {"tcp", "::1", p6}, {"tcp", "0.0.0.0", pAny}, {"tcp6", "::", pAny6}} {
		l, err := net.Listen(c.network, net.JoinHostPort(c.addr, itoa(c.port)))
		if err != nil {
			t.Skipf("listen on %s: %v", c.addr, err)
		}
		defer l.Close()
	}
	got, err := w.Look([]uint16{p4, p6, pAny, pAny6, pNone})
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint16]State{p4: {V4: true}, p6: {V6: true}, pAny: {V4: true, V6: true}, pAny6: {V6: true}, pNone: {}}
	for p, s := range want {
		if got[p] != s {
			t.Errorf("port %d: %+v, want %+v", p, got[p], s)
		}
	}
}

// A closed listener is gone at the next look.
func TestLookAfterClose(t *testing.T) {
	w, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	port := freePort(t)
	l, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := w.Look([]uint16{port}); err != nil || !got[port].V4 {
		t.Errorf("listening: %+v, %v", got[port], err)
	}
	l.Close()
	if got, err := w.Look([]uint16{port}); err != nil || got[port].Listening() {
		t.Errorf("closed: %+v, %v", got[port], err)
	}
}

func itoa(p uint16) string { return strconv.Itoa(int(p)) }
