package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/sandbox"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

// The seed's main test: HERMES_CLI_PROCESS_* are read, clamped, and the
// command passes through unchanged.
func TestParseRunReadsLegacyEnvironmentClamped(t *testing.T) {
	o, err := parseRun([]string{"--", "/runner", "argument"}, env(map[string]string{
		"HERMES_CLI_PROCESS_STATE_PATH":    "/tmp/configured.json",
		"HERMES_CLI_PROCESS_GRACE_SECONDS": "999",
		"HERMES_CLI_PROCESS_POLL_SECONDS":  "0",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if o.Path != "/runner" || !slices.Equal(o.Args, []string{"/runner", "argument"}) {
		t.Fatalf("command %q %q", o.Path, o.Args)
	}
	if o.StatePath != "/tmp/configured.json" || o.Grace != 30*time.Second || o.Poll != 10*time.Millisecond {
		t.Fatalf("state %q grace %v poll %v", o.StatePath, o.Grace, o.Poll)
	}
	if o.Mode != sandbox.ModeAuto {
		t.Fatalf("mode %q, want auto", o.Mode)
	}
}

func TestParseRunPrecedence(t *testing.T) {
	vars := map[string]string{
		"CORRAL_GRACE_SECONDS":             "3",
		"HERMES_CLI_PROCESS_GRACE_SECONDS": "4",
		"CORRAL_STATE_PATH":                "/a",
		"HERMES_CLI_PROCESS_STATE_PATH":    "/b",
		"CORRAL_POLL_SECONDS":              "garbage", // lenient: default
		"HERMES_CLI_PROCESS_POLL_SECONDS":  "2",
		"CORRAL_MODE":                      "subreaper",
		"CORRAL_VERBOSE":                   "1",
	}
	o, err := parseRun([]string{"--", "/bin/true"}, env(vars))
	if err != nil {
		t.Fatal(err)
	}
	if o.Grace != 3*time.Second || o.StatePath != "/a" || o.Poll != 500*time.Millisecond || o.Mode != sandbox.ModeSubreaper || !o.Verbose {
		t.Fatalf("env: grace %v state %q poll %v mode %q verbose %v", o.Grace, o.StatePath, o.Poll, o.Mode, o.Verbose)
	}
	o, err = parseRun([]string{"--grace", "1.5", "--state", "/c", "--poll", "40", "--mode", "pidns", "--", "/bin/true"}, env(vars))
	if err != nil {
		t.Fatal(err)
	}
	if o.Grace != 1500*time.Millisecond || o.StatePath != "/c" || o.Poll != 5*time.Second || o.Mode != sandbox.ModePidns {
		t.Fatalf("flags: grace %v state %q poll %v mode %q", o.Grace, o.StatePath, o.Poll, o.Mode)
	}
	vars["CORRAL_MODE"] = "nonsense"
	if o, _ = parseRun([]string{"--", "/bin/true"}, env(vars)); o.Mode != sandbox.ModeAuto {
		t.Fatalf("CORRAL_MODE=nonsense gave %q, want the default", o.Mode)
	}
}

func TestParseRunUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--"},
		{"--", "relative-runner"},
		{"--grace", "abc", "--", "/bin/true"},
		{"--grace", "NaN", "--", "/bin/true"},
		{"--poll", "", "--", "/bin/true"},
		{"--mode", "vm", "--", "/bin/true"},
		{"--net", "bridge", "--", "/bin/true"},
		{"--cap-add", "CAP_FLY", "--", "/bin/true"},
		{"--rlimit", "RLIMIT_NOFILE", "--", "/bin/true"},
		{"--no-such-flag", "--", "/bin/true"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(args, env(nil), &stdout, &stderr); code != exitUsage {
			t.Errorf("run(%q) = %d, want %d", args, code, exitUsage)
		}
		if !strings.HasPrefix(stderr.String(), "usage:") {
			t.Errorf("run(%q) stderr %q does not start with usage:", args, stderr.String())
		}
	}
}

func TestRelativeRunnerNamesThePathPATHWouldGive(t *testing.T) {
	_, err := parseRun([]string{"--", "sh"}, env(map[string]string{"PATH": "/nonexistent:/bin"}))
	if err == nil || !strings.Contains(err.Error(), "/bin/sh") {
		t.Fatalf("error %v does not name /bin/sh", err)
	}
	_, err = parseRun([]string{"--", "./sh"}, env(map[string]string{"PATH": "/bin"}))
	if err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Fatalf("a path with a slash is not looked up in PATH: %v", err)
	}
}

func TestHelpAndVersion(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"-help"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, env(nil), &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "corral [options] -- RUNNER") || stderr.Len() != 0 {
			t.Errorf("run(%q) = %d, stdout %q, stderr %q", args, code, stdout.String(), stderr.String())
		}
	}
	var stdout bytes.Buffer
	if code := run([]string{"version"}, env(nil), &stdout, &stdout); code != 0 || !strings.HasPrefix(stdout.String(), "corral ") {
		t.Errorf("version: %d %q", code, stdout.String())
	}
}

func TestRunnerEnvDropsOwnVariablesOnly(t *testing.T) {
	got := runnerEnv([]string{
		"PATH=/bin", "CORRAL_STATE_PATH=/s", "HERMES_CLI_PROCESS_GRACE_SECONDS=1", "CORRAL_MODE=pidns",
		"CORRAL_VERBOSE=1", "CORRAL_OTHER=kept", "HERMES_CLI_PROCESS_POLL_SECONDS=1", "HOME=/root",
	})
	want := []string{"PATH=/bin", "CORRAL_OTHER=kept", "HOME=/root"}
	if !slices.Equal(got, want) {
		t.Fatalf("runnerEnv = %q, want %q", got, want)
	}
}

