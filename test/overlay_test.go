package test

// --overlay and corral changes (SPEC, "Copy-on-write workspace"; issue 36).

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// ovWorld is one overlay test's DIR and state folder, owned by the mode's
// uid and gid (rootless overlayfs copies a file up only when its owner
// and group are mapped).
type ovWorld struct {
	e     *env
	dir   string
	state string
}

func newOvWorld(e *env) *ovWorld {
	e.t.Helper()
	w := &ovWorld{e: e, dir: e.file("proj"), state: e.file("state")}
	for _, d := range []string{w.dir, w.state, w.dir + "/sub", w.dir + "/olddir"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			e.t.Fatal(err)
		}
	}
	e.writeFile(w.dir+"/a.txt", "one\ntwo\nthree\n", 0o644)
	e.writeFile(w.dir+"/b.txt", "bee\n", 0o644)
	e.writeFile(w.dir+"/sub/c.txt", "sea\n", 0o644)
	e.writeFile(w.dir+"/olddir/f", "eff\n", 0o644)
	w.chown(e.dir)
	return w
}

func (w *ovWorld) chown(path string) {
	w.e.t.Helper()
	gid := 0
	if w.e.m.rootless {
		gid = nobodyGID
	}
	err := filepath.Walk(path, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, w.e.m.uid(), gid)
	})
	if err != nil {
		w.e.t.Fatal(err)
	}
}

func (w *ovWorld) env() string { return "XDG_STATE_HOME=" + w.state }

// run runs corral --overlay DIR (more options first) with a shell script
// in DIR.
func (w *ovWorld) run(script string, more ...string) result {
	w.e.t.Helper()
	o := append(append([]string{"--grace", "2"}, more...), "--overlay", w.dir)
	cmd := w.e.command(w.e.args(o, []string{"/bin/sh", "-c", "cd " + shq(w.dir) + " || exit 99\n" + script}), w.env())
	return w.e.startCmd(cmd).wait(corralTimeout)
}

// changes runs corral changes ARGS as the mode's user.
func (w *ovWorld) changes(args ...string) result {
	w.e.t.Helper()
	cmd := w.e.command(append([]string{"changes"}, args...), w.env())
	return w.e.startCmd(cmd).wait(corralTimeout)
}

var seeRe = regexp.MustCompile(`corral: overlay (\S+): (\d+) modified, (\d+) added, (\d+) deleted; see: corral changes show (\S+)`)

// folder is the changes folder the closing line names.
func (w *ovWorld) folder(res result) string {
	w.e.t.Helper()
	m := seeRe.FindStringSubmatch(res.stderr)
	if m == nil {
		w.e.t.Fatalf("no closing line: %s", res)
	}
	if m[1] != w.dir {
		w.e.t.Fatalf("closing line names %s, want %s", m[1], w.dir)
	}
	return m[5]
}

