package bounds

import (
	"math"
	"strings"
	"testing"
	"time"
)

// env builds a lookup over a fixed map, standing in for os.LookupEnv.
func env(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

const seedVar = "SUPERVISOR_FLOAT"

// TestSeedBoundedFloat mirrors the Python supervisor's _bounded_float cases exactly
// (default 2, bounds [1, 3]).
func TestSeedBoundedFloat(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  float64
	}{
		{"invalid", 2},
		{"99", 3},
		{"-1", 1},
		{"2.5", 2.5},
	} {
		got, err := Float("", false, []string{seedVar}, env(map[string]string{seedVar: tc.value}), 2, 1, 3)
		if err != nil || got != tc.want {
			t.Errorf("env %q: got %v, %v; want %v, nil", tc.value, got, err, tc.want)
		}
	}
}

func TestFloatEnv(t *testing.T) {
	names := []string{"CORRAL_GRACE_SECONDS", "HERMES_CLI_PROCESS_GRACE_SECONDS"}
	for _, tc := range []struct {
		name string
		vars map[string]string
		want float64
	}{
		{"nothing set", nil, 10},
		{"legacy only", map[string]string{"HERMES_CLI_PROCESS_GRACE_SECONDS": "3"}, 3},
		{"corral wins over legacy", map[string]string{"CORRAL_GRACE_SECONDS": "4", "HERMES_CLI_PROCESS_GRACE_SECONDS": "3"}, 4},
		{"empty is unset", map[string]string{"CORRAL_GRACE_SECONDS": "", "HERMES_CLI_PROCESS_GRACE_SECONDS": "3"}, 3},
		// The first set name wins even when it is malformed: falling through
		// to the legacy name would make a typo silently pick another value.
		{"malformed first name gives default", map[string]string{"CORRAL_GRACE_SECONDS": "abc", "HERMES_CLI_PROCESS_GRACE_SECONDS": "3"}, 10},
		{"HERMES manifest 999 clamps", map[string]string{"HERMES_CLI_PROCESS_GRACE_SECONDS": "999"}, 30},
		{"below min clamps", map[string]string{"CORRAL_GRACE_SECONDS": "-5"}, 0},
		{"whitespace tolerated", map[string]string{"CORRAL_GRACE_SECONDS": " 7\n"}, 7},
		{"NaN gives default", map[string]string{"CORRAL_GRACE_SECONDS": "NaN"}, 10},
		{"Inf gives default", map[string]string{"CORRAL_GRACE_SECONDS": "Inf"}, 10},
		{"-infinity gives default", map[string]string{"CORRAL_GRACE_SECONDS": "-infinity"}, 10},
		{"unit suffix gives default", map[string]string{"CORRAL_GRACE_SECONDS": "10s"}, 10},
		{"hex gives default", map[string]string{"CORRAL_GRACE_SECONDS": "0x1p2"}, 10},
		{"overflow clamps", map[string]string{"CORRAL_GRACE_SECONDS": "1e999"}, 30},
		{"exponent", map[string]string{"CORRAL_GRACE_SECONDS": "1e1"}, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Float("", false, names, env(tc.vars), 10, 0, 30)
			if err != nil || got != tc.want {
				t.Fatalf("got %v, %v; want %v, nil", got, err, tc.want)
			}
		})
	}
}

func TestFloatFlag(t *testing.T) {
	names := []string{"CORRAL_POLL_SECONDS"}
	vars := env(map[string]string{"CORRAL_POLL_SECONDS": "2"})
	for _, tc := range []struct {
		flag string
		want float64
	}{
		{"0.5", 0.5},
		{"1", 1},
		{"1e-2", 0.01},
		{"+3.", 3},
		{".25", 0.25},
		{"99", 5},
		{"-1", 0.01},
		{"0", 0.01},
		{"1e999", 5},
	} {
		got, err := Float(tc.flag, true, names, vars, 0.5, 0.01, 5)
		if err != nil || got != tc.want {
			t.Errorf("flag %q: got %v, %v; want %v, nil (flag must win over env)", tc.flag, got, err, tc.want)
		}
	}
}

