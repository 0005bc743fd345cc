package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Protected paths beneath a writable one (SPEC, "Protected paths beneath a
// writable one"; issue 33, finding 7): the runner may write a project but
// not plant what runs the next time the user uses it — git hooks and
// config, shell startup files, editor and agent configs — through any
// entry point, nor move .git away.

// gitProject makes a git repository (git init) in the test's directory,
// owned by the mode's user, with a .bashrc and a file a.txt; .envrc is
// absent. It returns the project's path.
func gitProject(t *testing.T, e *env) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		missingFeature(t, "git is not installed")
	}
	p := e.file("proj")
	if out, err := exec.Command("git", "init", "-q", p).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	for name, data := range map[string]string{".bashrc": "# the user's\n", "a.txt": "a\n"} {
		if err := os.WriteFile(filepath.Join(p, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(p, ".git", "hooks")); err != nil {
		if err := os.Mkdir(filepath.Join(p, ".git", "hooks"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	uid := e.m.uid()
	if err := filepath.Walk(p, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, uid)
	}); err != nil {
		t.Fatal(err)
	}
	return p
}

// fsResults runs the helper's fswrite with ops under --writable proj (and
// more options) and returns each op's result.
func fsResults(t *testing.T, e *env, more []string, ops ...string) map[string]string {
	t.Helper()
	res := e.run(e.args(opts("", "2", more...), e.helper(append([]string{"fswrite"}, ops...)...)))
	wantCode(t, res, 0)
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(res.stdout), "\n") {
		if op, r, ok := strings.Cut(line, "="); ok {
			got[op] = r
		}
	}
	for _, op := range ops {
		if _, ok := got[op]; !ok {
			t.Fatalf("fswrite printed no result for %s: %v", op, res)
		}
	}
	t.Logf("stderr: %s", res.stderr)
	return got
}

// In subreaper mode the checker makes every write-intent call and refuses
// each one that would reach a protected path (EROFS), whatever the entry
// point. In namespace modes the protected paths that exist are read-only
// mounts, and the checker that names refused writes refuses a write to a
// protected path itself (EROFS), which is what keeps one that does not
// exist yet (.envrc, a new hook) from being made.
func TestProtectedPathsRefused(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		p := gitProject(t, e)
		j := func(n string) string { return filepath.Join(p, n) }
		refused := []string{
			"openat:" + j(".git/hooks/pre-commit"), // created where hooks/ exists
			"open:" + j(".bashrc"),                 // the legacy entry point, an existing file
			"creat:" + j(".envrc"),                 // created, absent before
			"openat2:" + j(".envrc"),
			"openat:" + j(".git/config"),
			"truncate:" + j(".bashrc"),
			"mknod:" + j(".git/hooks/post-checkout"),
			"mkdir:" + j(".vscode"),
			"mkdirat:" + j(".idea"),
			"openat:" + j(".claude/settings.local.json"),
			"symlink:" + j("a.txt") + "," + j(".envrc"),                // symlinked into place
			"symlinkat:" + j("a.txt") + "," + j(".git/hooks/pre-push"), //
			"link:" + j("a.txt") + "," + j(".envrc"),                   // hard-linked into place
			"linkat:" + j("a.txt") + "," + j(".git/hooks/pre-push"),    //
			"linkat:" + j(".git/config") + "," + j("cfg"),              // a second name to write through
			"rename:" + j("a.txt") + "," + j(".bashrc"),                // renamed over
			"renameat2:" + j("a.txt") + "," + j(".git/config"),         //
			"renameat2:" + j(".git") + "," + j("g"),                    // .git moved away
			"rename:" + j(".git/hooks") + "," + j("h"),                 //
			"rmdir:" + j(".git"),                                       // removed
			"unlink:" + j(".bashrc"),
			"unlinkat:" + j(".git/config"),
		}
		allowed := []string{
			"openat:" + j("new.txt"),
			"open:" + j("new2.txt"),
			"creat:" + j("new3.txt"),
			"openat2:" + j("new4.txt"),
			"mkdir:" + j("d1"),
			"mkdirat:" + j(".git/refs/heads/topic"),
			"rename:" + j("new.txt") + "," + j("d1/x"),
			"link:" + j("new2.txt") + "," + j("l2"),
			"symlink:" + j("new2.txt") + "," + j("s2"),
			"unlink:" + j("l2"),
			"rmdir:" + j(".git/refs/heads/topic"),
		}
		outside := []string{"openat:" + e.file("outside.txt"), "mkdir:" + e.file("outside")}
		first := "mkdirat:" + j(".claude") // the folder may be made, not its settings
		got := fsResults(t, e, []string{"--writable", p}, append(append(append([]string{first}, refused...), allowed...), outside...)...)
		if got[first] != "ok" {
			t.Errorf("%s: want ok, got %s", first, got[first])
		}
		// In namespace modes a protected path that exists is a mount of
		// its own: a rename or link across it is EXDEV, which the kernel
		// says before anything else; refused all the same.
		crossMount := map[string]bool{
			"linkat:" + j(".git/config") + "," + j("cfg"):      true,
			"renameat2:" + j("a.txt") + "," + j(".git/config"): true,
			"rename:" + j(".git/hooks") + "," + j("h"):         true,
		}
		for _, op := range refused {
			if got[op] != "EROFS" && !(m.pidns() && crossMount[op] && got[op] == "EXDEV") {
				t.Errorf("%s: want EROFS (a protected path), got %s", op, got[op])
			}
		}
		for _, op := range allowed {
			if got[op] != "ok" {
				t.Errorf("%s: want ok (beneath --writable, not protected), got %s", op, got[op])
			}
		}
		for _, op := range outside {
			// Subreaper mode's checker refuses these itself; in namespace
			// modes a read-only mount does.
			want := map[bool]string{false: "EACCES", true: "EROFS"}[m.pidns()]
			if got[op] != want {
				t.Errorf("%s: want %s (not beneath --writable), got %s", op, want, got[op])
			}
		}
		if b, _ := os.ReadFile(j(".bashrc")); string(b) != "# the user's\n" {
			t.Errorf(".bashrc changed: %q", b)
		}
		for _, n := range []string{".envrc", ".git/hooks/pre-commit", ".git/hooks/pre-push", ".git/hooks/post-checkout", ".vscode", ".idea", "g", "h", "cfg", ".claude/settings.local.json"} {
			if _, err := os.Lstat(j(n)); err == nil {
				t.Errorf("%s exists after the run", n)
			}
		}
		if b, _ := os.ReadFile(j(".git/config")); strings.Contains(string(b), "planted") || len(b) == 0 {
			t.Errorf(".git/config changed: %q", b)
		}
	})
}