// tree is a folder as text: each path, its type and mode, a file's content,
// a link's target.
func tree(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fmt.Fprintf(&b, "%s %v", rel, fi.Mode())
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			fmt.Fprintf(&b, " -> %s", l)
		case fi.Mode().IsRegular():
			c, _ := os.ReadFile(p)
			fmt.Fprintf(&b, " %q", c)
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

const agentScript = `echo four >> a.txt && rm b.txt && echo new > n.txt && mv sub/c.txt sub/d.txt && ln -s a.txt link && chmod 755 a.txt && mkdir empty && mv olddir newdir`

func pidnsOnly(t *testing.T, m mode) {
	if !m.pidns() {
		t.Skip("--overlay needs a namespace mode")
	}
}

func TestOverlayCapturesShowApplyDiscard(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		pidnsOnly(t, m)
		e := newEnv(t, m)
		w := newOvWorld(e)
		before := tree(t, w.dir)
		// The run's view, made by the same script run directly on a copy.
		ref := e.file("ref")
		if out, err := exec.Command("cp", "-a", w.dir, ref).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v: %s", err, out)
		}
		if out, err := exec.Command("/bin/sh", "-c", "cd "+shq(ref)+" && "+agentScript).CombinedOutput(); err != nil {
			t.Fatalf("reference: %v: %s", err, out)
		}
		res := w.run(agentScript)
		wantCode(t, res, 0)
		if got := tree(t, w.dir); got != before {
			t.Fatalf("DIR changed by the run:\n%s\nwant:\n%s", got, before)
		}
		if m := seeRe.FindStringSubmatch(res.stderr); m == nil || m[2] != "1" || m[3] != "6" || m[4] != "3" {
			t.Fatalf("want 1 modified, 6 added, 3 deleted: %s", res)
		}
		folder := w.folder(res)

		show := w.changes("show", folder)
		wantCode(t, show, 0)
		for _, want := range []string{"\nM a.txt (mode 0644 -> 0755)\n", "\nD b.txt\n", "\nA n.txt\n", "\nA link -> a.txt\n", "\nA empty/\n", "\nD sub/c.txt\n", "\nA sub/d.txt\n", "\nD olddir/\n", "\nA newdir/f\n",
			"--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,4 @@\n one\n two\n three\n+four\n", "--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1 @@\n+new\n", "--- a/b.txt\n+++ /dev/null\n"} {
			if !strings.Contains(show.stdout, want) {
				t.Errorf("show lacks %q:\n%s", want, show.stdout)
			}
		}
		stat := w.changes("show", folder, "--stat")
		wantCode(t, stat, 0)
		if strings.Contains(stat.stdout, "+++") || !strings.Contains(stat.stdout, "M a.txt") {
			t.Errorf("show --stat: want the list only:\n%s", stat.stdout)
		}
		list := w.changes("list")
		if !strings.Contains(list.stdout, folder) {
			t.Errorf("list lacks %s: %s", folder, list)
		}

		wantCode(t, w.changes("apply", folder), 0)
		if got, want := tree(t, w.dir), tree(t, ref); got != want {
			t.Fatalf("after apply DIR is\n%s\nwant the run's view\n%s", got, want)
		}
		wantCode(t, w.changes("discard", folder), 0)
		if _, err := os.Lstat(folder); err == nil {
			t.Fatalf("discard left %s", folder)
		}
	})
}

func TestOverlayApplyRefusedAfterChangeBeneath(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		pidnsOnly(t, m)
		e := newEnv(t, m)
		w := newOvWorld(e)
		res := w.run(`echo run > a.txt && echo run > new.txt`)
		wantCode(t, res, 0)
		folder := w.folder(res)
		e.writeFile(w.dir+"/a.txt", "user\n", 0o644)
		e.writeFile(w.dir+"/new.txt", "user\n", 0o644)
		w.chown(w.dir)
		ap := w.changes("apply", folder)
		wantCode(t, ap, 1)
		for _, want := range []string{"refused: a.txt: changed in", "refused: new.txt: "} {
			if !strings.Contains(ap.stderr, want) {
				t.Errorf("apply: want %q: %s", want, ap)
			}
		}
		if c, _ := os.ReadFile(w.dir + "/a.txt"); string(c) != "user\n" {
			t.Fatalf("a refused apply wrote a.txt: %q", c)
		}
		wantCode(t, w.changes("apply", folder, "--force"), 0)
		if c, _ := os.ReadFile(w.dir + "/a.txt"); string(c) != "run\n" {
			t.Fatalf("apply --force: a.txt is %q", c)
		}
	})
}

func TestOverlayNothingChangedKeepsNothing(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		pidnsOnly(t, m)
		e := newEnv(t, m)
		w := newOvWorld(e)
		res := w.run(`cat a.txt >/dev/null && ls -R >/dev/null`)
		wantCode(t, res, 0)
		if strings.Contains(res.stderr, "overlay") {
			t.Errorf("a run that changed nothing names a folder: %s", res)
		}
		ents, _ := os.ReadDir(filepath.Join(w.state, "corral", "changes"))
		if len(ents) != 0 {
			t.Fatalf("a run that changed nothing kept %v", ents)
		}
	})
}

func TestOverlayRefusedWhereItCannotWork(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		w := newOvWorld(e)
		if !m.pidns() {
			res := w.run(`true`)
			wantCode(t, res, 125)
			if !strings.Contains(res.stderr, "no mount namespace") {
				t.Fatalf("subreaper --overlay: want the cause named: %s", res)
			}
			return
		}
		mnt := w.dir + "/mnt"
		if err := os.Mkdir(mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
			missingFeature(t, "mount a tmpfs: "+err.Error())
		}
		defer syscall.Unmount(mnt, syscall.MNT_DETACH)
		res := w.run(`true`)
		wantCode(t, res, 125)
		if !strings.Contains(res.stderr, "another mount lies beneath it: "+mnt) {
			t.Fatalf("a mount beneath DIR: want it named: %s", res)
		}
	})
}