func TestFloatFlagMalformed(t *testing.T) {
	for _, flag := range []string{"", "abc", "NaN", "nan", "Inf", "+Inf", "-inf", "infinity", "10s", " 1", "1 ", "1e", "e1", ".", "-", "1_000", "0x10", "1.2.3", "１"} {
		got, err := Float(flag, true, nil, env(nil), 10, 0, 30)
		if err == nil {
			t.Errorf("flag %q: got %v, nil; want an error", flag, got)
			continue
		}
		want := `invalid value "` + flag + `": want seconds between 0 and 30`
		if err.Error() != want {
			t.Errorf("flag %q: error %q, want %q", flag, err, want)
		}
		if got < 0 || got > 30 {
			t.Errorf("flag %q: result %v out of bounds even on error", flag, got)
		}
	}
}

func TestFloatErrorNamesFractionalBounds(t *testing.T) {
	_, err := Float("x", true, nil, nil, 0.5, 0.01, 5)
	if err == nil || !strings.Contains(err.Error(), "between 0.01 and 5") {
		t.Fatalf("error %v does not name the bounds as typed", err)
	}
}

func TestFloatNilLookup(t *testing.T) {
	got, err := Float("", false, []string{"X"}, nil, 2, 1, 3)
	if err != nil || got != 2 {
		t.Fatalf("got %v, %v; want 2, nil", got, err)
	}
}

func TestClamp(t *testing.T) {
	for _, tc := range []struct{ v, want float64 }{
		{-1, 0}, {0, 0}, {5, 5}, {30, 30}, {31, 30},
		{math.Inf(1), 30}, {math.Inf(-1), 0}, {math.NaN(), 0},
	} {
		if got := Clamp(tc.v, 0, 30); got != tc.want {
			t.Errorf("Clamp(%v) = %v, want %v", tc.v, got, tc.want)
		}
	}
}

func TestSeconds(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want time.Duration
	}{
		{0, 0},
		{0.5, 500 * time.Millisecond},
		{0.01, 10 * time.Millisecond},
		{10, 10 * time.Second},
		{1e-7, 0},
		{0.0000006, time.Microsecond},
		{math.NaN(), 0},
		{math.Inf(1), math.MaxInt64},
		{math.Inf(-1), math.MinInt64},
		{1e300, math.MaxInt64},
	} {
		if got := Seconds(tc.v); got != tc.want {
			t.Errorf("Seconds(%v) = %v, want %v", tc.v, got, tc.want)
		}
	}
}

func TestBool(t *testing.T) {
	for v, want := range map[string]bool{
		"1": true, "true": true, "TRUE": true, "Yes": true, "on": true, " on\n": true,
		"": false, "0": false, "false": false, "no": false, "off": false, "2": false, "y": false, "enabled": false,
	} {
		if got := Bool(v); got != want {
			t.Errorf("Bool(%q) = %v, want %v", v, got, want)
		}
	}
}

// FuzzFloat checks the invariants callers rely on: the env path never fails
// and never escapes the bounds; the flag path either fails or stays in them,
// and accepts nothing that strconv would not call a finite-or-overflowing
// decimal.
func FuzzFloat(f *testing.F) {
	for _, s := range []string{"", "0", "0.5", "99", "-1", "invalid", "NaN", "Inf", "1e999", "-1e-999", "10s", " 3 ", ".", "1e", "0x1p3", "1_0"} {
		f.Add(s, true)
		f.Add(s, false)
	}
	const def, lo, hi = 10.0, 0.0, 30.0
	f.Fuzz(func(t *testing.T, value string, asFlag bool) {
		lookup := env(map[string]string{"A": value, "B": "5"})
		got, err := Float(value, asFlag, []string{"A", "B"}, lookup, def, lo, hi)
		if !asFlag && err != nil {
			t.Fatalf("env %q: unexpected error %v", value, err)
		}
		if err == nil && !(got >= lo && got <= hi) {
			t.Fatalf("%q (flag=%v): result %v outside [%v, %v]", value, asFlag, got, lo, hi)
		}
		if !asFlag && value == "" && got != 5 {
			t.Fatalf("empty A must fall through to B, got %v", got)
		}
		if asFlag && err == nil {
			lower := strings.ToLower(value)
			if strings.Contains(lower, "inf") || strings.Contains(lower, "nan") || strings.ContainsAny(value, "x_ \t\n") {
				t.Fatalf("flag %q accepted as %v", value, got)
			}
		}
		if err != nil && !strings.Contains(err.Error(), "want seconds between 0 and 30") {
			t.Fatalf("error %q does not name the bounds", err)
		}
	})
}
