package sandbox

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseCap(t *testing.T) {
	for _, name := range []string{"NET_BIND_SERVICE", "CAP_NET_BIND_SERVICE", "cap_net_bind_service", " net_bind_service "} {
		if c, err := ParseCap(name); err != nil || c != 10 {
			t.Errorf("ParseCap(%q) = %d, %v; want 10", name, c, err)
		}
	}
	for _, name := range []string{"", "CAP_", "FLY", "CAP_NET_BIND_SERVICE_X", "10"} {
		if _, err := ParseCap(name); err == nil {
			t.Errorf("ParseCap(%q) accepted", name)
		}
	}
	if CapName(10) != "CAP_NET_BIND_SERVICE" {
		t.Errorf("CapName(10) = %q", CapName(10))
	}
}

func TestParseRlimit(t *testing.T) {
	tests := []struct {
		in         string
		res        int
		soft, hard uint64
	}{
		{"RLIMIT_NOFILE=1024:4096", unix.RLIMIT_NOFILE, 1024, 4096},
		{"rlimit_nproc=50", unix.RLIMIT_NPROC, 50, 50},
		{"RLIMIT_CORE=0:unlimited", unix.RLIMIT_CORE, 0, unix.RLIM_INFINITY},
		{"RLIMIT_STACK=infinity", unix.RLIMIT_STACK, unix.RLIM_INFINITY, unix.RLIM_INFINITY},
	}
	for _, tt := range tests {
		got, err := ParseRlimit(tt.in)
		if err != nil || got != (Rlimit{tt.res, tt.soft, tt.hard}) {
			t.Errorf("ParseRlimit(%q) = %+v, %v", tt.in, got, err)
		}
	}
	for _, in := range []string{"", "RLIMIT_NOFILE", "NOFILE=1", "RLIMIT_NOFILE=", "RLIMIT_NOFILE=2:1", "RLIMIT_NOFILE=-1", "RLIMIT_NOFILE=1:2:3", "RLIMIT_FOO=1"} {
		if got, err := ParseRlimit(in); err == nil {
			t.Errorf("ParseRlimit(%q) = %+v, want error", in, got)
		}
	}
}

func TestParseStatus(t *testing.T) {
	text := "Name:\tsh\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000400\nCapEff:\t0000000000000400\n" +
		"CapBnd:\t000001ffffffffff\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t0\n"
	got, err := parseStatus(text)
	if err != nil {
		t.Fatal(err)
	}
	if got["CapPrm"] != 0x400 || got["CapBnd"] != 0x1ffffffffff || got["NoNewPrivs"] != 1 || got["CapInh"] != 0 {
		t.Fatalf("parseStatus = %v", got)
	}
	if _, err := parseStatus("CapInh:\t0\n"); err == nil {
		t.Fatal("parseStatus accepted a status without the other sets")
	}
	if _, err := parseStatus(strings.Replace(text, "0000000000000400", "xyz", 1)); err == nil {
		t.Fatal("parseStatus accepted a malformed set")
	}
}

func TestSetupErrorNamesStepErrnoAndHint(t *testing.T) {
	err := &SetupError{Step: "clone(CLONE_NEWUSER)", Err: unix.EPERM, Hint: "use --mode subreaper"}
	msg := err.Error()
	for _, want := range []string{"clone(CLONE_NEWUSER)", "EPERM", "operation not permitted", "use --mode subreaper"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
}