func TestOverlayWithReadOnlyAndNetNone(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		pidnsOnly(t, m)
		e := newEnv(t, m)
		w := newOvWorld(e)
		out := e.file("outside")
		res := w.run(`echo x > a.txt && { echo y > `+shq(out)+` 2>/dev/null && echo OUTSIDE-WRITTEN; true; } && echo "interfaces: $(grep -c : /proc/net/dev)"`, "--read-only", "--net", "none")
		wantCode(t, res, 0)
		if strings.Contains(res.stdout, "OUTSIDE-WRITTEN") {
			t.Fatalf("--read-only elsewhere: the runner wrote outside DIR")
		}
		if !strings.Contains(res.stdout, "interfaces: 1\n") {
			t.Fatalf("--net none beside --overlay: want loopback alone: %s", res)
		}
		if m := seeRe.FindStringSubmatch(res.stderr); m == nil || m[2] != "1" {
			t.Fatalf("want 1 modified: %s", res)
		}
	})
}

func TestOverlayLingeringProcessWritesToLayer(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		pidnsOnly(t, m)
		e := newEnv(t, m)
		w := newOvWorld(e)
		// The leftover writes when the teardown's SIGTERM reaches it, after
		// the runner exited.
		res := w.run(`setsid /bin/sh -c 'trap "echo late > late.txt; exit 0" TERM; echo up > up.txt; while :; do sleep 0.05; done' & i=0; while [ ! -e up.txt ] && [ $i -lt 2000 ]; do sleep 0.01; i=$((i+1)); done; exit 0`)
		wantCode(t, res, 0)
		folder := w.folder(res)
		if _, err := os.Lstat(w.dir + "/late.txt"); err == nil {
			t.Fatalf("the leftover wrote into DIR")
		}
		// The closing line counts the layer after the teardown: the
		// leftover's last write included.
		if m := seeRe.FindStringSubmatch(res.stderr); m == nil || m[3] != "2" {
			t.Fatalf("want 2 added (up.txt, late.txt): %s", res)
		}
		if c, err := os.ReadFile(filepath.Join(folder, "layers/0/upper/late.txt")); err != nil || string(c) != "late\n" {
			t.Fatalf("the leftover's write is not in the layer: %q %v", c, err)
		}
	})
}

func TestOverlayChangesUnreachableFromLaterRun(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		pidnsOnly(t, m)
		e := newEnv(t, m)
		w := newOvWorld(e)
		res := w.run(`echo secret > a.txt`)
		wantCode(t, res, 0)
		folder := w.folder(res)
		probe := `cat ` + shq(folder+"/layers/0/upper/a.txt") + ` && echo READ; echo x > ` + shq(folder+"/planted") + ` && echo WROTE; true`
		cmd := e.command(e.args([]string{"--writable", e.dir}, []string{"/bin/sh", "-c", probe}), w.env(), "HOME="+e.dir)
		later := e.startCmd(cmd).wait(corralTimeout)
		wantCode(t, later, 0)
		if strings.Contains(later.stdout, "READ") || strings.Contains(later.stdout, "WROTE") {
			t.Fatalf("a later --writable run reached the changes folder: %s", later)
		}
	})
}

