package test

// --config (an OCI runtime-spec config.json), --rlimit, --net none and
// `corral spec` (docs/oci-config.md, docs/usage.md).

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeConfig writes doc as the test's config.json, readable by the
// mode's user, and returns its path.
func (e *env) writeConfig(name string, doc any) string {
	e.t.Helper()
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		e.t.Fatal(err)
	}
	path := e.file(name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		e.t.Fatal(err)
	}
	return path
}

// markerEnv makes the runner, when it is not the helper, carry the test's
// marker, so the leak check finds it (see markedProcs).
func (e *env) markerEnv() string { return "HELPER_MARKER=" + e.marker }

// namespaces is a linux.namespaces list.
func namespaces(types ...string) []map[string]string {
	var out []map[string]string
	for _, t := range types {
		out = append(out, map[string]string{"type": t})
	}
	return out
}

// wantRefusedOutsidePidns checks that subreaper mode refused a namespace
// request with 125 and a message saying why; it reports whether it did.
func wantRefusedOutsidePidns(t *testing.T, m mode, res result) bool {
	t.Helper()
	if m.pidns() {
		return false
	}
	wantCode(t, res, 125)
	if !strings.Contains(res.stderr, "subreaper mode: namespaces were requested") || !strings.Contains(res.stderr, "--mode pidns") {
		t.Errorf("subreaper mode refused the namespaces without saying why: %q", res.stderr)
	}
	if res.stdout != "" {
		t.Errorf("the runner ran: stdout %q", res.stdout)
	}
	return true
}

func TestConfigProcessReachesRunner(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		env := []string{"CONFIG_ONLY=from config", "PATH=/usr/bin:/bin", "EMPTY="}
		// process.env replaces the environment: nothing of corral's own
		// (CORRAL_VERBOSE below) or the caller's gets through.
		cfg := e.writeConfig("env.json", map[string]any{
			"process": map[string]any{"args": e.helper("env"), "env": env},
		})
		res := e.run([]string{"--mode", m.flag, "--config", cfg}, "CORRAL_VERBOSE=0", "CALLER_ONLY=1")
		wantCode(t, res, 0)
		if got := strings.Split(strings.TrimSuffix(res.stdout, "\n"), "\n"); !slices.Equal(got, env) {
			t.Errorf("runner environment: want exactly process.env %q, got %q", env, got)
		}

		// process.args with arguments, and process.cwd.
		dir, err := filepath.EvalSymlinks(e.dir)
		if err != nil {
			t.Fatal(err)
		}
		cfg = e.writeConfig("cwd.json", map[string]any{
			"process": map[string]any{
				"args": []string{"/bin/sh", "-c", `printf 'cwd=%s\nargs=%s|%s\n' "$(pwd -P)" "$0" "$1"`, "zero", "one two"},
				"env":  []string{"PATH=/usr/bin:/bin", e.markerEnv()},
				"cwd":  dir,
			},
		})
		cmd := e.command([]string{"--mode", m.flag, "--config", cfg})
		cmd.Dir = "/" // the config, not corral's own directory, decides
		res = e.startCmd(cmd).wait(corralTimeout)
		wantCode(t, res, 0)
		if want := "cwd=" + dir + "\nargs=zero|one two\n"; res.stdout != want {
			t.Errorf("runner: want %q, got %q", want, res.stdout)
		}

		// Without process.env the environment is inherited as usual.
		cfg = e.writeConfig("inherit.json", map[string]any{"process": map[string]any{"args": e.helper("env")}})
		res = e.run([]string{"--mode", m.flag, "--config", cfg}, "CALLER_ONLY=1", "CORRAL_VERBOSE=0")
		wantCode(t, res, 0)
		lines := strings.Split(res.stdout, "\n")
		if !slices.Contains(lines, "CALLER_ONLY=1") || slices.Contains(lines, "CORRAL_VERBOSE=0") {
			t.Errorf("without process.env: want the caller's environment minus corral's variables, got %q", res.stdout)
		}

		// A runner after -- and process.args together: a usage error.
		cfg = e.writeConfig("both.json", map[string]any{"process": map[string]any{"args": []string{"/bin/true"}}})
		res = e.run(e.args([]string{"--config", cfg}, []string{"/bin/false"}))
		wantCode(t, res, 2)
		if !strings.HasPrefix(res.stderr, "usage: ") || !strings.Contains(res.stderr, "process.args") {
			t.Errorf("args in both places: want a usage error naming process.args, got %q", res.stderr)
		}
		e.assertGone()
	})
}