func TestParseRunPrivileges(t *testing.T) {
	o, err := parseRun([]string{"--cap-add", "net_bind_service", "--cap-add", "CAP_CHOWN", "--allow-new-privs",
		"--rlimit", "RLIMIT_NOFILE=64:128", "--net", "none", "--", "/bin/true"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.Privileges.Keep, []int{10, 0}) || !o.Privileges.AllowNewPrivs || !o.Namespaces.Net {
		t.Fatalf("privileges %+v namespaces %+v", o.Privileges, o.Namespaces)
	}
	if len(o.Privileges.Rlimits) != 1 || o.Privileges.Rlimits[0].Soft != 64 || o.Privileges.Rlimits[0].Hard != 128 {
		t.Fatalf("rlimits %+v", o.Privileges.Rlimits)
	}
}

// A flag followed by "--" has no value: a usage error, not a state file
// named "--".
func TestFlagValueDashDash(t *testing.T) {
	for _, args := range [][]string{
		{"--state", "--", "/bin/true"},
		{"--config", "--", "/bin/true"},
		{"--grace", "--", "/bin/true"},
		{"--cap-add", "--", "/bin/true"},
		{"--rlimit", "--", "/bin/true"},
	} {
		_, err := parseRun(args, env(nil))
		if err == nil || !strings.Contains(err.Error(), args[0]+" needs a value") {
			t.Errorf("%v: want a usage error naming %s, got %v", args, args[0], err)
		}
	}
}

// A huge malformed value is named, not echoed whole.
func TestHugeValuesAreNotEchoed(t *testing.T) {
	huge := strings.Repeat("7", 100_000) + "x"
	for _, args := range [][]string{
		{"--grace", huge, "--", "/bin/true"},
		{"--poll", huge, "--", "/bin/true"},
		{"--mode", huge, "--", "/bin/true"},
		{"--net", huge, "--", "/bin/true"},
		{"--cap-add", huge, "--", "/bin/true"},
		{"--rlimit", huge, "--", "/bin/true"},
		{"--rlimit", "RLIMIT_CORE=" + huge, "--", "/bin/true"},
		{"--" + huge, "--", "/bin/true"},
		{"-v=" + huge, "--", "/bin/true"},
		{"--", huge},
	} {
		_, err := parseRun(args, env(nil))
		if err == nil {
			t.Errorf("%.20s...: accepted", args[0])
			continue
		}
		if len(err.Error()) > 400 || !strings.Contains(err.Error(), "bytes") {
			t.Errorf("%.20s...: a %d-byte message: %.200s", args[0], len(err.Error()), err)
		}
	}
}

// A clamped or unparsable timing value is noted for -v, once.
func TestClampNotes(t *testing.T) {
	_, notes, err := parseRunNoted([]string{"--grace", "45", "--poll", "0.001", "--", "/bin/true"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`--grace "45" is above the maximum: using 30`, `--poll "0.001" is below the minimum: using 0.01`}
	if !slices.Equal(notes, want) {
		t.Errorf("notes %q, want %q", notes, want)
	}
	_, notes, _ = parseRunNoted([]string{"--", "/bin/true"}, env(map[string]string{"CORRAL_GRACE_SECONDS": "abc"}))
	if len(notes) != 1 || !strings.Contains(notes[0], `CORRAL_GRACE_SECONDS="abc" is not a number of seconds: using the default 10`) {
		t.Errorf("notes %q", notes)
	}
	if _, notes, _ = parseRunNoted([]string{"--grace", "5", "--", "/bin/true"}, env(nil)); len(notes) != 0 {
		t.Errorf("a value in bounds is noted: %q", notes)
	}
}

// CORRAL_NET_LOG exported for every run names where a run with a proxy
// logs; a run without --allow-net is not a usage error because of it.
func TestNetLogVariableWithoutProxyIsIgnored(t *testing.T) {
	lookup := func(name string) (string, bool) {
		if name == "CORRAL_NET_LOG" {
			return "/tmp/net.log", true
		}
		return "", false
	}
	o, err := parseRun([]string{"--", "/bin/true"}, lookup)
	if err != nil || o.Net.LogPath != "" {
		t.Fatalf("plain run with CORRAL_NET_LOG set: %v, log %q", err, o.Net.LogPath)
	}
	o, err = parseRun([]string{"--allow-net", "example.test", "--", "/bin/true"}, lookup)
	if err != nil || o.Net.LogPath != "/tmp/net.log" {
		t.Fatalf("run with a proxy and CORRAL_NET_LOG set: %v, log %q", err, o.Net.LogPath)
	}
	if _, err := parseRun([]string{"--net-log", "/tmp/x", "--", "/bin/true"}, lookup); err == nil {
		t.Fatal("--net-log without a policy: want a usage error")
	}
	// --log is its name; --net-log the other; both at once is one too many.
	for _, args := range [][]string{{"--log", "/tmp/x", "--read-only"}, {"--net-log", "/tmp/x", "--net", "none"}} {
		o, err := parseRun(append(args, "--", "/bin/true"), lookup)
		if err != nil || o.Net.LogPath != "/tmp/x" {
			t.Errorf("%q: %v, log %q; want /tmp/x", args, err, o.Net.LogPath)
		}
	}
	if _, err := parseRun([]string{"--log", "/a", "--net-log", "/b", "--read-only", "--", "/bin/true"}, lookup); err == nil {
		t.Error("--log and --net-log together: want a usage error")
	}
}