func TestOverlayApplySafety(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		pidnsOnly(t, m)
		e := newEnv(t, m)
		w := newOvWorld(e)
		if err := os.MkdirAll(w.dir+"/.git/hooks", 0o755); err != nil {
			t.Fatal(err)
		}
		w.chown(w.dir)
		res := w.run(`mkfifo pipe && echo s > suid && chmod 4755 suid && printf '#!/bin/sh\necho pwned\n' > .git/hooks/pre-commit && chmod 755 .git/hooks/pre-commit && echo w > sub/w.txt`)
		wantCode(t, res, 0)
		folder := w.folder(res)
		show := w.changes("show", folder, "--stat")
		lines := strings.Split(show.stdout, "\n")
		if len(lines) < 2 || !strings.HasPrefix(lines[1], "A .git/hooks/pre-commit") || !strings.Contains(lines[1], "protected") {
			t.Fatalf("show: want the hook first, marked:\n%s", show.stdout)
		}
		ap := w.changes("apply", folder)
		wantCode(t, ap, 1)
		for _, want := range []string{"refused: pipe: a FIFO", "refused: .git/hooks/pre-commit: a protected path"} {
			if !strings.Contains(ap.stderr, want) {
				t.Errorf("apply: want %q: %s", want, ap)
			}
		}
		if _, err := os.Lstat(w.dir + "/.git/hooks/pre-commit"); err == nil {
			t.Fatal("a refused apply wrote the hook")
		}
		// Nor a device node (a root runner with CAP_MKNOD could make one;
		// planted here), and --force takes neither.
		dev := filepath.Join(folder, "layers/0/upper/dev")
		if err := syscall.Mknod(dev, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
			t.Fatal(err)
		}
		ap = w.changes("apply", folder, "--force")
		wantCode(t, ap, 1)
		for _, want := range []string{"refused: pipe: a FIFO", "refused: dev: a device node"} {
			if !strings.Contains(ap.stderr, want) {
				t.Errorf("apply --force: want %q: %s", want, ap)
			}
		}
		for _, p := range []string{"pipe", "dev"} {
			if _, err := os.Lstat(filepath.Join(w.dir, p)); err == nil {
				t.Fatalf("a refused apply wrote %s", p)
			}
			if err := os.Remove(filepath.Join(folder, "layers/0/upper", p)); err != nil {
				t.Fatal(err)
			}
		}
		// A symlink planted where the run wrote into a folder: apply
		// replaces it with the run's folder, never writes through it.
		outside := e.file("outside")
		if err := os.Mkdir(outside, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(w.dir + "/sub"); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, w.dir+"/sub"); err != nil {
			t.Fatal(err)
		}
		wantCode(t, w.changes("apply", folder, "--force"), 0)
		fi, err := os.Stat(w.dir + "/suid")
		if err != nil || fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 || fi.Mode().Perm() != 0o755 {
			t.Fatalf("suid after apply: %v %v (want 0755 without setuid)", fi.Mode(), err)
		}
		if ents, _ := os.ReadDir(outside); len(ents) != 0 {
			t.Fatalf("apply wrote through a symlink it did not write: %v", ents)
		}
		if fi, err := os.Lstat(w.dir + "/sub/w.txt"); err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("sub/w.txt after apply: %v", err)
		}
		if c, _ := os.ReadFile(w.dir + "/.git/hooks/pre-commit"); !bytes.Contains(c, []byte("pwned")) {
			t.Fatalf("apply --force: the hook is %q", c)
		}
	})
}

func TestOverlayGitChangedBeneath(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		pidnsOnly(t, m)
		e := newEnv(t, m)
		w := newOvWorld(e)
		if err := os.MkdirAll(w.dir+"/.git/objects", 0o755); err != nil {
			t.Fatal(err)
		}
		e.writeFile(w.dir+"/.git/index", "i", 0o644)
		w.chown(w.dir)
		res := w.run(`echo o > .git/objects/o1`)
		wantCode(t, res, 0)
		folder := w.folder(res)
		e.writeFile(w.dir+"/.git/index", "changed", 0o644)
		ap := w.changes("apply", folder)
		wantCode(t, ap, 1)
		if !strings.Contains(ap.stderr, "refused: .git: changed in") {
			t.Fatalf("apply: want .git named: %s", ap)
		}
	})
}

// A rootless overlay has no redirect_dir: rename(2) of a folder that came
// from DIR is EXDEV, and mv copies it instead.
func TestOverlayDirectoryRename(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		pidnsOnly(t, m)
		e := newEnv(t, m)
		w := newOvWorld(e)
		res := w.run(`perl -e 'rename("olddir", "renamed") or print "rename: ", ($!{EXDEV} ? "EXDEV" : $!), "\n"'; mv olddir newdir && echo MV-OK`)
		wantCode(t, res, 0)
		if !strings.Contains(res.stdout, "rename: EXDEV") {
			t.Errorf("rename(2) of a lower folder: want EXDEV: %s", res)
		}
		if !strings.Contains(res.stdout, "MV-OK") {
			t.Errorf("mv of a lower folder: want it to copy: %s", res)
		}
		folder := w.folder(res)
		wantCode(t, w.changes("apply", folder), 0)
		if c, _ := os.ReadFile(w.dir + "/newdir/f"); string(c) != "eff\n" {
			t.Fatalf("after apply newdir/f is %q", c)
		}
		if _, err := os.Lstat(w.dir + "/olddir"); err == nil {
			t.Fatal("after apply olddir remains")
		}
	})
}

// git runs git on the host side as root on a folder the mode's user owns.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	a := append([]string{"-c", "safe.directory=*", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main", "-C", dir}, args...)
	out, err := exec.Command("git", a...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return string(out)
}

