package test

// The three agent CLIs of docs/agents.md (issue 35), installed from npm at
// the versions pinned there and run under corral in every mode with the
// page's own recipe against test/helper agentapi, a mock of their APIs on
// the host's loopback. The mock answers the first request with one call of
// the CLI's shell tool, which writes into the project, writes outside the
// writable set and asks an unlisted host, then a final message. Each test
// shows the three things a user must be able to count on: the tool ran
// inside the sandbox, the write outside was refused and named by corral,
// and the unlisted host was refused and named.
//
// The recipe's files are read from docs/agents.md (the fenced block after
// each "<!-- agents_test CLI FILE -->" comment), so the page stays true:
// the mock's port 8787 and root's home /root in them are replaced by the
// test's. The CLIs are installed once into CORRAL_NPM_CACHE (default
// /var/tmp/corral-npm, readable by uid 65534), which .ci/run fills before
// the tests; without the npm registry the tests skip, and fail under
// CI=true.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// agentCLI is one CLI of docs/agents.md.
type agentCLI struct {
	name    string   // as in the page's agents_test comments
	pkg     string   // npm package
	version string   // pinned: the page's recipe was run with it
	bin     string   // the command npm installs
	args    []string // after the runner: one non-interactive turn
	mkdirs  []string // beneath $HOME, made before the run (a --writable path must exist)
	env     []string // the caller's: dummy keys, as a user's real ones would come
	minNode int      // the oldest Node major version it runs on (0: any that runs npm)
}

// The CLIs and versions of docs/agents.md; .ci/run installs the same.
var (
	claudeCLI = agentCLI{name: "claude", pkg: "@anthropic-ai/claude-code", version: "2.1.332", bin: "claude",
		args:   []string{"-p", "Run the command.", "--dangerously-skip-permissions"},
		mkdirs: []string{".claude", ".cache/agent/tmp"},
		env:    []string{"ANTHROPIC_API_KEY=sk-ant-dummy"}}
	codexCLI = agentCLI{name: "codex", pkg: "@openai/codex", version: "0.171.0", bin: "codex",
		args:   []string{"exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "Run the command."},
		mkdirs: []string{".codex"},
		env:    []string{"OPENAI_API_KEY=sk-dummy"}}
	geminiCLI = agentCLI{name: "gemini", pkg: "@google/gemini-cli", version: "0.61.0", bin: "gemini",
		args:   []string{"-p", "Run the command.", "--yolo"},
		mkdirs: []string{".gemini", ".cache/agent/tmp"},
		env:    []string{"GEMINI_API_KEY=dummy"}, minNode: 20}
	agentCLIs = []agentCLI{claudeCLI, codexCLI, geminiCLI}
)

func TestAgentClaudeCode(t *testing.T) { testAgentCLI(t, claudeCLI) }
func TestAgentCodex(t *testing.T)      { testAgentCLI(t, codexCLI) }
func TestAgentGemini(t *testing.T)     { testAgentCLI(t, geminiCLI) }

// The versions pinned here are the ones .ci/run installs and the page
// tells users to install.
func TestAgentPinsInCI(t *testing.T) {
	t.Parallel()
	var pins []string
	for _, cli := range agentCLIs {
		pins = append(pins, cli.pkg+"@"+cli.version)
	}
	for _, c := range []struct{ file, want string }{
		{"../.ci/run", "agent_clis=(" + strings.Join(pins, " ") + ")"},
		{"../docs/agents.md", "npm install -g " + strings.Join(pins, " ")},
	} {
		data, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), c.want+"\n") {
			t.Errorf("%s does not have the line %q", c.file, c.want)
		}
	}
}

// agentRunTimeout bounds one CLI's turn under corral (it takes seconds;
// a hang must not eat the suite's budget).
const agentRunTimeout = 2 * time.Minute