// TestProtectedPathsSwapRace: a thread that flips a symlink between a
// harmless file and .git/hooks/pre-commit while another opens it for
// writing never writes the hook: the checker decides on what it resolved
// and makes the open there, never letting the kernel resolve the path
// again.
func TestProtectedPathsSwapRace(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		p := gitProject(t, e)
		hook := filepath.Join(p, ".git", "hooks", "pre-commit")
		if err := os.WriteFile(hook, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		os.Lchown(hook, m.uid(), m.uid())
		res := e.run(e.args(opts("", "2", "--writable", p), e.helper("swaprace", "-link", filepath.Join(p, "lnk"),
			"-harmless", filepath.Join(p, "a.txt"), "-target", hook, "-n", "3000")))
		wantCode(t, res, 0)
		if !strings.Contains(res.stdout, "opens=") || strings.Contains(res.stdout, "opens=0\n") {
			t.Fatalf("the race never opened the harmless file: %v", res)
		}
		if b, _ := os.ReadFile(hook); string(b) != "#!/bin/sh\n" {
			t.Fatalf("the hook was written through a swapped symlink: %q (%v)", b, res)
		}
	})
}

// TestProtectedPathsGitWorks: the day-to-day git commands write objects,
// refs, the index and logs, which stay writable.
func TestProtectedPathsGitWorks(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		p := gitProject(t, e)
		script := `set -e; cd "$1"
git add a.txt
git commit -qm first
git checkout -qb topic
echo b > b.txt; git add b.txt; git commit -qm second
git tag v1
echo x > /dev/null
# The test's pipes are root's: only a root runner may reopen them.
if [ "$(id -u)" = 0 ]; then echo to-stderr > /dev/stderr; echo y > /dev/fd/1; fi
mkdir -p .git/hooks .vscode-not
echo done`
		res := e.run(e.args(opts("", "2", "--writable", p), []string{"/bin/sh", "-c", script, "sh", p}),
			"HOME="+p, "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.com", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.com",
			"GIT_CONFIG_NOSYSTEM=1")
		wantCode(t, res, 0)
		if m.uid() == 0 && (!strings.Contains(res.stderr, "to-stderr") || !strings.Contains(res.stdout, "y\ndone")) {
			t.Errorf("/dev/stderr or /dev/fd/1 not the runner's own: %v", res)
		}
		out, err := exec.Command("git", "-c", "safe.directory=*", "-C", p, "log", "--format=%s %D", "topic").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "second") || !strings.Contains(string(out), "tag: v1") {
			t.Fatalf("git log after the run: %v: %s (run: %v)", err, out, res)
		}
	})
}