// apply gates SPEC's protected paths from the one list a --writable run is
// held to (plan.Protect): the folder core.hooksPath names, the hooks of a
// repository the run itself made at DIR's top, and the settings file the
// run read.
func TestOverlayApplyGatesHooksPath(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		pidnsOnly(t, m)
		for _, c := range []struct {
			name, setup, script, hook string
		}{
			{"core.hooksPath", "hooksPath", `mkdir .githooks && printf '#!/bin/sh\necho pwned\n' > .githooks/pre-commit && chmod 755 .githooks/pre-commit && echo ok > ok.txt`, ".githooks/pre-commit"},
			{"a repository the run made", "", `git init -q . && printf '#!/bin/sh\necho pwned\n' > .git/hooks/pre-commit && chmod 755 .git/hooks/pre-commit && echo ok > ok.txt`, ".git/hooks/pre-commit"},
			{"the settings file", "settings", `echo '{"allow-net": ["evil.example"]} pwned' > corral.json && echo ok > ok.txt`, "corral.json"},
		} {
			t.Run(c.name, func(t *testing.T) {
				e := newEnv(t, m)
				w := newOvWorld(e)
				if c.setup == "hooksPath" {
					git(t, w.dir, "init", "-q")
					git(t, w.dir, "config", "core.hooksPath", ".githooks")
					w.chown(w.dir)
				}
				var more []string
				if c.setup == "settings" {
					e.writeFile(w.dir+"/corral.json", "{}\n", 0o644)
					w.chown(w.dir)
					more = []string{"--settings", w.dir + "/corral.json"}
				}
				res := w.run(c.script, more...)
				wantCode(t, res, 0)
				folder := w.folder(res)
				show := w.changes("show", folder, "--stat")
				wantCode(t, show, 0)
				var hookLine, okLine int
				for i, l := range strings.Split(show.stdout, "\n") {
					switch {
					case strings.HasPrefix(l, "A "+c.hook):
						hookLine = i
						if !strings.Contains(l, "protected") {
							t.Errorf("show: %s not marked protected:\n%s", c.hook, show.stdout)
						}
					case strings.HasPrefix(l, "A ok.txt"):
						okLine = i
						if strings.Contains(l, "protected") {
							t.Errorf("show: ok.txt marked protected:\n%s", show.stdout)
						}
					}
				}
				if c.setup == "settings" {
					hookLine = strings.Index(show.stdout, "\nM corral.json")
					if hookLine < 0 || !strings.Contains(show.stdout, "M corral.json  (protected") {
						t.Errorf("show: corral.json not marked protected:\n%s", show.stdout)
					}
					hookLine, okLine = 1, 2
				}
				if hookLine == 0 || okLine == 0 || hookLine > okLine {
					t.Fatalf("show: want %s listed, before ok.txt:\n%s", c.hook, show.stdout)
				}
				ap := w.changes("apply", folder)
				wantCode(t, ap, 1)
				if !strings.Contains(ap.stderr, "refused: "+c.hook+": a protected path") {
					t.Fatalf("apply: want %s refused: %s", c.hook, ap)
				}
				if b, err := os.ReadFile(filepath.Join(w.dir, c.hook)); err == nil && bytes.Contains(b, []byte("pwned")) {
					t.Fatal("a refused apply wrote the hook")
				}
				if _, err := os.Lstat(w.dir + "/ok.txt"); err == nil {
					t.Fatal("a refused apply wrote ok.txt")
				}
				wantCode(t, w.changes("apply", folder, "--force"), 0)
				if c, err := os.ReadFile(filepath.Join(w.dir, c.hook)); err != nil || !bytes.Contains(c, []byte("pwned")) {
					t.Fatalf("apply --force: the hook is %q %v", c, err)
				}
			})
		}
	})
}