// limits reads the soft and hard limits of "Max open files" and "Max
// processes" from a /proc/PID/limits text.
func limits(t *testing.T, text string) map[string][2]string {
	t.Helper()
	out := map[string][2]string{}
	for _, line := range strings.Split(text, "\n") {
		for _, name := range []string{"Max open files", "Max processes"} {
			if rest, ok := strings.CutPrefix(line, name); ok {
				f := strings.Fields(rest)
				if len(f) < 2 {
					t.Fatalf("limits line %q", line)
				}
				out[name] = [2]string{f[0], f[1]}
			}
		}
	}
	if len(out) != 2 {
		t.Fatalf("no open files or processes limit in %q", text)
	}
	return out
}

func TestConfigAndFlagRlimitsReachRunner(t *testing.T) {
	// What a program started without corral gets: corral must pass the
	// same on when no limit is asked for. Go raises its own soft
	// RLIMIT_NOFILE to the hard one at start-up, and must put it back for
	// the runner: corral is started with a soft limit below the hard one
	// to see that.
	out, err := exec.Command("/bin/cat", "/proc/self/limits").Output()
	if err != nil {
		t.Fatal(err)
	}
	caller := limits(t, string(out))
	callerNofile := [2]string{"512", caller["Max open files"][1]}
	forEachMode(t, func(t *testing.T, m mode) {
		for _, tc := range []struct {
			name    string
			rlimits []map[string]any // process.rlimits; nil: no config
			flags   []string
			nofile  [2]string
			nproc   [2]string
		}{
			{name: "inherited", nofile: callerNofile, nproc: caller["Max processes"]},
			{name: "config", rlimits: []map[string]any{
				{"type": "RLIMIT_NOFILE", "soft": 100, "hard": 200},
				{"type": "RLIMIT_NPROC", "soft": 300, "hard": 400}},
				nofile: [2]string{"100", "200"}, nproc: [2]string{"300", "400"}},
			{name: "flags", flags: []string{"--rlimit", "RLIMIT_NOFILE=111:222", "--rlimit", "RLIMIT_NPROC=333:444"},
				nofile: [2]string{"111", "222"}, nproc: [2]string{"333", "444"}},
			{name: "flag-overrides-config", rlimits: []map[string]any{
				{"type": "RLIMIT_NOFILE", "soft": 100, "hard": 200},
				{"type": "RLIMIT_NPROC", "soft": 300, "hard": 400}},
				flags:  []string{"--rlimit", "RLIMIT_NOFILE=55"},
				nofile: [2]string{"55", "55"}, nproc: [2]string{"300", "400"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, m)
				o := slices.Clone(tc.flags)
				if tc.rlimits != nil {
					o = append(o, "--config", e.writeConfig("config.json", map[string]any{
						"process": map[string]any{"rlimits": tc.rlimits}}))
				}
				// cat itself reads the limits: the runner, not a child of it.
				cmd := e.command(e.args(o, []string{"/bin/cat", "/proc/self/limits"}), e.markerEnv())
				cmd.Args = append([]string{"sh", "-c", `ulimit -Sn 512 && exec "$0" "$@"`}, cmd.Args...)
				cmd.Path = "/bin/sh"
				res := e.startCmd(cmd).wait(corralTimeout)
				wantCode(t, res, 0)
				got := limits(t, res.stdout)
				if got["Max open files"] != tc.nofile {
					t.Errorf("runner RLIMIT_NOFILE (soft, hard): want %v, got %v", tc.nofile, got["Max open files"])
				}
				if got["Max processes"] != tc.nproc {
					t.Errorf("runner RLIMIT_NPROC (soft, hard): want %v, got %v", tc.nproc, got["Max processes"])
				}
				e.assertGone()
			})
		}
	})
}

