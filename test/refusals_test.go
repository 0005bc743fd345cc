package test

// Refusals are named (issue 35; SPEC, Sandbox policy, "Refusals are
// named" and "Nested sandboxes"): every write the filesystem rules refuse
// is said once per path on corral's stderr, is a line of the run's log,
// and is counted in one summary at the end, in every mode; a write the
// policy allows is never named, and a run with no refusal has no summary.

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// fsLogLine is a filesystem line of the run's log.
type fsLogLine struct {
	Event  string `json:"event"`
	Path   string `json:"path"`
	Op     string `json:"op"`
	Reason string `json:"reason"`
	Run    string `json:"run"`
}

// fsLogLines reads the log's lines with event "fs".
func fsLogLines(t *testing.T, path string) []fsLogLine {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []fsLogLine
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		var l fsLogLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if l.Event == "fs" {
			out = append(out, l)
		}
	}
	return out
}

// summaryOf is corral's end-of-run summary line, or "".
func summaryOf(stderr string) string {
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(line, "corral: sandbox: ") && strings.Contains(line, " refused, ") {
			return line
		}
	}
	return ""
}

func TestRefusedWritesNamed(t *testing.T) {
	requireLandlock(t, 1)
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		dirs := e.mkdirs("w", "out", "hid")
		w, out, hid := dirs[0], dirs[1], dirs[2]
		for _, f := range []string{"a", "b", "c"} {
			e.writeFile(out+"/"+f, "x\n", 0o666)
		}
		log := e.file("run.log")
		// Each refused once: an open for writing, a mkdir, a rename, an
		// unlink and a chmod outside --writable, a write beneath --hide;
		// then the same kinds of call inside --writable, allowed.
		script := strings.Join([]string{
			"echo x > " + out + "/new",
			"mkdir " + out + "/d",
			"mv " + out + "/a " + out + "/a2",
			"rm -f " + out + "/b",
			"chmod 600 " + out + "/c",
			"echo y > " + hid + "/f",
			"echo ok > " + w + "/f && mkdir " + w + "/d && mv " + w + "/f " + w + "/g && chmod 600 " + w + "/g && rm " + w + "/g",
			"true",
		}, "; ")
		res := e.run(e.args([]string{"--writable", w, "--hide", hid, "--log", log}, []string{"/bin/sh", "-c", script}))
		wantCode(t, res, 0)

		refused := []string{out + "/new", out + "/d", out + "/a", out + "/b", out + "/c", hid + "/f"}
		for _, p := range refused {
			if n := strings.Count(res.stderr, "corral: sandbox: refused write to "+p+": "); n != 1 {
				t.Errorf("%s named %d times on stderr, want once:\n%s", p, n, res)
			}
		}
		lines := fsLogLines(t, log)
		logged := map[string]int{}
		for _, l := range lines {
			logged[l.Path]++
			if l.Op == "" || l.Reason == "" || l.Run == "" {
				t.Errorf("log line without op, reason or run: %+v", l)
			}
		}
		for _, p := range refused {
			if logged[p] != 1 {
				t.Errorf("%s logged %d times, want once: %+v", p, logged[p], lines)
			}
		}
		if !strings.Contains(res.stderr, "refused write to "+hid+"/f: beneath a --hide path") {
			t.Errorf("the write beneath --hide is not named for it:\n%s", res)
		}

		// Nothing inside --writable is named, anywhere.
		if strings.Contains(res.stderr, w+"/") {
			t.Errorf("a write inside --writable was named:\n%s", res)
		}
		for p := range logged {
			if strings.HasPrefix(p, w+"/") {
				t.Errorf("a write inside --writable was logged: %+v", lines)
			}
		}

		sum := summaryOf(res.stderr)
		want := "corral: sandbox: 6 writes refused, under " + out + " (5), beneath --hide " + hid + " (1): --writable allows them"
		if sum != want {
			t.Errorf("summary:\n got %q\nwant %q\n%s", sum, want, res)
		}
		if strings.Count(res.stderr, " writes refused, ") != 1 {
			t.Errorf("want exactly one summary:\n%s", res)
		}
		for _, p := range []string{out + "/new", out + "/d", hid + "/f"} {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("%s exists: the refused write happened", p)
			}
		}

		// A run with no refusal: no line, no log line, no summary.
		log2 := e.file("quiet.log")
		res = e.run(e.args([]string{"--writable", w, "--log", log2}, []string{"/bin/sh", "-c", "echo ok > " + w + "/q && mkdir " + w + "/q2 && chmod 700 " + w + "/q2"}))
		wantCode(t, res, 0)
		if strings.Contains(res.stderr, "corral: sandbox:") {
			t.Errorf("a run with no refusal says something of the sandbox:\n%s", res)
		}
		if l := fsLogLines(t, log2); len(l) != 0 {
			t.Errorf("a run with no refusal logged %+v", l)
		}
	})
}