func testAgentCLI(t *testing.T, cli agentCLI) {
	files := recipeFiles(t, cli.name)
	if _, ok := files["settings"]; !ok {
		t.Fatalf("docs/agents.md has no <!-- agents_test %s settings --> block", cli.name)
	}
	if _, err := os.Stat("/usr/bin/curl"); err != nil {
		missingFeature(t, "/usr/bin/curl is needed: the mock's tool call asks an unlisted host with it")
	}
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		bin := installAgentCLI(t, cli)
		home, proj, outside := e.file("home"), e.file("proj"), e.file("outside")
		for _, d := range append([]string{home, proj, outside}, prefixAll(home, cli.mkdirs)...) {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(outside, 0o777); err != nil { // only the policy may refuse the write there
			t.Fatal(err)
		}
		run := fmt.Sprintf("echo hi > %s/out.txt; echo x > %s/file; curl -sS http://unlisted.test/", proj, outside)
		port, apiLog := startAgentAPI(t, e, run)
		settings := e.file("corral-" + cli.name + ".json") // outside every --writable path
		for name, content := range files {
			content = strings.ReplaceAll(content, "8787", strconv.Itoa(port))
			content = strings.ReplaceAll(content, "/root/", home+"/")
			path := settings
			if name != "settings" {
				path = filepath.Join(home, strings.TrimPrefix(name, "~/"))
			}
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			e.writeFile(path, content, 0o644)
		}
		// The CLI runs as the mode's user, who owns its home and project.
		for _, d := range []string{home, proj} {
			if err := chownTree(d, m.uid()); err != nil {
				t.Fatal(err)
			}
		}

		cmd := e.command(e.args([]string{"--settings", settings, "--writable", proj}, append([]string{bin}, cli.args...)),
			append([]string{"HOME=" + home}, cli.env...)...)
		cmd.Dir = proj
		res := e.startCmd(cmd).wait(agentRunTimeout)
		api, _ := os.ReadFile(apiLog)
		wantCode(t, res, 0)
		if !strings.Contains(string(api), "after tool result") {
			t.Errorf("the mock never got the tool's result back (its log: %q):\n%v", api, res)
		}
		if out, err := os.ReadFile(filepath.Join(proj, "out.txt")); err != nil || string(out) != "hi\n" {
			t.Errorf("the tool did not write out.txt in the project (%q, %v); the mock's log: %q\n%v", out, err, api, res)
		}
		if _, err := os.Stat(filepath.Join(outside, "file")); err == nil {
			t.Errorf("the tool wrote outside the writable set\n%v", res)
		}
		refused := "corral: sandbox: refused write to " + filepath.Join(outside, "file") + ": not beneath a --writable path"
		if !strings.Contains(res.stderr, refused) {
			t.Errorf("stderr does not name the refused write (want %q):\n%s", refused, res.stderr)
		}
		wantDeniedLines(t, res.stderr, map[string]bool{"unlisted.test:80": true})
	})
}

func prefixAll(dir string, names []string) []string {
	var out []string
	for _, n := range names {
		out = append(out, filepath.Join(dir, n))
	}
	return out
}

func chownTree(root string, uid int) error {
	return filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
}

// recipeMarker opens a recipe's file in docs/agents.md: the CLI, then
// "settings" (corral's settings file) or the file's path beneath ~.
var recipeMarker = regexp.MustCompile(`^<!-- agents_test (\S+) (\S+) -->$`)