// netprobeBin is test/netprobe, built with the other test binaries
// (TestMain).
var netprobeBin string

// netprobe is test/netprobe's path.
func netprobe(t *testing.T) string {
	t.Helper()
	return netprobeBin
}

func TestConfigNetworkNamespaceHasOnlyLoopback(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		// A listener on the host's loopback, which no runner in a network
		// namespace may reach.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				conn.Close()
			}
		}()
		for _, tc := range []struct {
			name     string
			flags    []string
			config   map[string]any
			isolated bool
		}{
			{name: "net-none", flags: []string{"--net", "none"}, isolated: true},
			{name: "config", config: map[string]any{"linux": map[string]any{"namespaces": namespaces("pid", "mount", "network")}}, isolated: true},
			{name: "config-net-host-overrides", flags: []string{"--net", "host"},
				config: map[string]any{"linux": map[string]any{"namespaces": namespaces("pid", "mount", "network")}}},
			// The control: without a network namespace the same probe does
			// reach the listener, so the refusals above mean something.
			{name: "host"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, m)
				o := slices.Clone(tc.flags)
				if tc.config != nil {
					o = append(o, "--config", e.writeConfig("config.json", tc.config))
				}
				res := e.run(e.args(o, []string{netprobe(t), "-marker", e.marker, "-dial", ln.Addr().String()}))
				if tc.config != nil && wantRefusedOutsidePidns(t, m, res) {
					e.assertGone()
					return
				}
				wantCode(t, res, 0)
				if tc.isolated && !m.pidns() {
					// Subreaper mode has no network namespace: --net none
					// is the socket filter, so the host's interfaces stay
					// visible and every socket but AF_UNIX and AF_NETLINK
					// fails with EACCES (docs/network.md).
					if !strings.Contains(res.stdout, "\ndial=error: socket: EACCES") || !strings.Contains(res.stdout, "\nself=error: socket: EACCES") {
						t.Errorf("subreaper --net none: want socket() refused with EACCES:\n%s", res.stdout)
					}
					e.assertGone()
					return
				}
				var ifaces []string
				for _, line := range strings.Split(res.stdout, "\n") {
					if rest, ok := strings.CutPrefix(line, "iface="); ok {
						ifaces = append(ifaces, rest)
					}
				}
				if tc.isolated {
					if len(ifaces) != 1 || !strings.HasPrefix(ifaces[0], "lo ") || !strings.Contains(ifaces[0], "up") {
						t.Errorf("runner's interfaces: want only lo, up; got %q", ifaces)
					}
					if !strings.Contains(res.stdout, "\ndial=error: ") {
						t.Errorf("runner reached the host's 127.0.0.1 listener from its network namespace:\n%s", res.stdout)
					}
				} else {
					if len(ifaces) < 1 {
						t.Errorf("runner sees no interfaces on the host network:\n%s", res.stdout)
					}
					if !strings.Contains(res.stdout, "\ndial=ok\n") {
						t.Errorf("control: the runner on the host network cannot reach the listener:\n%s", res.stdout)
					}
				}
				if !strings.Contains(res.stdout, "\nself=ok\n") {
					t.Errorf("runner cannot listen and connect on its own loopback:\n%s", res.stdout)
				}
				e.assertGone()
			})
		}
	})
}

