package proc

import "testing"

func TestParseStatus(t *testing.T) {
	got := ParseStatus("Name:\tcorral\nSeccomp:\t2\nno colon here\nCapEff:\t0000000000000400\n\nNoNewPrivs:  1 \n")
	want := map[string]string{"Name": "corral", "Seccomp": "2", "CapEff": "0000000000000400", "NoNewPrivs": "1"}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
}

func TestReadStatusOfSelf(t *testing.T) {
	fields, err := ReadStatus("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"Name", "Pid", "CapEff", "SigBlk"} {
		if fields[k] == "" {
			t.Errorf("/proc/self/status has no %s: %q", k, fields)
		}
	}
}
