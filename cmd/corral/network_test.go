package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestDenyNetAndAllowUnix(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "agent.sock")
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	o, err := parseRun([]string{"--allow-net", "*.test", "--deny-net", "bad.test", "--deny-net", "10.0.0.0/8",
		"--allow-unix", "agent.sock", "--", "/bin/true"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.Net.Deny, []string{"bad.test", "10.0.0.0/8"}) || !slices.Equal(o.Net.AllowUnix, []string{sock}) {
		t.Errorf("deny %q allow-unix %q", o.Net.Deny, o.Net.AllowUnix)
	}
	if o, err = parseRun([]string{"--net", "none", "--allow-unix", sock, "--", "/bin/true"}, env(nil)); err != nil || len(o.Net.AllowUnix) != 1 {
		t.Errorf("--allow-unix with --net none: %v", err)
	}
}

// Usage errors (status 2) that name the option, and for a capability
// that undoes the sandbox, what it would let the runner do.
func TestNewOptionUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--deny-net", "x.test"}, "--deny-net narrows --allow-net"},
		{[]string{"--net", "none", "--deny-net", "x.test"}, "give --allow-net too"},
		{[]string{"--allow-net", "x.test", "--deny-net", "https://x.test"}, `--deny-net "https://x.test"`},
		{[]string{"--allow-net", "x.test", "--deny-net", "*"}, "--deny-net"},
		{[]string{"--allow-net", "x.test", "--deny-net", "--"}, "--deny-net needs a value"},
		{[]string{"--allow-unix", dir}, "--allow-unix needs --net none or --allow-net"},
		{[]string{"--net", "none", "--allow-unix", filepath.Join(dir, "missing")}, "--allow-unix " + `"` + filepath.Join(dir, "missing") + `"` + ": no such file"},
		{[]string{"--net", "none", "--allow-unix", ""}, "--allow-unix"},
		{[]string{"--cap-add", "SYS_PTRACE", "--net", "none"}, "--cap-add CAP_SYS_PTRACE cannot go with --net none: the runner could trace corral's own processes"},
		{[]string{"--cap-add", "sys_admin", "--writable", dir}, "CAP_SYS_ADMIN cannot go with --writable"},
		{[]string{"--cap-add", "CAP_SYS_MODULE", "--read-only"}, "CAP_SYS_MODULE cannot go with --read-only"},
		{[]string{"--cap-add", "BPF", "--hide", dir}, "CAP_BPF cannot go with --hide"},
		{[]string{"--cap-add", "NET_ADMIN", "--allow-net", "x.test"}, "CAP_NET_ADMIN cannot go with --allow-net"},
		{[]string{"--cap-add", "SYS_RAWIO", "--isolate-ipc"}, "CAP_SYS_RAWIO cannot go with --isolate-ipc"},
		{[]string{"--cap-add", "MKNOD", "--writable", dir}, "CAP_MKNOD cannot go with --writable"},
		{[]string{"--cap-add", "SYS_PTRACE", "--net", "none", "--host-port", "5432"}, "CAP_SYS_PTRACE"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append(tc.args, "--", "/bin/true"), env(nil), &stdout, &stderr)
		if code != exitUsage || !strings.HasPrefix(stderr.String(), "usage: ") || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: status %d, stderr %q; want %d naming %q", tc.args, code, stderr.String(), exitUsage, tc.want)
		}
	}
	// Without a policy option the capability is granted as asked (its cost
	// is said at launch).
	if o, err := parseRun([]string{"--cap-add", "SYS_PTRACE", "--", "/bin/true"}, env(nil)); err != nil || len(o.Privileges.Keep) != 1 {
		t.Errorf("--cap-add SYS_PTRACE alone: %v", err)
	}
}
