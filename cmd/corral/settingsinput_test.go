package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// parseSettingsBounded is parseRun with --settings path, bounded so that
// a read that blocks (a FIFO with no writer) fails the test instead of
// hanging it; unblock, when given, lets such a read go afterwards.
func parseSettingsBounded(t *testing.T, path string, unblock func()) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := parseRun([]string{"--settings", path, "--", "/bin/true"}, env(map[string]string{"HOME": t.TempDir()}))
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		if unblock != nil {
			unblock()
		}
		t.Fatalf("--settings %s: still reading after 10 s", path)
		return nil
	}
}

// A settings file must be a regular file, opened so that nothing waits,
// of at most 1 MiB; anything else is a usage error naming the path and
// what it is. (/dev/zero itself, which fed corral without end, is tested
// on the binary under an address-space limit: test/settings_test.go.)
func TestSettingsFileMustBeRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, tc := range []struct{ path, want string }{
		{fifo, "a FIFO"},
		{"/dev/null", "a character device"},
		{dir, "a directory"},
		{sock, "a socket"},
	} {
		err := parseSettingsBounded(t, tc.path, func() {
			// Let a blocked open of the FIFO go: a writer that leaves.
			if fd, err := syscall.Open(fifo, syscall.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				syscall.Close(fd)
			}
		})
		if err == nil || !strings.Contains(err.Error(), "--settings "+tc.path+": "+tc.want) || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("--settings %s: %v, want a usage error naming %q", tc.path, err, tc.want)
		}
	}

	// 1 MiB is accepted, one byte more refused with the limit named.
	exact := filepath.Join(dir, "exact.json")
	if err := os.WriteFile(exact, []byte("{}"+strings.Repeat(" ", settingsMax-2)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := parseSettingsBounded(t, exact, nil); err != nil {
		t.Errorf("a settings file of exactly 1 MiB: %v", err)
	}
	large := filepath.Join(dir, "large.json")
	if err := os.WriteFile(large, []byte("{}"+strings.Repeat(" ", settingsMax-1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := parseSettingsBounded(t, large, nil); err == nil || !strings.Contains(err.Error(), "larger than 1048576 bytes (1 MiB)") {
		t.Errorf("a settings file of 1 MiB and 1 byte: %v, want the limit named", err)
	}
	// A symbolic link to a regular file is that file.
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(exact, link); err != nil {
		t.Fatal(err)
	}
	if err := parseSettingsBounded(t, link, nil); err != nil {
		t.Errorf("a symbolic link to a settings file: %v", err)
	}
}

// A key given twice, at any depth, is a usage error naming it: the last
// one would silently win.
func TestSettingsDuplicateKeys(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, text, want string }{
		{"top level", `{"hide": ["/x"], "hide": []}`, `key "hide" given twice`},
		{"escaped the second time", `{"read-only": true, "read-\u006fnly": false}`, `key "read-only" given twice`},
		{"corral's setenv", `{"setenv": {"A": "1", "A": "2"}}`, `key "setenv.A" given twice`},
		{"srt section", `{"network": {}, "filesystem": {"allowWrite": [], "allowWrite": ["."]}}`, `key "filesystem.allowWrite" given twice`},
		{"srt top level", `{"network": {"allowedDomains": []}, "filesystem": {}, "network": {"allowedDomains": ["x.test"]}}`, `key "network" given twice`},
		{"object in a list", `{"network": {}, "filesystem": {}, "ignoreViolations": {"*": [{"a": 1, "a": 2}]}}`, `key "ignoreViolations.*[0].a" given twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeSettings(t, dir, "s.json", tc.text)
			_, err := parseRun([]string{"--settings", path, "--", "/bin/true"}, env(map[string]string{"HOME": dir}))
			if err == nil || !strings.Contains(err.Error(), "--settings "+path+": "+tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	// The same key in two objects is no duplicate.
	path := writeSettings(t, dir, "s.json", `{"network": {"allowedDomains": []}, "filesystem": {"allowWrite": []}, "ignoreViolations": {"*": [{"a": 1}, {"a": 2}]}}`)
	if _, err := parseRun([]string{"--settings", path, "--", "/bin/true"}, env(map[string]string{"HOME": dir})); err != nil {
		t.Errorf("one key in each of two objects: %v", err)
	}
}

// In sandbox-runtime's format, allowedDomains and deniedDomains hold
// domains, wildcards and IP addresses as srt reads them: a CIDR is a
// usage error pointing to corral's own "allow-net".
func TestSettingsSandboxRuntimeDomainsAreNotCIDRs(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ entry, key, want string }{
		{`"allowedDomains": ["0.0.0.0/0"]`, "allowedDomains", `"0.0.0.0/0" is a CIDR`},
		{`"allowedDomains": ["x.test", "10.0.0.0/8"]`, "allowedDomains", `"10.0.0.0/8" is a CIDR`},
		{`"allowedDomains": ["10.0.0.0/8:443"]`, "allowedDomains", `"10.0.0.0/8:443" is a CIDR`},
		{`"allowedDomains": ["[fd00::/8]:443"]`, "allowedDomains", `"[fd00::/8]:443" is a CIDR`},
		{`"allowedDomains": ["::/0"]`, "allowedDomains", `"::/0" is a CIDR`},
		{`"allowedDomains": ["x.test"], "deniedDomains": ["10.0.0.0/8"]`, "deniedDomains", `"10.0.0.0/8" is a CIDR`},
		{`"allowedDomains": [], "deniedDomains": ["192.168.0.0/16"]`, "deniedDomains", `"192.168.0.0/16" is a CIDR`},
		{`"allowedDomains": ["x.test/path"]`, "allowedDomains", `"x.test/path" is not a domain`},
	} {
		path := writeSettings(t, dir, "srt.json", `{"network": {`+tc.entry+`}, "filesystem": {}}`)
		_, err := parseRun([]string{"--settings", path, "--", "/bin/true"}, env(map[string]string{"HOME": dir}))
		want := `key "network.` + tc.key + `": ` + tc.want
		if err == nil || !strings.Contains(err.Error(), want) || (strings.Contains(tc.want, "CIDR") && !strings.Contains(err.Error(), `"allow-net"`)) {
			t.Errorf("%s: %v, want an error containing %q and naming \"allow-net\"", tc.entry, err, want)
		}
	}
	// An IP address is a host srt matches literally: accepted.
	path := writeSettings(t, dir, "srt.json", `{"network": {"allowedDomains": ["192.0.2.1", "[2001:db8::1]:443"]}, "filesystem": {}}`)
	if _, err := parseRun([]string{"--settings", path, "--", "/bin/true"}, env(map[string]string{"HOME": dir})); err != nil {
		t.Errorf("IP addresses in allowedDomains: %v", err)
	}
	// corral's own format still takes CIDRs.
	path = writeSettings(t, dir, "corral.json", `{"allow-net": ["10.0.0.0/8:443"]}`)
	if _, err := parseRun([]string{"--settings", path, "--", "/bin/true"}, env(nil)); err != nil {
		t.Errorf("a CIDR in corral's allow-net: %v", err)
	}
}

// A settings file beneath a --writable path is named in a warning, once,
// whichever way the path leads there; the parse goes on.
func TestSettingsBeneathWritableWarns(t *testing.T) {
	dir := t.TempDir()
	project := filepath.Join(dir, "project")
	if err := os.MkdirAll(filepath.Join(project, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	alias := filepath.Join(dir, "alias")
	if err := os.Symlink(project, alias); err != nil {
		t.Fatal(err)
	}
	inside := writeSettings(t, filepath.Join(project, "sub"), "s.json", `{"writable": [".."]}`)
	outside := writeSettings(t, dir, "outside.json", `{"writable": ["project"]}`)
	plain := writeSettings(t, filepath.Join(project, "sub"), "plain.json", `{}`)
	for _, tc := range []struct {
		name  string
		args  []string
		warns string // the writable path named, or "" for no warning
	}{
		{"the file's own writable", []string{"--settings", inside}, project},
		{"through a symbolic link", []string{"--settings", filepath.Join(alias, "sub", "s.json")}, alias}, // its ".." is alias
		{"the file through a symbolic link", []string{"--settings", filepath.Join(alias, "sub", "plain.json"), "--writable", project}, project},
		{"the writable path through a symbolic link", []string{"--settings", plain, "--writable", alias}, alias},
		{"the writable path is the file", []string{"--settings", plain, "--writable", plain}, plain},
		{"the command line's writable", []string{"--settings", outside, "--writable", dir}, dir},
		{"writable through a symbolic link, the file outside", []string{"--settings", outside, "--writable", alias}, ""},
		{"outside", []string{"--settings", outside}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, warnings, err := parseRunWarned(append(tc.args, "--", "/bin/true"), env(nil))
			if err != nil {
				t.Fatal(err)
			}
			if tc.warns == "" {
				if len(warnings) != 0 {
					t.Errorf("warnings %q, want none", warnings)
				}
				return
			}
			if len(warnings) != 1 || !strings.Contains(warnings[0], "--settings "+tc.args[1]+" lies beneath the writable path "+tc.warns+":") {
				t.Errorf("warnings %q, want one naming %s and %s", warnings, tc.args[1], tc.warns)
			}
		})
	}
	// From the variable, the warning names the variable.
	_, _, warnings, err := parseRunWarned([]string{"--", "/bin/true"}, env(map[string]string{"CORRAL_SETTINGS": inside}))
	if err != nil || len(warnings) != 1 || !strings.Contains(warnings[0], "CORRAL_SETTINGS="+inside) {
		t.Errorf("from CORRAL_SETTINGS: %q, %v", warnings, err)
	}
}