func TestConfigHostnameAndNamespaces(t *testing.T) {
	hostHostname, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	host := map[string]string{}
	for _, ns := range []string{"uts", "ipc", "net", "user"} {
		if host[ns], err = os.Readlink("/proc/self/ns/" + ns); err != nil {
			t.Fatal(err)
		}
	}
	forEachMode(t, func(t *testing.T, m mode) {
		for _, tc := range []struct {
			name     string
			ns       []string
			hostname bool
			newNS    []string // of uts, ipc, net, user: those that must differ from the host's
		}{
			{name: "uts-hostname", ns: []string{"pid", "mount", "uts"}, hostname: true, newNS: []string{"uts"}},
			{name: "uts-ipc", ns: []string{"pid", "mount", "uts", "ipc"}, newNS: []string{"uts", "ipc"}},
			{name: "all", ns: []string{"pid", "mount", "user", "network", "ipc", "uts"}, hostname: true,
				newNS: []string{"uts", "ipc", "net", "user"}},
			{name: "pid-mount-only", ns: []string{"pid", "mount"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, m)
				name := "corral-" + e.marker[len(e.marker)-8:]
				doc := map[string]any{
					"process": map[string]any{"args": []string{"/bin/sh", "-c",
						"cat /proc/sys/kernel/hostname && readlink /proc/self/ns/uts /proc/self/ns/ipc /proc/self/ns/net /proc/self/ns/user && cat /proc/self/uid_map"}},
					"linux": map[string]any{"namespaces": namespaces(tc.ns...)},
				}
				if tc.hostname {
					doc["hostname"] = name
				}
				res := e.run([]string{"--mode", m.flag, "--config", e.writeConfig("config.json", doc)}, e.markerEnv())
				if wantRefusedOutsidePidns(t, m, res) {
					e.assertGone()
					return
				}
				wantCode(t, res, 0)
				lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
				if len(lines) < 6 {
					t.Fatalf("runner output: %q", res.stdout)
				}
				switch {
				case tc.hostname && lines[0] != name:
					t.Errorf("runner's hostname: want %q from the config, got %q", name, lines[0])
				case !tc.hostname && lines[0] != hostHostname:
					t.Errorf("runner's hostname: want the host's %q, got %q", hostHostname, lines[0])
				}
				for i, ns := range []string{"uts", "ipc", "net", "user"} {
					want := slices.Contains(tc.newNS, ns) || (ns == "user" && m.rootless)
					if got := lines[1+i] != host[ns]; got != want {
						t.Errorf("runner's %s namespace %s (host %s): want new %v", ns, lines[1+i], host[ns], want)
					}
				}
				// In its user namespace the runner keeps the caller's uid.
				if uidMap := strings.Fields(lines[5]); slices.Contains(tc.newNS, "user") || m.rootless {
					id := fmt.Sprint(m.uid())
					if !slices.Equal(uidMap, []string{id, id, "1"}) {
						t.Errorf("runner's uid_map: want %s mapped to itself, got %q", id, lines[5])
					}
				}
				if now, _ := os.Hostname(); now != hostHostname {
					t.Errorf("the host's hostname changed from %q to %q", hostHostname, now)
				}
				e.assertGone()
			})
		}
	})
}

// `corral --config <(corral spec) -- R` behaves as `corral -- R`.
func TestConfigSpecRoundTrip(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		res := e.run([]string{"spec"})
		wantCode(t, res, 0)
		cfg := e.file("spec.json")
		if err := os.WriteFile(cfg, []byte(res.stdout), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name   string
			runner []string
			flags  []string
			code   int
		}{
			{"report", e.helper("report"), nil, 0},
			{"exit-7", e.helper("exit", "-code", "7"), nil, 7},
			{"cap-add", e.helper("report"), []string{"--cap-add", "NET_BIND_SERVICE"}, 0},
			{"allow-new-privs", e.helper("report"), []string{"--allow-new-privs"}, 0},
		} {
			plain := e.run(e.args(tc.flags, tc.runner))
			withSpec := e.run(e.args(append([]string{"--config", cfg}, tc.flags...), tc.runner))
			wantCode(t, plain, tc.code)
			wantCode(t, withSpec, tc.code)
			if tc.code == 0 {
				p, s := parseReport(t, plain.stdout), parseReport(t, withSpec.stdout)
				for _, key := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Uid", "Gid"} {
					if p[key] != s[key] {
						t.Errorf("%s: %s with corral spec's config %q, without %q", tc.name, key, s[key], p[key])
					}
				}
			}
		}

		// Literally as the issue writes it, through bash's process
		// substitution: the config arrives as a pipe (/dev/fd/N).
		bash, err := exec.LookPath("bash")
		if err != nil {
			missingFeature(t, "bash is not installed")
		}
		cmd := e.command(nil, e.markerEnv())
		cmd.Path = bash
		cmd.Args = []string{"bash", "-c", `"$0" --mode "$1" --config <("$0" spec) -- /bin/sh -c 'exit 3'`, corralBin, m.flag}
		res = e.startCmd(cmd).wait(corralTimeout)
		wantCode(t, res, 3)
		if res.stderr != "" {
			t.Errorf("stderr: %q", res.stderr)
		}
		e.assertGone()
	})
}

