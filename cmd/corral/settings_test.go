package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/sandbox"
)

// writeSettings writes text as dir/name and returns its path.
func writeSettings(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// corral's own format: long option names; repeatables add up (the file's
// first), other options the command line overrides; relative paths are
// the file's directory's, ~ is $HOME.
func TestSettingsCorralFormat(t *testing.T) {
	dir := t.TempDir()
	home := t.TempDir()
	for _, d := range []string{filepath.Join(dir, "w"), filepath.Join(home, "h"), filepath.Join(dir, "cli")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := writeSettings(t, dir, "s.json", `{
		"allow-net": ["a.test", "b.test:8443"], "deny-net": ["c.a.test"],
		"writable": ["w"], "hide": ["~/h"], "timeout": 5, "grace": "2",
		"net-log": "net.log", "setenv": {"A": "1", "B": "2"}, "unsetenv": ["AWS_*"],
		"isolate-ipc": false, "die-with-parent": false, "verbose": true, "mode": "subreaper"
	}`)
	t.Setenv("AWS_KEY", "k")
	t.Chdir(t.TempDir()) // the file's paths are not the current directory's
	lookup := env(map[string]string{"HOME": home})

	o, err := parseRun([]string{"--settings", path, "--", "/bin/true"}, lookup)
	if err != nil {
		t.Fatal(err)
	}
	pol := o.Privileges.Landlock
	if !slices.Equal(o.Net.Allow, []string{"a.test", "b.test:8443"}) || !slices.Equal(o.Net.Deny, []string{"c.a.test"}) ||
		!slices.Equal(pol.Writable, []string{filepath.Join(dir, "w")}) || !slices.Equal(pol.Hide, []string{filepath.Join(home, "h")}) ||
		o.Timeout != 5*time.Second || o.Grace != 2*time.Second || o.Net.LogPath != filepath.Join(dir, "net.log") ||
		pol.IsolateIPC || o.DieWithParent || !o.Verbose || o.Mode != sandbox.ModeSubreaper {
		t.Errorf("from the file: %+v", o.Plan)
	}
	if !slices.Contains(o.Env, "A=1") || !slices.Contains(o.Env, "B=2") || slices.Contains(o.Env, "AWS_KEY=k") {
		t.Errorf("env %q", o.Env)
	}

	// The command line adds to the lists and overrides the rest; the
	// variable names the file when no flag does.
	cli := filepath.Join(dir, "cli")
	o, err = parseRun([]string{"--allow-net", "z.test", "--writable", cli, "--timeout", "7", "--setenv", "A", "cli", "--mode", "auto", "--", "/bin/true"},
		env(map[string]string{"HOME": home, "CORRAL_SETTINGS": path}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.Net.Allow, []string{"a.test", "b.test:8443", "z.test"}) || !slices.Equal(o.Privileges.Landlock.Writable, []string{filepath.Join(dir, "w"), cli}) ||
		o.Timeout != 7*time.Second || o.Mode != sandbox.ModeAuto || !slices.Contains(o.Env, "A=cli") || slices.Contains(o.Env, "A=1") {
		t.Errorf("file then command line: allow %q writable %q timeout %v mode %q env %q", o.Net.Allow, o.Privileges.Landlock.Writable, o.Timeout, o.Mode, o.Env)
	}
	// --settings wins over the variable.
	other := writeSettings(t, dir, "other.json", `{"net": "none"}`)
	o, err = parseRun([]string{"--settings", other, "--", "/bin/true"}, env(map[string]string{"CORRAL_SETTINGS": path}))
	if err != nil || !o.Namespaces.Net || len(o.Net.Allow) != 0 {
		t.Errorf("--settings over CORRAL_SETTINGS: %+v %v", o.Net, err)
	}
}

func TestSettingsVariableDoesNotReachTheRunner(t *testing.T) {
	t.Setenv("CORRAL_SETTINGS", writeSettings(t, t.TempDir(), "s.json", `{}`))
	o, err := parseRun([]string{"--", "/bin/true"}, os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range o.Env {
		if strings.HasPrefix(kv, "CORRAL_SETTINGS=") {
			t.Errorf("the runner gets %s", kv)
		}
	}
}

// sandbox-runtime's format, mapped to options never weaker than srt's.
func TestSettingsSandboxRuntimeFormat(t *testing.T) {
	dir := t.TempDir()
	home := t.TempDir()
	for _, d := range []string{filepath.Join(dir, "src"), filepath.Join(home, ".ssh")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sock := writeSettings(t, dir, "agent.sock", "") // a file stands in: it must exist
	t.Chdir(dir)
	lookup := env(map[string]string{"HOME": home})
	for _, tc := range []struct {
		name, text string
		check      func(o sandbox.Options) bool
	}{
		{"full", `{"network": {"allowedDomains": ["github.com", "*.packages.example", "api.test:443", "[2001:db8::1]", "[2001:db8::2]:22"],
			"deniedDomains": ["bad.packages.example"], "allowUnixSockets": ["` + sock + `"], "allowLocalBinding": false, "allowAllUnixSockets": false},
		  "filesystem": {"allowWrite": ["src"], "denyRead": ["~/.ssh"], "denyWrite": [], "allowRead": []},
		  "ignoreViolations": {"*": ["/usr/bin"]}, "enableWeakerNestedSandbox": false}`,
			func(o sandbox.Options) bool {
				return slices.Equal(o.Net.Allow, []string{"github.com:*", "*.packages.example:*", "api.test:443", "[2001:db8::1]:*", "[2001:db8::2]:22"}) &&
					slices.Equal(o.Net.Deny, []string{"bad.packages.example"}) && slices.Equal(o.Net.AllowUnix, []string{sock}) &&
					slices.Equal(o.Privileges.Landlock.Writable, []string{filepath.Join(dir, "src")}) &&
					slices.Equal(o.Privileges.Landlock.Hide, []string{filepath.Join(home, ".ssh")}) && !o.Namespaces.Net
			}},
		{"empty lists: no network, nothing writable", `{"network": {"allowedDomains": [], "deniedDomains": ["x.test"]}, "filesystem": {"allowWrite": []}}`,
			func(o sandbox.Options) bool {
				return o.Namespaces.Net && len(o.Net.Allow) == 0 && len(o.Net.Deny) == 0 && o.Privileges.Landlock.ReadOnly
			}},
		{"missing lists mean empty", `{"network": {}, "filesystem": {}}`,
			func(o sandbox.Options) bool { return o.Namespaces.Net && o.Privileges.Landlock.ReadOnly }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeSettings(t, dir, "srt.json", tc.text)
			o, err := parseRun([]string{"--settings", path, "--", "/bin/true"}, lookup)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(o) {
				t.Errorf("net %+v namespaces %+v landlock %+v", o.Net, o.Namespaces, o.Privileges.Landlock)
			}
		})
	}
}

// Every settings file that cannot be honoured is a usage error naming the
// file and the key.
func TestSettingsErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text string
		want       string
	}{
		{"not JSON", `{"allow-net": `, "not a JSON object"},
		{"a list", `["allow-net"]`, "not a JSON object"},
		{"trailing data", `{} {}`, "data after the object"},
		{"unknown key", `{"allow-nets": ["x"]}`, `unknown key "allow-nets"`},
		{"short name", `{"v": true}`, `unknown key "v"`},
		{"help", `{"help": true}`, `unknown key "help"`},
		{"nested settings", `{"settings": "x.json"}`, `"settings"`},
		{"list as string", `{"allow-net": "x.test"}`, `key "allow-net": want a list`},
		{"scalar as list", `{"timeout": [5]}`, `key "timeout": want a string or a number`},
		{"switch as string", `{"read-only": "yes"}`, `key "read-only": want true or false`},
		{"setenv as list", `{"setenv": ["A=1"]}`, `key "setenv": want an object`},
		{"setenv bad name", `{"setenv": {"A=B": "1"}}`, `key "setenv"`},
		{"list of objects", `{"writable": [{}]}`, `key "writable"`},
		{"bad value", `{"allow-net": ["https://x.test"]}`, "https://x.test"},
		{"srt without filesystem", `{"network": {"allowedDomains": []}}`, `without "filesystem"`},
		{"srt without network", `{"filesystem": {"allowWrite": []}}`, `without "network"`},
		{"srt denyWrite", `{"network": {}, "filesystem": {"denyWrite": [".env"]}}`, `"filesystem.denyWrite"`},
		{"srt allowRead", `{"network": {}, "filesystem": {"allowRead": ["."]}}`, `"filesystem.allowRead"`},
		{"srt allowAllUnixSockets", `{"network": {"allowAllUnixSockets": true}, "filesystem": {}}`, `"network.allowAllUnixSockets"`},
		{"srt allowLocalBinding", `{"network": {"allowLocalBinding": true}, "filesystem": {}}`, `"network.allowLocalBinding"`},
		{"srt tlsTerminate", `{"network": {"tlsTerminate": {}}, "filesystem": {}}`, `"network.tlsTerminate"`},
		{"srt httpProxyPort", `{"network": {"httpProxyPort": 8080}, "filesystem": {}}`, `"network.httpProxyPort"`},
		{"srt weaker nested", `{"network": {}, "filesystem": {}, "enableWeakerNestedSandbox": true}`, `"enableWeakerNestedSandbox"`},
		{"srt unknown top-level", `{"network": {}, "filesystem": {}, "allow-net": ["x"]}`, `"allow-net"`},
		{"srt unknown filesystem key", `{"network": {}, "filesystem": {"allowExec": []}}`, `"filesystem.allowExec"`},
		{"srt glob", `{"network": {}, "filesystem": {"denyRead": ["**/.env"]}}`, "glob"},
		{"srt deny all", `{"network": {"allowedDomains": ["x.test"], "deniedDomains": ["*"]}, "filesystem": {}}`, `"network.deniedDomains"`},
		{"srt unbracketed IPv6", `{"network": {"allowedDomains": ["2001:db8::1"]}, "filesystem": {}}`, "bracketed"},
		{"srt domains as string", `{"network": {"allowedDomains": "x.test"}, "filesystem": {}}`, `"network.allowedDomains"`},
		{"srt section not an object", `{"network": [], "filesystem": {}}`, `"network"`},
		{"srt socket missing", `{"network": {"allowUnixSockets": ["/nonexistent.sock"]}, "filesystem": {}}`, "--allow-unix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeSettings(t, dir, "s.json", tc.text)
			_, err := parseRun([]string{"--settings", path, "--", "/bin/true"}, env(map[string]string{"HOME": dir}))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if !strings.Contains(tc.name, "bad value") && !strings.Contains(tc.name, "socket missing") && !strings.Contains(err.Error(), path) {
				t.Errorf("%v does not name the file", err)
			}
			// The same from the variable names the variable.
			_, err = parseRun([]string{"--", "/bin/true"}, env(map[string]string{"HOME": dir, "CORRAL_SETTINGS": path}))
			if err == nil || (!strings.Contains(tc.name, "bad value") && !strings.Contains(tc.name, "socket missing") && !strings.Contains(err.Error(), "CORRAL_SETTINGS="+path)) {
				t.Errorf("from CORRAL_SETTINGS: %v", err)
			}
		})
	}
	_, err := parseRun([]string{"--settings", filepath.Join(dir, "missing.json"), "--", "/bin/true"}, env(nil))
	if err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("a missing file: %v", err)
	}
}
