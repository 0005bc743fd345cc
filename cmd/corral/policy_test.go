package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParsePolicyFlags(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	o, err := parseRun([]string{"--writable", "a", "--writable", b, "--hide", "b", "--isolate-ipc", "--timeout", "0.5",
		"--die-with-parent", "--", "/bin/true"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	pol := o.Privileges.Landlock
	if !slices.Equal(pol.Writable, []string{a, b}) || !slices.Equal(pol.Hide, []string{b}) || !pol.IsolateIPC || pol.ReadOnly {
		t.Errorf("policy %+v: want writable [%s %s] made absolute, hide [%s], isolate-ipc", pol, a, b, b)
	}
	if o.Timeout != 500*time.Millisecond || !o.DieWithParent {
		t.Errorf("timeout %v die-with-parent %v", o.Timeout, o.DieWithParent)
	}

	o, err = parseRun([]string{"--read-only", "--", "/bin/true"}, env(nil))
	if err != nil || !o.Privileges.Landlock.ReadOnly || o.Timeout != 0 || o.DieWithParent {
		t.Errorf("--read-only: %+v, %v", o.Privileges.Landlock, err)
	}
}

// A malformed flag is a usage error naming it; the environment is lenient.
func TestParsePolicyErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--writable", missing}, "--writable " + missing + ": no such file or directory"},
		{[]string{"--hide", missing}, "--hide " + missing + ": no such file or directory"},
		{[]string{"--writable", ""}, "--writable"},
		{[]string{"--read-only", "--writable", dir}, "--read-only and --writable"},
		{[]string{"--hide", "/"}, "--hide /"},
		{[]string{"--timeout", "0"}, "--timeout"},
		{[]string{"--timeout", "-1"}, "--timeout"},
		{[]string{"--timeout", "soon"}, "--timeout"},
		{[]string{"--timeout", "NaN"}, "--timeout"},
	} {
		_, err := parseRun(append(tc.args, "--", "/bin/true"), env(nil))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
	for value, want := range map[string]time.Duration{
		"2.5": 2500 * time.Millisecond, " 1 ": time.Second, "0": 0, "-3": 0, "later": 0, "": 0, "1e-9": time.Microsecond,
	} {
		o, err := parseRun([]string{"--", "/bin/true"}, env(map[string]string{"CORRAL_TIMEOUT_SECONDS": value}))
		if err != nil || o.Timeout != want {
			t.Errorf("CORRAL_TIMEOUT_SECONDS=%q: timeout %v, %v; want %v", value, o.Timeout, err, want)
		}
	}
	o, err := parseRun([]string{"--timeout", "3", "--", "/bin/true"}, env(map[string]string{"CORRAL_TIMEOUT_SECONDS": "9"}))
	if err != nil || o.Timeout != 3*time.Second {
		t.Errorf("the flag must win over the environment: %v, %v", o.Timeout, err)
	}
	if env := runnerEnv([]string{"CORRAL_TIMEOUT_SECONDS=1", "KEEP=1"}); !slices.Equal(env, []string{"KEEP=1"}) {
		t.Errorf("runner environment %q: CORRAL_TIMEOUT_SECONDS must be removed", env)
	}
}

func TestWantsParentWatch(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"--die-with-parent", "--", "/bin/true"}, true},
		{[]string{"-die-with-parent", "/bin/true"}, true},
		{[]string{"--die-with-parent=true", "--", "/bin/true"}, true},
		{[]string{"--", "/bin/true", "--die-with-parent"}, false},
		{[]string{"--timeout", "1", "--", "/bin/true"}, false},
		{[]string{"die-with-parent"}, false},
	} {
		if got := wantsParentWatch(tc.args); got != tc.want {
			t.Errorf("wantsParentWatch(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}

// root.readonly of a config is --read-only, and flags win over it.
func TestConfigReadOnlyAndFlags(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, `{"root": {"path": "/", "readonly": true}}`)
	for _, tc := range []struct {
		args     []string
		readOnly bool
		writable int
	}{
		{[]string{"--config", cfg}, true, 0},
		{[]string{"--config", cfg, "--writable", dir}, false, 1},
		{[]string{"--config", cfg, "--read-only=false"}, false, 0},
	} {
		o, err := parseRun(append(tc.args, "--", "/bin/true"), noEnv)
		pol := o.Privileges.Landlock
		if err != nil || pol.ReadOnly != tc.readOnly || len(pol.Writable) != tc.writable {
			t.Errorf("%q: %+v, %v; want read-only %v and %d writable paths", tc.args, pol, err, tc.readOnly, tc.writable)
		}
	}
}
