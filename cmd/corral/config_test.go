package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/corral-sh/corral/sandbox"
	"github.com/moby/sys/capability"
	"golang.org/x/sys/unix"
)

func noEnv(string) (string, bool) { return "", false }

// writeConfig writes a config.json for one test and returns its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const fullConfig = `{
	"ociVersion": "1.3.0",
	"process": {
		"args": ["/bin/echo", "from", "config"],
		"env": ["ONLY=this"],
		"cwd": "/tmp",
		"capabilities": {"bounding": ["CAP_KILL"], "effective": ["CAP_KILL"], "inheritable": ["CAP_KILL"],
			"permitted": ["CAP_KILL"], "ambient": ["CAP_KILL"]},
		"rlimits": [{"type": "RLIMIT_NOFILE", "soft": 100, "hard": 200}, {"type": "RLIMIT_NPROC", "soft": 300, "hard": 400}],
		"noNewPrivileges": true
	},
	"hostname": "box",
	"linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}, {"type": "uts"}, {"type": "network"}]}
}`

func TestConfigSetsTheOptions(t *testing.T) {
	o, err := parseRun([]string{"--config", writeConfig(t, fullConfig)}, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if o.Path != "/bin/echo" || !slices.Equal(o.Args, []string{"/bin/echo", "from", "config"}) {
		t.Errorf("command %q %q", o.Path, o.Args)
	}
	if !slices.Equal(o.Env, []string{"ONLY=this"}) {
		t.Errorf("env %q: process.env must replace the inherited environment", o.Env)
	}
	if o.Dir != "/tmp" {
		t.Errorf("dir %q", o.Dir)
	}
	want := sandbox.Privileges{Keep: []int{int(capability.CAP_KILL)}, Rlimits: []sandbox.Rlimit{
		{Resource: unix.RLIMIT_NOFILE, Soft: 100, Hard: 200}, {Resource: unix.RLIMIT_NPROC, Soft: 300, Hard: 400}}}
	if !reflect.DeepEqual(o.Privileges, want) {
		t.Errorf("privileges %+v, want %+v", o.Privileges, want)
	}
	if ns := (sandbox.Namespaces{PID: true, UTS: true, Net: true, Hostname: "box"}); o.Namespaces != ns {
		t.Errorf("namespaces %+v, want %+v", o.Namespaces, ns)
	}
	if o.Mode != sandbox.ModeAuto {
		t.Errorf("mode %q: the config does not set the mode", o.Mode)
	}
}

func TestFlagsOverrideTheConfig(t *testing.T) {
	cfg := writeConfig(t, strings.Replace(fullConfig, `"args": ["/bin/echo", "from", "config"],`, "", 1))
	nofile := sandbox.Rlimit{Resource: unix.RLIMIT_NOFILE, Soft: 7, Hard: 8}
	nproc := sandbox.Rlimit{Resource: unix.RLIMIT_NPROC, Soft: 300, Hard: 400}
	core := sandbox.Rlimit{Resource: unix.RLIMIT_CORE, Soft: 0, Hard: 0}
	for _, tc := range []struct {
		name  string
		flags []string
		check func(o sandbox.Options) error
	}{
		{"--cap-add replaces the config's capabilities", []string{"--cap-add", "NET_RAW", "--cap-add", "CHOWN"}, func(o sandbox.Options) error {
			if want := []int{int(capability.CAP_NET_RAW), int(capability.CAP_CHOWN)}; !slices.Equal(o.Privileges.Keep, want) {
				return fmt.Errorf("keep %v, want %v", o.Privileges.Keep, want)
			}
			return nil
		}},
		{"without --cap-add the config's capabilities stay", nil, func(o sandbox.Options) error {
			if want := []int{int(capability.CAP_KILL)}; !slices.Equal(o.Privileges.Keep, want) {
				return fmt.Errorf("keep %v, want %v", o.Privileges.Keep, want)
			}
			return nil
		}},
		{"--allow-new-privs overrides noNewPrivileges", []string{"--allow-new-privs"}, func(o sandbox.Options) error {
			if !o.Privileges.AllowNewPrivs {
				return fmt.Errorf("no_new_privs still set")
			}
			return nil
		}},
		{"--rlimit overrides the same limit and keeps the others", []string{"--rlimit", "RLIMIT_NOFILE=7:8", "--rlimit", "RLIMIT_CORE=0"}, func(o sandbox.Options) error {
			if want := []sandbox.Rlimit{nproc, nofile, core}; !slices.Equal(o.Privileges.Rlimits, want) {
				return fmt.Errorf("rlimits %v, want %v", o.Privileges.Rlimits, want)
			}
			return nil
		}},
		{"--net host removes the config's network namespace", []string{"--net", "host"}, func(o sandbox.Options) error {
			if o.Namespaces.Net || !o.Namespaces.PID || !o.Namespaces.UTS {
				return fmt.Errorf("namespaces %+v", o.Namespaces)
			}
			return nil
		}},
		{"--mode stays a flag", []string{"--mode", "pidns"}, func(o sandbox.Options) error {
			if o.Mode != sandbox.ModePidns {
				return fmt.Errorf("mode %q", o.Mode)
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Flags before and after --config: the order on the command
			// line does not matter, flags always win.
			for _, args := range [][]string{
				append(append([]string{"--config", cfg}, tc.flags...), "--", "/bin/true"),
				append(append(slices.Clone(tc.flags), "--config", cfg), "--", "/bin/true"),
			} {
				o, err := parseRun(args, noEnv)
				if err != nil {
					t.Fatalf("%q: %v", args, err)
				}
				if err := tc.check(o); err != nil {
					t.Errorf("%q: %v", args, err)
				}
				if o.Path != "/bin/true" || !slices.Equal(o.Env, []string{"ONLY=this"}) || o.Dir != "/tmp" {
					t.Errorf("%q: command %q env %q dir %q", args, o.Args, o.Env, o.Dir)
				}
			}
		})
	}
}

func TestNetNoneAddsToAConfigWithoutNamespaces(t *testing.T) {
	o, err := parseRun([]string{"--net", "none", "--config", writeConfig(t, `{"process": {"args": ["/bin/true"]}}`)}, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if o.Namespaces != (sandbox.Namespaces{Net: true}) {
		t.Errorf("namespaces %+v", o.Namespaces)
	}
	if o.Privileges.AllowNewPrivs || len(o.Privileges.Keep) != 0 {
		t.Errorf("a config without capabilities or noNewPrivileges changed the defaults: %+v", o.Privileges)
	}
}

func TestConfigWithoutEnvInheritsTheEnvironment(t *testing.T) {
	o, err := parseRun([]string{"--config", writeConfig(t, `{"process": {"args": ["/bin/true"]}}`)}, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if want := runnerEnv(os.Environ()); !slices.Equal(o.Env, want) {
		t.Errorf("env %q, want the inherited %q", o.Env, want)
	}
}

// `corral --config <(corral spec) -- R` must mean exactly `corral -- R`.
func TestSpecRoundTripChangesNothing(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"spec"}, noEnv, &stdout, &stderr); code != 0 {
		t.Fatalf("corral spec: status %d, %s", code, stderr.String())
	}
	cfg := writeConfig(t, stdout.String())
	for _, flags := range [][]string{nil, {"--mode", "subreaper"}, {"--cap-add", "KILL", "--rlimit", "RLIMIT_NOFILE=10"}, {"--net", "none"}} {
		plain, err := parseRun(append(slices.Clone(flags), "--", "/bin/true", "x"), noEnv)
		if err != nil {
			t.Fatal(err)
		}
		withSpec, err := parseRun(append(append([]string{"--config", cfg}, flags...), "--", "/bin/true", "x"), noEnv)
		if err != nil {
			t.Fatalf("--config with corral spec's output: %v", err)
		}
		if !reflect.DeepEqual(plain, withSpec) {
			t.Errorf("flags %q: --config changes the options:\nplain  %+v\nconfig %+v", flags, plain, withSpec)
		}
	}
}

func TestSpecTakesNoArguments(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"spec", "--rootless"}, noEnv, &stdout, &stderr); code != exitUsage ||
		!strings.HasPrefix(stderr.String(), "usage: ") || stdout.Len() != 0 {
		t.Errorf("status %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}

func TestConfigUsageErrors(t *testing.T) {
	noArgs := writeConfig(t, `{"process": {"env": ["A=1"]}}`)
	withArgs := writeConfig(t, `{"process": {"args": ["/bin/echo"]}}`)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--config", withArgs, "--", "/bin/true"}, "sets process.args and a runner follows --"},
		{[]string{"--config", noArgs}, "no runner given"},
		{[]string{"--config", noArgs, "--"}, "no runner given"},
		{[]string{"--config", writeConfig(t, `{"process": {"args": ["echo", "hi"]}}`)}, `process.args[0]: runner "echo" is not an absolute path`},
		{[]string{"--config", writeConfig(t, `{"linux": {"seccomp": {}}}`), "--", "/bin/true"}, "unsupported: linux.seccomp"},
		{[]string{"--config", writeConfig(t, `{"process": {"terminal": true}}`), "--", "/bin/true"}, "unsupported: process.terminal"},
		{[]string{"--config", writeConfig(t, `{"ociVersion": "2.0.0"}`), "--", "/bin/true"}, "ociVersion"},
		{[]string{"--config", writeConfig(t, `not json`), "--", "/bin/true"}, "not valid JSON"},
		{[]string{"--config", filepath.Join(t.TempDir(), "missing.json"), "--", "/bin/true"}, "no such file"},
		{[]string{"--config", t.TempDir(), "--", "/bin/true"}, "is a directory"},
		{[]string{"--config"}, "flag needs an argument"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, noEnv, &stdout, &stderr)
		if code != exitUsage || !strings.HasPrefix(stderr.String(), "usage: ") || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: status %d, stderr %q; want status 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
		if stdout.Len() != 0 {
			t.Errorf("%q: stdout %q", tc.args, stdout.String())
		}
	}
}