// A --changes folder elsewhere is listed beside the default ones, newest
// first, and no later run reaches it, even one whose --writable covers it.
func TestOverlayChangesElsewhere(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		pidnsOnly(t, m)
		e := newEnv(t, m)
		w := newOvWorld(e)
		first := w.run(`echo one > a.txt`)
		wantCode(t, first, 0)
		def := w.folder(first)
		elsewhere := filepath.Join(e.dir, "kept", "ch")
		if err := os.MkdirAll(filepath.Dir(elsewhere), 0o755); err != nil {
			t.Fatal(err)
		}
		w.chown(filepath.Dir(elsewhere))
		second := w.run(`echo two > a.txt`, "--changes", elsewhere)
		wantCode(t, second, 0)
		if got := w.folder(second); got != elsewhere {
			t.Fatalf("closing line names %s, want %s", got, elsewhere)
		}
		list := w.changes("list")
		wantCode(t, list, 0)
		lines := strings.Split(strings.TrimSpace(list.stdout), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], elsewhere+" ") || !strings.HasPrefix(lines[1], def+" ") {
			t.Fatalf("list: want %s, then %s:\n%s", elsewhere, def, list.stdout)
		}
		probe := `cat ` + shq(elsewhere+"/layers/0/upper/a.txt") + ` && echo READ; echo x > ` + shq(elsewhere+"/planted") + ` && echo WROTE; true`
		for _, opt := range [][]string{{"--writable", e.dir}, {"--writable", filepath.Dir(elsewhere)}, {"--read-only"}} {
			cmd := e.command(e.args(opt, []string{"/bin/sh", "-c", probe}), w.env(), "HOME="+e.dir)
			later := e.startCmd(cmd).wait(corralTimeout)
			wantCode(t, later, 0)
			if strings.Contains(later.stdout, "READ") || strings.Contains(later.stdout, "WROTE") {
				t.Fatalf("a later run with %v reached the changes folder %s: %s", opt, elsewhere, later)
			}
		}
		wantCode(t, w.changes("discard", elsewhere), 0)
		if _, err := os.Lstat(elsewhere); err == nil {
			t.Fatalf("discard left %s", elsewhere)
		}
		list = w.changes("list")
		if strings.Contains(list.stdout, elsewhere) || !strings.Contains(list.stdout, def) {
			t.Fatalf("list after discard: want %s alone:\n%s", def, list.stdout)
		}
		if ents, _ := os.ReadDir(filepath.Join(w.state, "corral", "elsewhere")); len(ents) != 0 {
			t.Fatalf("discard left the index's entry: %v", ents)
		}
	})
}

// A real git commit made in the run lands with apply, and the repository
// is whole after it; a commit made in DIR meanwhile refuses the run's
// changes beneath .git, naming it.
func TestOverlayGitCommit(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		pidnsOnly(t, m)
		e := newEnv(t, m)
		w := newOvWorld(e)
		git(t, w.dir, "init", "-q")
		git(t, w.dir, "add", "-A")
		git(t, w.dir, "commit", "-qm", "base")
		w.chown(w.dir)
		commit := `echo four >> a.txt && git -c user.name=agent -c user.email=a@a commit -qam "the run's" && echo committed`
		res := w.run(commit)
		wantCode(t, res, 0)
		if !strings.Contains(res.stdout, "committed") {
			t.Fatalf("git commit in the run: %s", res)
		}
		if got := git(t, w.dir, "log", "--format=%s"); got != "base\n" {
			t.Fatalf("DIR's log changed by the run: %q", got)
		}
		folder := w.folder(res)
		wantCode(t, w.changes("apply", folder), 0)
		if got := git(t, w.dir, "log", "--format=%s"); got != "the run's\nbase\n" {
			t.Fatalf("after apply the log is %q", got)
		}
		git(t, w.dir, "fsck", "--strict")
		if st := git(t, w.dir, "status", "--porcelain"); st != "" {
			t.Fatalf("after apply the work tree differs from the run's commit: %q", st)
		}

		// Both commit: the run in its layer, the user in DIR.
		res = w.run(`echo five >> a.txt && git -c user.name=agent -c user.email=a@a commit -qam "the run's second"`)
		wantCode(t, res, 0)
		folder = w.folder(res)
		e.writeFile(w.dir+"/b.txt", "the user's\n", 0o644)
		git(t, w.dir, "commit", "-qam", "the user's")
		ap := w.changes("apply", folder)
		wantCode(t, ap, 1)
		if !strings.Contains(ap.stderr, "refused: .git: changed in") {
			t.Fatalf("apply: want .git named: %s", ap)
		}
		if got := git(t, w.dir, "log", "--format=%s"); got != "the user's\nthe run's\nbase\n" {
			t.Fatalf("a refused apply changed the log: %q", got)
		}
	})
}

// The layer is mounted volatile: its unmount at the teardown makes no
// syncfs of the whole file system the changes folder lies on, which held
// corral's exit until every dirty page there, anyone's, was written.
func TestOverlayLayerVolatile(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		pidnsOnly(t, m)
		e := newEnv(t, m)
		w := newOvWorld(e)
		res := w.run(`grep " ` + w.dir + ` " /proc/self/mountinfo | tail -1`)
		wantCode(t, res, 0)
		if !strings.Contains(res.stdout, " overlay ") || !strings.Contains(res.stdout, "fsync=volatile") {
			t.Fatalf("want DIR's layer mounted volatile: %s", res)
		}
	})
}