// TestProtectedPathsRegrant: an explicit --writable naming a protected
// path re-grants that path alone.
func TestProtectedPathsRegrant(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		p := gitProject(t, e)
		hooks := filepath.Join(p, ".git", "hooks")
		got := fsResults(t, e, []string{"--writable", p, "--writable", hooks},
			"openat:"+filepath.Join(hooks, "pre-commit"), "open:"+filepath.Join(p, ".bashrc"), "openat:"+filepath.Join(p, ".git", "config"))
		if r := got["openat:"+filepath.Join(hooks, "pre-commit")]; r != "ok" {
			t.Errorf("a hook beneath an explicit --writable %s: want ok, got %s", hooks, r)
		}
		for _, n := range []string{"open:" + filepath.Join(p, ".bashrc"), "openat:" + filepath.Join(p, ".git", "config")} {
			if got[n] != "EROFS" {
				t.Errorf("%s: want EROFS (not re-granted), got %s", n, got[n])
			}
		}
	})
}

// TestProtectedPathsSettings: the settings file read for the run, beneath
// the writable project, is protected: the runner cannot rewrite it for the
// next run.
func TestProtectedPathsSettings(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		p := gitProject(t, e)
		s := filepath.Join(p, "corral.json")
		if err := os.WriteFile(s, []byte(`{"timeout": 60}`), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chown(s, m.uid(), m.uid())
		got := fsResults(t, e, []string{"--settings", s, "--writable", p}, "openat:"+s, "rename:"+filepath.Join(p, "a.txt")+","+s)
		for op, r := range got {
			// A namespace mode's read-only bind: renaming over a mount
			// point is EBUSY.
			if r != "EROFS" && !(m.pidns() && r == "EBUSY" && strings.HasPrefix(op, "rename:")) {
				t.Errorf("%s: want EROFS (the settings file read), got %s", op, r)
			}
		}
	})
}

