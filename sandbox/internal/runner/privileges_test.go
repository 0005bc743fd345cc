package runner

import (
	"strings"
	"testing"
)

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

// TracerPid is read with the sets, for forkHeld; a status without it
// (not a kernel's) reads as untraced rather than failing the run.
func TestParseStatusTracer(t *testing.T) {
	sets := "CapInh:\t0\nCapPrm:\t0\nCapEff:\t0\nCapBnd:\t0\nCapAmb:\t0\nNoNewPrivs:\t1\n"
	for text, want := range map[string]uint64{sets + "TracerPid:\t4242\n": 4242, sets + "TracerPid:\t0\n": 0, sets: 0} {
		got, err := parseStatus(text)
		if err != nil || got["TracerPid"] != want {
			t.Errorf("parseStatus(%q) TracerPid = %d, %v; want %d", text, got["TracerPid"], err, want)
		}
	}
}