// TestNestedSandboxNamed: bubblewrap under a filesystem rule cannot
// mount (Landlock refuses every mount), and corral says so once; under a
// network-only policy it runs. As uid 0 the runner, which keeps no
// capability, cannot map uid 0 into a user namespace without CAP_SETFCAP
// (Linux 5.12), so the root modes give it that one, under both policies.
func TestNestedSandboxNamed(t *testing.T) {
	requireLandlock(t, 1)
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		missingFeature(t, "bubblewrap (bwrap) is not installed: apt-get install bubblewrap")
	}
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		w := e.mkdirs("w")[0]
		var caps []string
		if m.uid() == 0 {
			caps = []string{"--cap-add", "SETFCAP"}
		}
		inner := []string{bwrap, "--unshare-user", "--ro-bind", "/", "/", "--dev", "/dev", "/bin/echo", "inner-ran"}
		const named = "tried to mount (a sandbox of its own, e.g. bubblewrap); mounts are refused under a filesystem rule; --net none or --allow-net alone lets it run"

		res := e.run(e.args(append([]string{"--writable", w}, caps...), inner))
		if res.code == 0 || strings.Contains(res.stdout, "inner-ran") {
			t.Fatalf("bwrap ran under --writable:\n%s", res)
		}
		if n := strings.Count(res.stderr, "corral: sandbox: bwrap "+named); n != 1 {
			t.Errorf("the nested sandbox is named %d times, want once:\n%s", n, res)
		}

		res = e.run(e.args(append([]string{"--net", "none"}, caps...), inner))
		wantCode(t, res, 0)
		if !strings.Contains(res.stdout, "inner-ran") {
			t.Errorf("bwrap did not run under a network-only policy:\n%s", res)
		}
		if strings.Contains(res.stderr, named) {
			t.Errorf("a network-only policy names a nested sandbox:\n%s", res)
		}
	})
}

// TestRefusalSummaryNetwork: the summary names the network destinations
// the policy refused too, beside the writes, with the option for each.
func TestRefusalSummaryNetwork(t *testing.T) {
	requireLandlock(t, 1)
	if _, err := os.Stat("/usr/bin/curl"); err != nil {
		missingFeature(t, "curl is not installed")
	}
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		dirs := e.mkdirs("w", "out")
		w, out := dirs[0], dirs[1]
		script := "echo x > " + out + "/f; /usr/bin/curl -sS --max-time 20 -o /dev/null https://denied.example/; true"
		res := e.run(e.args([]string{"--writable", w, "--allow-net", "allowed.example"}, []string{"/bin/sh", "-c", script}))
		wantCode(t, res, 0)
		want := "corral: sandbox: 1 write refused, under " + out + " (1); network: 1 host refused (denied.example:443): --writable, --allow-net allow them"
		if !strings.Contains(res.stderr, want+"\n") || strings.Count(res.stderr, "corral: sandbox: 1 write refused") != 1 {
			t.Errorf("want the summary %q once:\n%s", want, res)
		}
	})
}