// In namespace modes a protected name that did not exist when the run
// began cannot be a read-only mount: the checker refuses its creation
// (TestProtectedPathsRefused), and what appears there anyway — a runner
// thread that won a race against the checker's look, or a file made from
// outside the run — is moved aside the moment it appears (inotify on its
// folder), named, and never deleted. Here the file is made from outside,
// while the runner waits, so the test does not depend on winning a race:
// the runner itself sees it moved aside during the run.
func TestProtectedPathsAbsentMovedAsideLive(t *testing.T) {
	namespaceModes(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		p := gitProject(t, e)
		j := func(n string) string { return filepath.Join(p, n) }
		script := `touch "$1/ready"
i=0
while [ ! -e "$1/.envrc.corral-refused" ]; do i=$((i+1)); [ $i -gt 2000 ] && { echo not-moved; exit 0; }; sleep 0.01; done
echo moved`
		r := e.start(e.args(opts("", "2", "--writable", p), []string{"/bin/sh", "-c", script, "sh", p}))
		deadline := time.Now().Add(corralTimeout)
		for {
			if _, err := os.Lstat(j("ready")); err == nil {
				break
			}
			if r.exited() || time.Now().After(deadline) {
				t.Fatalf("the runner never got ready: %v", r.wait(corralTimeout))
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := os.WriteFile(j(".envrc"), []byte("echo PLANTED\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		res := r.wait(corralTimeout)
		wantCode(t, res, 0)
		if !strings.Contains(res.stdout, "moved\n") || strings.Contains(res.stdout, "not-moved") {
			t.Errorf(".envrc was not moved aside during the run: %v", res)
		}
		if !strings.Contains(res.stderr, "refused write to "+j(".envrc")+": a protected path the run created; moved aside to "+j(".envrc.corral-refused")) {
			t.Errorf("stderr does not name it:\n%s", res.stderr)
		}
		if _, err := os.Lstat(j(".envrc")); err == nil {
			t.Errorf(".envrc is at its name after the run")
		}
		if b, _ := os.ReadFile(j(".envrc.corral-refused")); string(b) != "echo PLANTED\n" {
			t.Errorf("what was moved aside is not kept whole: %q", b)
		}
	})
}

// A runner thread that flips a symlink between a harmless file and an
// absent protected name (.envrc) while another opens it for writing may
// win against the checker's look, which decides nothing in namespace
// modes: whatever it makes at .envrc is moved aside, so nothing is at
// the name when the run ends.
func TestProtectedPathsAbsentSwapRace(t *testing.T) {
	namespaceModes(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		p := gitProject(t, e)
		res := e.run(e.args(opts("", "2", "--writable", p), e.helper("swaprace", "-link", filepath.Join(p, "lnk"),
			"-harmless", filepath.Join(p, "a.txt"), "-target", filepath.Join(p, ".envrc"), "-n", "3000")))
		wantCode(t, res, 0)
		// Each path is named once, whatever the number of wins.
		if n := strings.Count(res.stderr, "refused write to "+filepath.Join(p, ".envrc")+": a protected path the run created"); n > 1 {
			t.Errorf(".envrc named %d times; want at most once:\n%s", n, res.stderr)
		}
		if !strings.Contains(res.stdout, "opens=") || strings.Contains(res.stdout, "opens=0\n") {
			t.Fatalf("the race never opened the harmless file: %v", res)
		}
		if _, err := os.Lstat(filepath.Join(p, ".envrc")); err == nil {
			b, _ := os.ReadFile(filepath.Join(p, ".envrc"))
			t.Fatalf(".envrc is at its name after the run: %q (%v)", b, res)
		}
	})
}

// A protected path's metadata cannot change either, in every mode: a
// chmod +x is how a planted hook would be made to run, a chmod of the
// user's .bashrc how it would be made someone else's to write. The same
// chmod of a file the run may write works.
func TestProtectedPathsMetadata(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		p := gitProject(t, e)
		hook := filepath.Join(p, ".git", "hooks", "pre-commit.sample-corral")
		if err := os.WriteFile(hook, []byte("#!/bin/sh\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Lchown(hook, m.uid(), m.uid())
		ops := []string{"chmod:" + hook + ":755", "chmod:" + filepath.Join(p, ".bashrc") + ":666", "setxattr:" + filepath.Join(p, ".git", "config"),
			"chmod:" + filepath.Join(p, "a.txt") + ":755"}
		res := e.run(e.args(opts("", "2", "--writable", p), e.helper(append([]string{"meta"}, ops...)...)))
		wantCode(t, res, 0)
		got := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(res.stdout), "\n") {
			if op, r, ok := strings.Cut(line, "="); ok {
				got[op] = r
			}
		}
		for _, op := range ops[:3] {
			if got[op] != "EROFS" {
				t.Errorf("%s: want EROFS (a protected path), got %q (%v)", op, got[op], res)
			}
		}
		if got[ops[3]] != "ok" {
			t.Errorf("%s: want ok (beneath --writable), got %q", ops[3], got[ops[3]])
		}
		if fi, _ := os.Stat(hook); fi == nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("the hook's mode changed: %v", fi)
		}
	})
}

// A file-heavy run under --writable: tar -x of 20,000 files, every one
// created, written and given its mode and times, in every mode; in
// subreaper mode each open goes through the checker and comes back by
// SECCOMP_ADDFD_FLAG_SEND. A signal to the checker's thread during that
// hand-over once made an open "succeed" as fd 0 (tar: "Cannot write: Bad
// file descriptor" after a few thousand files): every file must arrive,
// while corral is sent a forwarded signal without pause.
func TestWritableFileHeavyRun(t *testing.T) {
	archive := benchArchive(t)
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		w := e.file("w")
		if err := os.Mkdir(w, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chown(w, m.uid(), m.uid())
		r := e.start(e.args([]string{"--writable", w}, []string{"/usr/bin/tar", "-xf", archive, "-C", w}))
		// SIGWINCH, forwarded to tar (which ignores it), lands on any
		// thread of corral's that does not block it, the checker's
		// workers included: it is what makes the hand-over meet a signal.
		for !r.exited() {
			_ = r.cmd.Process.Signal(syscall.SIGWINCH)
			time.Sleep(200 * time.Microsecond)
		}
		res := r.wait(corralTimeout)
		wantCode(t, res, 0)
		n := 0
		filepath.WalkDir(w, func(_ string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				n++
			}
			return nil
		})
		if want := benchTreeFiles(); n != want {
			t.Errorf("%d files extracted, want %d", n, want)
		}
	})
}