// Config errors are usage errors that name the field, and nothing runs.
func TestConfigErrorsNameTheField(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		ran := e.file("ran")
		for _, tc := range []struct {
			doc  string
			want string
		}{
			{`{"linux": {"seccomp": {"defaultAction": "SCMP_ACT_ALLOW"}}}`, "unsupported: linux.seccomp"},
			{`{"root": {"path": "rootfs"}}`, "unsupported: root"},
			{`{"linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}, {"type": "network", "path": "/run/netns/x"}]}}`,
				"unsupported: linux.namespaces[2].path"},
			{`{"process": {"args": ["touch", "x"]}}`, "process.args[0]"},
			{`{"ociVersion": "2.0.0"}`, "ociVersion"},
		} {
			path := e.file("bad.json")
			if err := os.WriteFile(path, []byte(tc.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			res := e.run(e.args([]string{"--config", path}, []string{"/usr/bin/touch", ran}))
			wantCode(t, res, 2)
			if !strings.HasPrefix(res.stderr, "usage: --config "+path+": "+tc.want) {
				t.Errorf("%s: want a usage error naming %q, got %q", tc.doc, tc.want, res.stderr)
			}
		}
		if _, err := os.Stat(ran); err == nil {
			t.Errorf("a runner ran despite a refused config")
		}
		e.assertGone()
	})
}

// configDocsHeading starts the page that documents --config.
const configDocsHeading = "# OCI config (`--config`)"

// docsBlocks returns the fenced blocks of the --config page of the
// documentation, in order, as (language, text) pairs, and the file it read.
func docsBlocks(t *testing.T) ([][2]string, string) {
	t.Helper()
	const file = "../docs/oci-config.md"
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// The page is the section: from its title to its end.
	_, section, ok := strings.Cut(string(data), configDocsHeading+"\n")
	if !ok {
		t.Fatalf("%s: no %q title", file, configDocsHeading)
	}
	var blocks [][2]string
	for {
		_, after, ok := strings.Cut(section, "```")
		if !ok {
			return blocks, file
		}
		lang, after, _ := strings.Cut(after, "\n")
		body, after, ok := strings.Cut(after, "```")
		if !ok {
			t.Fatalf("%s: unclosed ``` block", file)
		}
		blocks = append(blocks, [2]string{lang, body})
		section = after
	}
}

// The worked example of the documentation works when pasted, prints what
// the page says, and the page's `corral spec` output is the real one.
func TestConfigDocsExample(t *testing.T) {
	blocks, file := docsBlocks(t)
	if len(blocks) < 2 || blocks[0][0] != "json" || blocks[1][0] != "console" {
		t.Fatalf("%s: want the example config (json) and its run (console) first, got %q", file, blocks)
	}
	cmdLine, want, _ := strings.Cut(blocks[1][1], "\n")
	if cmdLine != "$ corral --config config.json" {
		t.Fatalf("%s: the example runs %q", file, cmdLine)
	}
	var spec string
	for _, b := range blocks[2:] {
		if b[0] == "json" {
			spec = b[1]
		}
	}
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		path := e.file("config.json")
		if err := os.WriteFile(path, []byte(blocks[0][1]), 0o644); err != nil {
			t.Fatal(err)
		}
		res := e.run([]string{"--mode", m.flag, "--config", path}, e.markerEnv())
		if !wantRefusedOutsidePidns(t, m, res) {
			wantCode(t, res, 0)
			if res.stdout != want {
				t.Errorf("%s example: the page says %q, corral printed %q", file, want, res.stdout)
			}
		}
		res = e.run([]string{"spec"})
		wantCode(t, res, 0)
		if res.stdout != spec {
			t.Errorf("%s shows a `corral spec` output that is not the real one:\n%s\nreal:\n%s", file, spec, res.stdout)
		}
		e.assertGone()
	})
}