// recipeFiles reads cli's files from docs/agents.md: for each marker, the
// fenced block that follows it.
func recipeFiles(t *testing.T, cli string) map[string]string {
	t.Helper()
	f, err := os.Open("../docs/agents.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string]string{}
	sc := bufio.NewScanner(f)
	name, in := "", false
	var body strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case in && strings.HasPrefix(line, "```"):
			files[name], name, in = body.String(), "", false
		case in:
			body.WriteString(line + "\n")
		case name != "" && strings.HasPrefix(line, "```"):
			in = true
			body.Reset()
		default:
			if m := recipeMarker.FindStringSubmatch(line); m != nil && m[1] == cli {
				name = m[2]
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if s, ok := files["settings"]; ok && !json.Valid([]byte(s)) {
		t.Fatalf("docs/agents.md: %s's settings block is not JSON:\n%s", cli, s)
	}
	return files
}

// npmCache is where the CLIs are installed, one prefix per package and
// version, kept across runs.
func npmCache() string {
	if d := os.Getenv("CORRAL_NPM_CACHE"); d != "" {
		return d
	}
	return "/var/tmp/corral-npm"
}

var installMu sync.Map // prefix -> *sync.Mutex

// installAgentCLI installs cli from npm into the cache unless it is
// there, and returns the absolute path of its command.
func installAgentCLI(t *testing.T, cli agentCLI) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		missingFeature(t, "node is needed to run "+cli.pkg+" (.ci/run installs nodejs and npm)")
	}
	if cli.minNode > 0 {
		out, err := exec.Command("node", "-p", "process.versions.node.split('.')[0]").Output()
		if major, _ := strconv.Atoi(strings.TrimSpace(string(out))); err != nil || major < cli.minNode {
			missingFeature(t, fmt.Sprintf("%s@%s needs Node %d or later; node here is major version %q (%v)", cli.pkg, cli.version, cli.minNode, strings.TrimSpace(string(out)), err))
		}
	}
	prefix := filepath.Join(npmCache(), strings.TrimPrefix(strings.ReplaceAll(cli.pkg, "/", "+"), "@")+"@"+cli.version)
	mu, _ := installMu.LoadOrStore(prefix, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	bin := filepath.Join(prefix, "node_modules", ".bin", cli.bin)
	if !installed(prefix, cli) {
		npm, err := exec.LookPath("npm")
		if err != nil {
			missingFeature(t, "npm is needed to install "+cli.pkg+" (.ci/run installs it)")
		}
		if err := os.MkdirAll(prefix, 0o755); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "install", "--prefix", prefix, "--no-fund", "--no-audit", "--no-save", cli.pkg+"@"+cli.version)
		cmd.Env = append(os.Environ(), "npm_config_update_notifier=false")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if out, err := cmd.CombinedOutput(); err != nil || !installed(prefix, cli) {
			missingFeature(t, fmt.Sprintf("npm could not install %s@%s into %s (is the npm registry reachable? CORRAL_NPM_CACHE may name a folder that holds it): %v\n%s",
				cli.pkg, cli.version, prefix, err, out))
		}
	}
	// uid 65534 runs it in the rootless mode.
	for d := prefix; d != "/"; d = filepath.Dir(d) {
		if st, err := os.Stat(d); err != nil || st.Mode().Perm()&0o005 != 0o005 {
			t.Fatalf("%s must be readable and searchable by every user (uid %d runs the CLI): set CORRAL_NPM_CACHE to such a folder", d, nobodyUID)
		}
	}
	return bin
}

// installed: prefix holds cli at its version, with its command.
func installed(prefix string, cli agentCLI) bool {
	data, err := os.ReadFile(filepath.Join(prefix, "node_modules", cli.pkg, "package.json"))
	if err != nil {
		return false
	}
	var pkg struct{ Version string }
	if json.Unmarshal(data, &pkg) != nil || pkg.Version != cli.version {
		return false
	}
	_, err = os.Stat(filepath.Join(prefix, "node_modules", ".bin", cli.bin))
	return err == nil
}

// startAgentAPI starts test/helper agentapi on the host's loopback, its
// tool call running run; it returns the port and the mock's log. The mock
// is killed, by pid, when the test ends.
func startAgentAPI(t *testing.T, e *env, run string) (int, string) {
	t.Helper()
	portFile, apiLog := e.file("agentapi.port"), e.file("agentapi.log")
	cmd := exec.Command(helperBin, "agentapi", "-addr", "127.0.0.1:0", "-port-file", portFile, "-log", apiLog, "-run", run)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	deadline := time.Now().Add(readyTimeout)
	for {
		if b, err := os.ReadFile(portFile); err == nil {
			port, err := strconv.Atoi(string(b))
			if err != nil {
				t.Fatalf("agentapi's port file: %q", b)
			}
			return port, apiLog
		}
		select {
		case <-done:
			t.Fatalf("agentapi exited before listening: %s", stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("agentapi did not listen within %v: %s", readyTimeout, stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
