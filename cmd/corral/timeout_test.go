package main

import (
	"strings"
	"testing"
	"time"
)

// --timeout is a finite number of seconds above 0 and at most a year,
// from the flag and from a settings file alike; anything else is a usage
// error naming that range.
func TestTimeoutRange(t *testing.T) {
	dir := t.TempDir()
	const want = "want seconds above 0 and at most 31536000"
	for _, v := range []string{"1e400", "-1e400", "31536001", "31536000.5", "Inf", "+Inf", "NaN", "0", "-1", "0x10", "1_0"} {
		_, err := parseRun([]string{"--timeout", v, "--", "/bin/true"}, env(nil))
		if err == nil || !strings.Contains(err.Error(), "--timeout") || !strings.Contains(err.Error(), want) {
			t.Errorf("--timeout %s: %v, want a usage error containing %q", v, err, want)
		}
	}
	for _, v := range []string{"1e400", "31536001", `"1e400"`, `"Inf"`, "0", "-5"} {
		path := writeSettings(t, dir, "s.json", `{"timeout": `+v+`}`)
		_, err := parseRun([]string{"--settings", path, "--", "/bin/true"}, env(nil))
		if err == nil || !strings.Contains(err.Error(), "--timeout") || !strings.Contains(err.Error(), want) {
			t.Errorf(`{"timeout": %s}: %v, want a usage error containing %q`, v, err, want)
		}
	}
	for v, d := range map[string]time.Duration{"31536000": 31536000 * time.Second, "0.25": 250 * time.Millisecond, "1e-9": time.Microsecond, "3.15e7": 31500000 * time.Second} {
		o, err := parseRun([]string{"--timeout", v, "--", "/bin/true"}, env(nil))
		if err != nil || o.Timeout != d {
			t.Errorf("--timeout %s: %v, %v; want %v", v, o.Timeout, err, d)
		}
	}
}

// CORRAL_TIMEOUT_SECONDS is lenient, as every variable: a value that does
// not parse is the default, no timeout, and so is an infinite one (there
// is no bound to clamp it to); one above the maximum is clamped to it.
func TestTimeoutVariableRange(t *testing.T) {
	for value, want := range map[string]time.Duration{
		"1e400": 0, "-1e400": 0, "Inf": 0, "NaN": 0, "0": 0, "-3": 0,
		"31536001": 31536000 * time.Second, "1e300": 31536000 * time.Second, " 60 ": time.Minute,
	} {
		o, err := parseRun([]string{"--", "/bin/true"}, env(map[string]string{"CORRAL_TIMEOUT_SECONDS": value}))
		if err != nil || o.Timeout != want {
			t.Errorf("CORRAL_TIMEOUT_SECONDS=%q: timeout %v, %v; want %v", value, o.Timeout, err, want)
		}
	}
}
