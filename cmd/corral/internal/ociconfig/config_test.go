package ociconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/corral-sh/corral/sandbox"
	"github.com/moby/sys/capability"
	"golang.org/x/sys/unix"
)

func TestParseConfigSupportedFields(t *testing.T) {
	uid, gid := os.Getuid(), os.Getgid()
	netBind, kill := int(capability.CAP_NET_BIND_SERVICE), int(capability.CAP_KILL)
	for _, tc := range []struct {
		name string
		json string
		want File
	}{
		{"empty object", `{}`, File{}},
		{"ociVersion", `{"ociVersion": "1.3.0"}`, File{}},
		{"ociVersion with a suffix", `{"ociVersion": "1.0.2-dev"}`, File{}},
		{"ociVersion empty", `{"ociVersion": ""}`, File{}},
		{"process.args", `{"process": {"args": ["/bin/echo", "a b", ""]}}`,
			File{Args: []string{"/bin/echo", "a b", ""}}},
		{"process.env", `{"process": {"env": ["A=1", "B=", "C=x=y"]}}`,
			File{Env: []string{"A=1", "B=", "C=x=y"}, EnvSet: true}},
		{"process.env empty: an empty environment", `{"process": {"env": []}}`,
			File{Env: []string{}, EnvSet: true}},
		{"process.env null: as if absent", `{"process": {"env": null}}`, File{}},
		{"process.cwd", `{"process": {"cwd": "/tmp"}}`, File{Cwd: "/tmp"}},
		{"process.cwd empty: inherited (specs-go always writes it)", `{"process": {"cwd": ""}}`, File{}},
		{"process.terminal false", `{"process": {"terminal": false}}`, File{}},
		{"process.noNewPrivileges true", `{"process": {"noNewPrivileges": true}}`, File{NoNewPrivs: ptr(true)}},
		{"process.noNewPrivileges false", `{"process": {"noNewPrivileges": false}}`, File{NoNewPrivs: ptr(false)}},
		{"process.user: the caller's ids", fmt.Sprintf(`{"process": {"user": {"uid": %d, "gid": %d}}}`, uid, gid), File{}},
		{"process.capabilities: the same in all five", `{"process": {"capabilities": {
			"bounding": ["CAP_NET_BIND_SERVICE", "CAP_KILL"], "effective": ["CAP_KILL", "CAP_NET_BIND_SERVICE"],
			"inheritable": ["CAP_NET_BIND_SERVICE", "CAP_KILL"], "permitted": ["CAP_NET_BIND_SERVICE", "CAP_KILL", "CAP_KILL"],
			"ambient": ["cap_kill", "NET_BIND_SERVICE"]}}}`,
			File{Keep: sortedInts(netBind, kill), KeepSet: true}},
		{"process.capabilities: all empty", `{"process": {"capabilities": {"bounding": [], "effective": [],
			"inheritable": [], "permitted": [], "ambient": []}}}`, File{Keep: []int{}, KeepSet: true}},
		{"process.capabilities: no lists", `{"process": {"capabilities": {}}}`, File{Keep: []int{}, KeepSet: true}},
		{"process.rlimits", `{"process": {"rlimits": [
			{"type": "RLIMIT_NOFILE", "soft": 1024, "hard": 4096},
			{"type": "RLIMIT_NPROC", "hard": 100, "soft": 100},
			{"type": "RLIMIT_CORE", "soft": 0, "hard": 18446744073709551615}]}}`,
			File{Rlimits: []sandbox.Rlimit{
				{Resource: unix.RLIMIT_NOFILE, Soft: 1024, Hard: 4096},
				{Resource: unix.RLIMIT_NPROC, Soft: 100, Hard: 100},
				{Resource: unix.RLIMIT_CORE, Soft: 0, Hard: unix.RLIM_INFINITY}}}},
		{"process.rlimits empty", `{"process": {"rlimits": []}}`, File{Rlimits: []sandbox.Rlimit{}}},
		{"linux.namespaces pid and mount", `{"linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}]}}`,
			File{Namespaces: sandbox.Namespaces{PID: true}}},
		{"linux.namespaces all six", `{"linux": {"namespaces": [{"type": "mount"}, {"type": "user"}, {"type": "network"},
			{"type": "ipc"}, {"type": "uts"}, {"type": "pid"}]}}`,
			File{Namespaces: sandbox.Namespaces{PID: true, User: true, Net: true, IPC: true, UTS: true}}},
		{"hostname with a uts namespace", `{"hostname": "box", "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}, {"type": "uts"}]}}`,
			File{Namespaces: sandbox.Namespaces{PID: true, UTS: true, Hostname: "box"}}},
		{"hostname empty", `{"hostname": ""}`, File{}},
		{"linux empty", `{"linux": {}}`, File{}},
		{"process null", `{"process": null}`, File{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.json))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(*c, tc.want) {
				t.Errorf("got  %#v (nnp %v)\nwant %#v (nnp %v)", *c, deref(c.NoNewPrivs), tc.want, deref(tc.want.NoNewPrivs))
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func deref(p *bool) any {
	if p == nil {
		return nil
	}
	return *p
}

func sortedInts(v ...int) []int {
	slices.Sort(v)
	return v
}

// Every refusal names the JSON path of the field; unsupported ones say so.
func TestParseConfigRefusesByPath(t *testing.T) {
	ns := func(types ...string) string {
		var parts []string
		for _, t := range types {
			parts = append(parts, fmt.Sprintf(`{"type": %q}`, t))
		}
		return `{"linux": {"namespaces": [` + strings.Join(parts, ", ") + `]}}`
	}
	caps := func(sets string) string { return `{"process": {"capabilities": {` + sets + `}}}` }
	for _, tc := range []struct {
		json        string
		path        string
		unsupported bool
	}{
		// Fields of the runtime spec corral does not implement.
		{`{"root": {"path": "rootfs"}}`, "root.path", true},
		{`{"root": {"path": "/", "options": []}}`, "root.options", true},
		{`{"mounts": []}`, "mounts", true},
		{`{"hooks": {}}`, "hooks", true},
		{`{"annotations": {"a": "b"}}`, "annotations", true},
		{`{"domainname": "example.org"}`, "domainname", true},
		{`{"solaris": {}}`, "solaris", true},
		{`{"windows": {}}`, "windows", true},
		{`{"vm": {}}`, "vm", true},
		{`{"linux": {"seccomp": {"defaultAction": "SCMP_ACT_ALLOW"}}}`, "linux.seccomp", true},
		{`{"linux": {"seccomp": null}}`, "linux.seccomp", true},
		{`{"linux": {"resources": {"pids": {"limit": 10}}}}`, "linux.resources", true},
		{`{"linux": {"uidMappings": [{"containerID": 0, "hostID": 1000, "size": 1}]}}`, "linux.uidMappings", true},
		{`{"linux": {"gidMappings": []}}`, "linux.gidMappings", true},
		{`{"linux": {"maskedPaths": ["/proc/kcore"]}}`, "linux.maskedPaths", true},
		{`{"linux": {"readonlyPaths": []}}`, "linux.readonlyPaths", true},
		{`{"linux": {"sysctl": {"net.ipv4.ip_forward": "1"}}}`, "linux.sysctl", true},
		{`{"linux": {"cgroupsPath": "/x"}}`, "linux.cgroupsPath", true},
		{`{"linux": {"devices": []}}`, "linux.devices", true},
		{`{"linux": {"rootfsPropagation": "private"}}`, "linux.rootfsPropagation", true},
		{`{"linux": {"timeOffsets": {}}}`, "linux.timeOffsets", true},
		{`{"linux": {"personality": {"domain": "LINUX32"}}}`, "linux.personality", true},
		{`{"process": {"apparmorProfile": "x"}}`, "process.apparmorProfile", true},
		{`{"process": {"selinuxLabel": "x"}}`, "process.selinuxLabel", true},
		{`{"process": {"oomScoreAdj": 100}}`, "process.oomScoreAdj", true},
		{`{"process": {"consoleSize": {"height": 1, "width": 1}}}`, "process.consoleSize", true},
		{`{"process": {"scheduler": {"policy": "SCHED_OTHER"}}}`, "process.scheduler", true},
		{`{"process": {"ioPriority": {"class": "IOPRIO_CLASS_BE", "priority": 0}}}`, "process.ioPriority", true},
		{`{"process": {"commandLine": "x"}}`, "process.commandLine", true},
		{`{"process": {"user": {"additionalGids": [5]}}}`, "process.user.additionalGids", true},
		{`{"process": {"user": {"umask": 18}}}`, "process.user.umask", true},
		{`{"process": {"user": {"uid": 4242}}}`, "process.user.uid", true},
		{`{"process": {"user": {"gid": 4242}}}`, "process.user.gid", true},
		{`{"process": {"terminal": true}}`, "process.terminal", true},
		{`{"linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}, {"type": "network", "path": "/run/netns/x"}]}}`, "linux.namespaces[2].path", true},
		{ns("pid", "mount", "cgroup"), "linux.namespaces[2].type", true},
		{ns("time", "pid", "mount"), "linux.namespaces[0].type", true},
		// Typos and fields no spec version knows: refused by name, too.
		{`{"proces": {}}`, "proces", true},
		{`{"Process": {"args": ["/bin/true"]}}`, "Process", true},
		{`{"process": {"Args": ["/bin/true"]}}`, "process.Args", true},
		{`{"process": {"noNewPrivilege": true}}`, "process.noNewPrivilege", true},
		{`{"process": {"rlimits": [{"type": "RLIMIT_NOFILE", "soft": 1, "hard": 1, "extra": 1}]}}`, "process.rlimits[0].extra", true},
		{`{"process": {"capabilities": {"bounding": [], "all": []}}}`, "process.capabilities.all", true},
		{`{"linux": {"namespaces": [{"type": "pid", "flags": 1}]}}`, "linux.namespaces[0].flags", true},
		{`{"future": {"nested": {"deep": 1}}}`, "future", true},
		// Supported fields with values corral refuses.
		{`{"ociVersion": "2.0.0"}`, "ociVersion", false},
		{`{"ociVersion": "0.5.0"}`, "ociVersion", false},
		{`{"ociVersion": "latest"}`, "ociVersion", false},
		{`{"ociVersion": 1}`, "ociVersion", false},
		{`{"process": {"args": []}}`, "process.args", false},
		{`{"process": {"args": ["sh", "-c", "true"]}}`, "process.args[0]", false},
		{`{"process": {"args": ["/bin/sh", "a\u0000b"]}}`, "process.args[1]", false},
		{`{"process": {"args": ["/bin/sh", null]}}`, "process.args[1]", false},
		{`{"process": {"args": "/bin/sh"}}`, "process.args", false},
		{`{"process": {"env": ["A=1", "NOEQUALS"]}}`, "process.env[1]", false},
		{`{"process": {"env": ["=value"]}}`, "process.env[0]", false},
		{`{"process": {"cwd": "relative/dir"}}`, "process.cwd", false},
		{`{"process": {"terminal": "no"}}`, "process.terminal", false},
		{`{"process": {"noNewPrivileges": 1}}`, "process.noNewPrivileges", false},
		{caps(`"bounding": ["CAP_NOPE"]`), "process.capabilities.bounding[0]", false},
		{caps(`"bounding": ["CAP_KILL"], "effective": ["CAP_KILL"], "inheritable": ["CAP_KILL"], "permitted": ["CAP_KILL"]`),
			"process.capabilities.ambient", false},
		{caps(`"bounding": ["CAP_KILL"], "effective": ["CAP_KILL"], "inheritable": ["CAP_KILL"], "permitted": ["CAP_KILL"], "ambient": ["CAP_KILL", "CAP_CHOWN"]`),
			"process.capabilities.bounding", false},
		{caps(`"bounding": ["CAP_KILL"], "effective": [], "inheritable": ["CAP_KILL"], "permitted": ["CAP_KILL"], "ambient": ["CAP_KILL"]`),
			"process.capabilities.effective", false},
		{`{"process": {"rlimits": [{"type": "RLIMIT_BOGUS", "soft": 1, "hard": 1}]}}`, "process.rlimits[0].type", false},
		{`{"process": {"rlimits": [{"soft": 1, "hard": 1}]}}`, "process.rlimits[0].type", false},
		{`{"process": {"rlimits": [{"type": "RLIMIT_NOFILE", "soft": 2, "hard": 1}]}}`, "process.rlimits[0]", false},
		{`{"process": {"rlimits": [{"type": "RLIMIT_NOFILE", "soft": 1}]}}`, "process.rlimits[0].hard", false},
		{`{"process": {"rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1}]}}`, "process.rlimits[0].soft", false},
		{`{"process": {"rlimits": [{"type": "RLIMIT_NOFILE", "soft": 1, "hard": null}]}}`, "process.rlimits[0].hard", false},
		{`{"process": {"rlimits": [{"type": "RLIMIT_NOFILE", "soft": -1, "hard": 1}]}}`, "process.rlimits[0].soft", false},
		// encoding/json names the field without the index; the error
		// names the element that is wrong.
		{`{"process": {"rlimits": [{"type": "RLIMIT_CORE", "soft": 0, "hard": 0}, {"type": "RLIMIT_NOFILE", "soft": "8", "hard": 8}]}}`, "process.rlimits[1].soft", false},
		{`{"process": {"args": ["/bin/true", 5]}}`, "process.args[1]", false},
		{`{"process": {"env": ["A=1", "B=2", true]}}`, "process.env[2]", false},
		{`{"process": {"rlimits": [{"type": "RLIMIT_NOFILE", "soft": 1, "hard": 1}, {"type": "RLIMIT_NOFILE", "soft": 2, "hard": 2}]}}`,
			"process.rlimits[1].type", false},
		{`{"process": {"rlimits": [null]}}`, "process.rlimits[0]", false},
		{`{"linux": {"namespaces": []}}`, "linux.namespaces", false},
		{ns("network"), "linux.namespaces", false},
		{ns("pid", "network"), "linux.namespaces", false},
		{ns("pid", "mount", "pid"), "linux.namespaces[2].type", false},
		{ns("pid", "mount", "net"), "linux.namespaces[2].type", false},
		{ns("pid", "mount", ""), "linux.namespaces[2].type", false},
		{`{"linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}, {}]}}`, "linux.namespaces[2].type", false},
		{`{"hostname": "box"}`, "hostname", false},
		{`{"hostname": "box", "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}]}}`, "hostname", false},
		{`{"hostname": "` + strings.Repeat("h", 65) + `", "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}, {"type": "uts"}]}}`, "hostname", false},
		{`{"process": {"args": ["/bin/true"]}, "process": {}}`, "process", false},
		{`{"linux": {"seccomp": {}}, "linux": {}}`, "linux", false},
		{`{"process": {"env": ["A=1"], "env": ["B=2"]}}`, "process.env", false},
		{`{"process": []}`, "process", false},
		{`{"linux": "yes"}`, "linux", false},
	} {
		t.Run(tc.json, func(t *testing.T) {
			c, err := Parse([]byte(tc.json))
			if err == nil {
				t.Fatalf("accepted, as %+v", *c)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %q (%T) is not a *Error", err, err)
			}
			if ce.Path != tc.path {
				t.Errorf("error %q names %q, want %q", err, ce.Path, tc.path)
			}
			if ce.Unsupported != tc.unsupported {
				t.Errorf("error %q: unsupported is %v, want %v", err, ce.Unsupported, tc.unsupported)
			}
			want := tc.path + ": "
			if tc.unsupported {
				want = "unsupported: " + tc.path
			}
			if !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q does not start with %q", err, want)
			}
		})
	}
}

func TestParseConfigRefusesWhatIsNotAConfig(t *testing.T) {
	for _, in := range []string{``, `{`, `null`, `[]`, `"x"`, `1`, `{} {}`, `{}x`, `{"a" 1}`,
		strings.Repeat("[", 100) + strings.Repeat("]", 100),
		`{"process":` + strings.Repeat(`{"a":`, 100) + `1` + strings.Repeat("}", 101)} {
		if c, err := Parse([]byte(in)); err == nil {
			t.Errorf("%q accepted as %+v", in, *c)
		}
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "config.json")
	if err := os.WriteFile(good, []byte(`{"process": {"args": ["/bin/true"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(good)
	if err != nil || !slices.Equal(c.Args, []string{"/bin/true"}) {
		t.Fatalf("Load: %+v, %v", c, err)
	}
	if _, err := Load(filepath.Join(dir, "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, append([]byte(`{"a": "`), bytes.Repeat([]byte("x"), maxConfigSize)...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized file: %v", err)
	}
}

// corral spec's output must be accepted and change nothing.
func TestDefaultConfigIsAcceptedAndChangesNothing(t *testing.T) {
	data, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(data)
	if err != nil {
		t.Fatalf("corral spec's own output is refused: %v\n%s", err, data)
	}
	before := sandbox.Options{Plan: sandbox.Plan{Mode: sandbox.ModeAuto, Path: "/bin/true", Args: []string{"/bin/true"}, Env: []string{"A=1"}}}
	after := before
	c.Apply(&after)
	if got, want := fmt.Sprintf("%#v", after), fmt.Sprintf("%#v", before); got != want {
		t.Errorf("Apply(corral spec) changed the options:\nbefore %s\nafter  %s", want, got)
	}
	if c.Args != nil || c.EnvSet || c.Namespaces != (sandbox.Namespaces{}) || c.NoNewPrivs == nil || !*c.NoNewPrivs || len(c.Keep) != 0 {
		t.Errorf("corral spec is not corral's defaults: %+v", *c)
	}
}

func TestApplyOverridesOnlyWhatTheConfigSets(t *testing.T) {
	c, err := Parse([]byte(`{"process": {"args": ["/bin/echo", "hi"], "env": ["A=1"], "cwd": "/tmp",
		"capabilities": {"bounding": ["CAP_KILL"], "effective": ["CAP_KILL"], "inheritable": ["CAP_KILL"], "permitted": ["CAP_KILL"], "ambient": ["CAP_KILL"]},
		"rlimits": [{"type": "RLIMIT_NOFILE", "soft": 10, "hard": 20}], "noNewPrivileges": false},
		"hostname": "h", "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}, {"type": "uts"}, {"type": "ipc"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	o := sandbox.Options{Plan: sandbox.Plan{Mode: sandbox.ModePidns, Grace: 5, StatePath: "/s", Env: []string{"B=2"},
		Privileges: sandbox.Privileges{Rlimits: []sandbox.Rlimit{{Resource: unix.RLIMIT_NOFILE, Soft: 1, Hard: 1}, {Resource: unix.RLIMIT_CORE}}},
		Namespaces: sandbox.Namespaces{Net: true}}}
	c.Apply(&o)
	want := sandbox.Options{Plan: sandbox.Plan{Mode: sandbox.ModePidns, Grace: 5, StatePath: "/s", Path: "/bin/echo", Args: []string{"/bin/echo", "hi"},
		Env: []string{"A=1"}, Dir: "/tmp",
		Privileges: sandbox.Privileges{Keep: []int{int(capability.CAP_KILL)}, AllowNewPrivs: true,
			Rlimits: []sandbox.Rlimit{{Resource: unix.RLIMIT_CORE}, {Resource: unix.RLIMIT_NOFILE, Soft: 10, Hard: 20}}},
		Namespaces: sandbox.Namespaces{Net: true, UTS: true, IPC: true, PID: true, Hostname: "h"}}}
	if got, w := fmt.Sprintf("%#v", o), fmt.Sprintf("%#v", want); got != w {
		t.Errorf("got  %s\nwant %s", got, w)
	}
}

// The subreaper refusal (and auto's refusal to fall back) covers a config
// that names only the pid and mount namespaces, too.
func TestConfigNamespacesNeedPidns(t *testing.T) {
	c, err := Parse([]byte(`{"linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	o := sandbox.Options{Plan: sandbox.Plan{Mode: sandbox.ModeSubreaper, Path: "/bin/true", Args: []string{"/bin/true"}}, Stderr: &bytes.Buffer{}}
	c.Apply(&o)
	status, err := sandbox.Launch(o)
	var setup *sandbox.SetupError
	if status != 125 || !errors.As(err, &setup) || !strings.Contains(err.Error(), "namespaces were requested") {
		t.Fatalf("Launch in subreaper mode: status %d, error %v", status, err)
	}
}

// reflected is the fuzz test's own account of every path a config may set
// and what that path must change in the result; it is kept apart from
// configShape on purpose, so that a path allowed there without a
// translation fails here.
func reflected(t *testing.T, c *File, path, pattern string, v any) {
	t.Helper()
	fail := func(format string, a ...any) {
		t.Helper()
		t.Fatalf("accepted %s = %v but the result does not reflect it (%s): %+v", path, v, fmt.Sprintf(format, a...), *c)
	}
	index := func() int {
		i := strings.LastIndexByte(path, '[')
		n, _ := strconv.Atoi(path[i+1 : strings.IndexByte(path[i:], ']')+i])
		return n
	}
	// nth finds the index of the first [N] in path.
	firstIndex := func() int {
		i := strings.IndexByte(path, '[')
		n, _ := strconv.Atoi(path[i+1 : strings.IndexByte(path, ']')])
		return n
	}
	str, _ := v.(string)
	switch pattern {
	case "", "process", "linux", "process.user", "linux.namespaces[]", "process.rlimits[]", "root":
		// Containers: their leaves are checked one by one.
	case "root.path":
		if filepath.Clean(str) != "/" {
			fail("root.path %q", str)
		}
	case "root.readonly":
		if c.ReadOnly != v.(bool) {
			fail("readonly")
		}
	case "ociVersion":
		if str != "" && !strings.HasPrefix(str, "1.") {
			fail("version %q", str)
		}
	case "hostname":
		if str != "" && (c.Namespaces.Hostname != str || !c.Namespaces.UTS) {
			fail("hostname")
		}
	case "process.terminal":
		if v != false {
			fail("terminal")
		}
	case "process.user.uid":
		if fmt.Sprint(v) != strconv.Itoa(os.Getuid()) {
			fail("uid")
		}
	case "process.user.gid":
		if fmt.Sprint(v) != strconv.Itoa(os.Getgid()) {
			fail("gid")
		}
	case "process.args":
		if c.Args == nil {
			fail("args")
		}
	case "process.args[]":
		if i := index(); i >= len(c.Args) || c.Args[i] != str {
			fail("args[%d]", i)
		}
	case "process.env":
		if !c.EnvSet {
			fail("env")
		}
	case "process.env[]":
		if i := index(); !c.EnvSet || i >= len(c.Env) || c.Env[i] != str {
			fail("env[%d]", i)
		}
	case "process.cwd":
		if str != "" && c.Cwd != str {
			fail("cwd")
		}
	case "process.noNewPrivileges":
		if c.NoNewPrivs == nil || *c.NoNewPrivs != v.(bool) {
			fail("noNewPrivileges")
		}
	case "process.capabilities", "process.capabilities.bounding", "process.capabilities.effective",
		"process.capabilities.inheritable", "process.capabilities.permitted", "process.capabilities.ambient":
		if !c.KeepSet {
			fail("capabilities")
		}
	case "process.capabilities.bounding[]", "process.capabilities.effective[]", "process.capabilities.inheritable[]",
		"process.capabilities.permitted[]", "process.capabilities.ambient[]":
		id, err := sandbox.ParseCap(str)
		if err != nil || !c.KeepSet || !slices.Contains(c.Keep, id) {
			fail("capability %q", str)
		}
	case "process.rlimits":
		if c.Rlimits == nil {
			fail("rlimits")
		}
	case "process.rlimits[].type", "process.rlimits[].soft", "process.rlimits[].hard":
		i := firstIndex()
		if i >= len(c.Rlimits) {
			fail("rlimits[%d]", i)
		}
		rl := c.Rlimits[i]
		switch {
		case strings.HasSuffix(pattern, "type"):
			if res, err := sandbox.RlimitByName(str); err != nil || res != rl.Resource {
				fail("type")
			}
		case strings.HasSuffix(pattern, "soft"):
			if fmt.Sprint(v) != strconv.FormatUint(rl.Soft, 10) {
				fail("soft")
			}
		default:
			if fmt.Sprint(v) != strconv.FormatUint(rl.Hard, 10) {
				fail("hard")
			}
		}
	case "linux.namespaces":
		if !c.Namespaces.PID {
			fail("namespaces")
		}
	case "linux.namespaces[].type":
		ns := c.Namespaces
		if ok := map[string]bool{"pid": ns.PID, "mount": ns.PID, "user": ns.User, "network": ns.Net,
			"ipc": ns.IPC, "uts": ns.UTS}[str]; !ok {
			fail("namespace %q", str)
		}
	default:
		t.Fatalf("accepted %s = %v, a path corral does not implement", path, v)
	}
}

// walkConfig calls fn for every key and list element present in v.
func walkConfig(v any, path, pattern string, fn func(path, pattern string, v any)) {
	fn(path, pattern, v)
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			p, pat := k, k
			if path != "" {
				p, pat = path+"."+k, pattern+"."+k
			}
			walkConfig(e, p, pat, fn)
		}
	case []any:
		for i, e := range v {
			walkConfig(e, fmt.Sprintf("%s[%d]", path, i), pattern+"[]", fn)
		}
	}
}

// FuzzConfig: parsing and translation never panic, and a config that is
// accepted has nothing in it that the result does not reflect.
func FuzzConfig(f *testing.F) {
	def, err := Default()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(def)
	for _, seed := range []string{
		`{}`,
		`{"ociVersion": "1.0.0", "process": {"args": ["/bin/sh", "-c", "true"], "env": ["A=1"], "cwd": "/", "terminal": false,
			"user": {"uid": 0, "gid": 0}, "noNewPrivileges": false,
			"capabilities": {"bounding": ["CAP_KILL"], "effective": ["CAP_KILL"], "inheritable": ["CAP_KILL"], "permitted": ["CAP_KILL"], "ambient": ["CAP_KILL"]},
			"rlimits": [{"type": "RLIMIT_NOFILE", "soft": 1, "hard": 2}, {"type": "RLIMIT_NPROC", "soft": 18446744073709551615, "hard": 18446744073709551615}]},
			"hostname": "h", "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}, {"type": "user"}, {"type": "network"}, {"type": "ipc"}, {"type": "uts"}]}}`,
		`{"linux": {"seccomp": null}}`,
		`{"process": {"args": ["/x"]}, "process": {}}`,
		`{"process": {"user": {"uid": 0, "umask": 0}}}`,
		`{"linux": {"namespaces": [{"type": "pid", "path": "/proc/1/ns/pid"}, {"type": "mount"}]}}`,
		`{"process": {"rlimits": [{"type": "RLIMIT_CORE", "soft": 1e3, "hard": 1000}]}}`,
		`{"process": {"env": null, "args": null, "capabilities": null}}`,
		`{"Process": {}, "hoſtname": "x"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			if c != nil {
				t.Fatalf("both a result and an error: %v", err)
			}
			return
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var raw any
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("accepted input that is not JSON: %v", err)
		}
		walkConfig(raw, "", "", func(path, pattern string, v any) {
			if v != nil {
				reflected(t, c, path, pattern, v)
			} else if !slices.Contains([]string{"ociVersion", "hostname", "process", "linux", "process.args", "process.env",
				"process.cwd", "process.terminal", "process.noNewPrivileges", "process.user", "process.user.uid",
				"process.user.gid", "process.capabilities", "process.capabilities.bounding", "process.capabilities.effective",
				"process.capabilities.inheritable", "process.capabilities.permitted", "process.capabilities.ambient",
				"process.rlimits", "linux.namespaces", "root", "root.readonly"}, pattern) {
				// null for a known field asks for nothing; anywhere else it
				// names a field corral does not implement.
				t.Fatalf("accepted %s = null", path)
			}
		})
		// Applying the result to options must not panic either.
		var o sandbox.Options
		c.Apply(&o)
	})
}

// versionMajor stands in for the semver regular expression it replaced:
// the same strings accepted and refused.
func TestVersionMajor(t *testing.T) {
	for v, want := range map[string]string{
		"1.0.0": "1", "1.3.0": "1", "10.20.30": "10", "0.5.0": "0", "2.0.0": "2",
		"1.0.2-dev": "1", "1.0.0-rc.1+build.5": "1", "1.0.0+20130313144700": "1", "1.2.3-a-b.c": "1",
	} {
		if got, ok := versionMajor(v); !ok || got != want {
			t.Errorf("versionMajor(%q) = %q, %v; want %q", v, got, ok, want)
		}
	}
	for _, v := range []string{
		"", "1", "1.2", "1.2.3.4", "01.0.0", "1.00.0", "1.0.01", "latest", "v1.0.0",
		"1.0.0-", "1.0.0+", "1.0.0-a+", "1.0.0-a_b", "1.0.0+x y", "1..0", "1.0.0\n", "-1.0.0", "1.+0.0",
	} {
		if got, ok := versionMajor(v); ok {
			t.Errorf("versionMajor(%q) = %q, true; want refused", v, got)
		}
	}
}
