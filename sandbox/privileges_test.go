package sandbox

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/corral-sh/corral/internal/setuperr"
	"github.com/corral-sh/corral/internal/wire"
	"github.com/corral-sh/corral/sandbox/internal/stage"

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
		if err != nil || got != (Rlimit{Resource: tt.res, Soft: tt.soft, Hard: tt.hard}) {
			t.Errorf("ParseRlimit(%q) = %+v, %v", tt.in, got, err)
		}
	}
	for _, in := range []string{"", "RLIMIT_NOFILE", "NOFILE=1", "RLIMIT_NOFILE=", "RLIMIT_NOFILE=2:1", "RLIMIT_NOFILE=-1", "RLIMIT_NOFILE=1:2:3", "RLIMIT_FOO=1"} {
		if got, err := ParseRlimit(in); err == nil {
			t.Errorf("ParseRlimit(%q) = %+v, want error", in, got)
		}
	}
}

func TestSetupErrorNamesStepErrnoAndHint(t *testing.T) {
	err := &setuperr.SetupError{Step: "clone(CLONE_NEWUSER)", Err: unix.EPERM, Hint: "use --mode subreaper"}
	msg := err.Error()
	for _, want := range []string{"clone(CLONE_NEWUSER)", "EPERM", "operation not permitted", "use --mode subreaper"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
}

// The plan is the request without what only the calling process holds:
// the writer stays behind (it is the host's stderr), and what crosses to
// the init crosses whole.
func TestPlanCrossesWithoutTheWriter(t *testing.T) {
	o := Options{Stderr: &bytes.Buffer{}, Plan: Plan{Mode: ModeAuto, Path: "/x", Args: []string{"/x", "\xff"}}}
	if err := o.Check(); err != nil {
		t.Fatal(err)
	}
	data, err := wire.Marshal(stage.InitStart{Plan: o.Plan})
	if err != nil {
		t.Fatal(err)
	}
	var back stage.InitStart
	if err := wire.Unmarshal(data, &back); err != nil || back.Plan.Path != "/x" || back.Plan.Args[1] != "\xff" || back.Plan.Mode != ModeAuto {
		t.Errorf("the plan did not cross whole: %#v, %v", back.Plan, err)
	}
	var setup *SetupError
	if err := (&Options{Plan: Plan{Mode: ModeSubreaper, Namespaces: Namespaces{IPC: true}}}).Check(); !errors.As(err, &setup) {
		t.Errorf("subreaper mode with a namespace: %v, want a SetupError", err)
	}
	var usage *UsageError
	if err := (&Options{Plan: Plan{Net: Network{Allow: []string{"https://x.test"}}}}).Check(); !errors.As(err, &usage) || usage.Flag != "--allow-net" {
		t.Errorf("a URL as --allow-net: %v, want a UsageError naming --allow-net", err)
	}
}
