package test

// The filesystem rules as read-only mounts in namespace modes (issue 33,
// findings 1 and 7): metadata outside the writable set, beneath --hide and
// under --read-only is refused by the kernel (EROFS), and the protected
// paths beneath a --writable project cannot be planted. Subreaper mode has
// no mount namespace: its checker is tested elsewhere.

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// namespaceModes runs fn in the modes with a mount namespace.
//
// Each runs twice: with mount_setattr(2), and with the fallback a kernel
// before 5.12 gets (a read-only bind remount of each mount), which the
// test-only CORRAL_TEST_NO_MOUNT_SETATTR selects on this one.
func namespaceModes(t *testing.T, fn func(t *testing.T, m mode)) {
	forEachMode(t, func(t *testing.T, m mode) {
		if !m.pidns() {
			t.Skip("subreaper mode has no mount namespace: its metadata checks are the seccomp checker's")
		}
		fn(t, m)
		t.Run("no-mount_setattr", func(t *testing.T) {
			m := m
			m.env = append(slices.Clone(m.env), "CORRAL_TEST_NO_MOUNT_SETATTR=1")
			fn(t, m)
		})
	})
}

// otherGID is a group no runner is in.
const otherGID = 12345

var (
	readOnlyFS = []string{"EROFS"}
	// beneath --hide: Landlock's refusal where it has a right for the
	// call, the read-only mount's otherwise
	hiddenFS = []string{"EACCES", "ENOENT", "EROFS"}
	// a protected path: read-only, or a mount point (EBUSY), or on another
	// mount than the source of a rename (EXDEV)
	protectedFS = []string{"EROFS", "EBUSY", "EXDEV"}
)

// own gives path (and what lies beneath it) to the mode's uid, and to a
// group the runner is not in (otherGID), so that only the policy stands
// between the runner and a metadata change, a chgrp included.
func (e *env) own(path string) {
	e.t.Helper()
	uid := e.m.uid()
	err := filepath.Walk(path, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, otherGID)
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// fileState is what a metadata change would alter.
func fileState(t *testing.T, path string) string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return "missing: " + err.Error()
	}
	sz, _ := unix.Listxattr(path, nil)
	return fmt.Sprintf("mode %o uid %d gid %d mtime %d.%d xattrs %d", st.Mode, st.Uid, st.Gid, st.Mtim.Sec, st.Mtim.Nsec, sz)
}

// hostMountsUnder lists the mounts of the test's own namespace beneath dir.
func hostMountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			out = append(out, fields[4])
		}
	}
	return out
}

// metaOps are the metadata changes of every kind on path.
func (e *env) metaOps(path string, want []string) map[string][]string {
	ops := map[string][]string{
		"chmod:" + path + ":666":     want,
		"fchmod-ro:" + path + ":666": want,
		"setxattr:" + path:           want,
		"utimes:" + path:             want,
		"chattr:" + path:             want,
		"file-setattr:" + path:       want,
	}
	// The runner owns the file: without a capability, it may still give
	// it to its own group.
	ops[fmt.Sprintf("chown:%s:-1:%d", path, e.m.uid())] = want
	return ops
}

func merge(maps ...map[string][]string) map[string][]string {
	out := map[string][]string{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// Metadata outside the writable set, beneath --hide and under --read-only
// cannot change, whatever the runner's uid owns: the kernel refuses it on
// the runner's read-only mounts. A chmod +x beneath --writable works.
func TestMountsMetadata(t *testing.T) {
	namespaceModes(t, func(t *testing.T, m mode) {
		requireLandlock(t, 1)
		e := newEnv(t, m)
		dirs := e.mkdirs("w", "ro", "hid")
		w, ro, hid := dirs[0], dirs[1], dirs[2]
		e.writeFile(w+"/build", "#!/bin/sh\n", 0o644)
		e.writeFile(ro+"/f", "ro\n", 0o644)
		e.writeFile(hid+"/secret", "key\n", 0o600)
		e.own(e.dir)
		before := map[string]string{}
		for _, p := range []string{ro + "/f", ro, hid, hid + "/secret"} {
			before[p] = fileState(t, p)
		}
		mounts := hostMountsUnder(t, e.dir)

		// Without a policy each change is the runner's to make: the
		// policy is what refuses them below.
		control := e.file("control")
		e.writeFile(control, "c\n", 0o644)
		e.own(control)
		res := e.run(e.args(nil, e.helper(append([]string{"meta"}, tryOps(e.metaOps(control, ok))...)...)))
		wantCode(t, res, 0)
		wantTried(t, res, e.metaOps(control, ok))

		// Landlock refuses opening the hidden folder (for fchmod) first;
		// every change beneath it meets a read-only mount.
		hidden := merge(e.metaOps(hid, hiddenFS), e.metaOps(hid+"/secret", hiddenFS))
		cases := []struct {
			name string
			opts []string
			want map[string][]string
		}{
			{"writable", []string{"--writable", w, "--hide", hid}, merge(
				e.metaOps(ro+"/f", readOnlyFS), e.metaOps(ro, readOnlyFS), hidden,
				map[string][]string{
					"chmod:" + w + "/build:755": ok,
					"utimes:" + w + "/build":    ok,
					"write:/dev/null":           ok,
					"write:/dev/full":           {"ENOSPC"},
					// The init's own view, which stays writable, is not
					// the runner's to reach.
					"chmod:/proc/1/root" + ro + "/f:666": {"EACCES"},
				})},
			{"read-only", []string{"--read-only", "--hide", hid}, merge(
				e.metaOps(ro+"/f", readOnlyFS), e.metaOps(w+"/build", readOnlyFS), hidden,
				map[string][]string{"write:/dev/null": ok})},
			{"hide", []string{"--hide", hid}, merge(hidden,
				map[string][]string{"chmod:" + ro + "/f:644": ok})},
		}
		for _, c := range cases {
			res := e.run(e.args(c.opts, e.helper(append([]string{"meta"}, tryOps(c.want)...)...)))
			wantCode(t, res, 0)
			t.Run(c.name, func(t *testing.T) { wantTried(t, res, c.want) })
		}
		for p, was := range before {
			if now := fileState(t, p); now != was {
				t.Errorf("%s changed on the host: %s, was %s", p, now, was)
			}
		}
		if now := hostMountsUnder(t, e.dir); !slices.Equal(now, mounts) {
			t.Errorf("the host's mounts beneath the test's folder changed: %v, were %v", now, mounts)
		}
		e.assertGone()
	})
}

// A uid-0 runner under --read-only cannot make a root-owned binary setuid
// (every local user would become root after the run).
func TestMountsSetuid(t *testing.T) {
	namespaceModes(t, func(t *testing.T, m mode) {
		if m.uid() != 0 {
			t.Skip("the setuid case is a uid-0 runner's")
		}
		requireLandlock(t, 1)
		e := newEnv(t, m)
		prog := e.file("rootprog")
		data, err := os.ReadFile("/bin/true")
		if err != nil {
			t.Fatal(err)
		}
		e.writeFile(prog, string(data), 0o755)
		was := fileState(t, prog)
		res := e.run(e.args([]string{"--read-only"}, []string{"/bin/chmod", "4755", prog}))
		if res.code == 0 {
			t.Errorf("chmod 4755 under --read-only worked: %s", res)
		}
		if !strings.Contains(res.stderr, "Read-only file system") {
			t.Errorf("want the kernel's EROFS, got %s", res)
		}
		if now := fileState(t, prog); now != was {
			t.Errorf("the binary changed on the host: %s, was %s", now, was)
		}
		e.assertGone()
	})
}

// gitRepo makes a git project the mode's uid owns, with one commit and the
// protected files a project may hold.
func (e *env) gitRepo() string {
	e.t.Helper()
	p := e.mkdirs("proj")[0]
	for _, f := range []string{".bashrc", ".envrc", ".profile", ".gitmodules", ".mcp.json", "x", "a"} {
		e.writeFile(filepath.Join(p, f), "orig "+f+"\n", 0o644)
	}
	for _, d := range []string{".vscode", ".claude", ".idea"} {
		if err := os.Mkdir(filepath.Join(p, d), 0o755); err != nil {
			e.t.Fatal(err)
		}
	}
	e.writeFile(p+"/.vscode/tasks.json", "{}\n", 0o644)
	e.writeFile(p+"/.claude/settings.json", "{}\n", 0o644)
	e.git(p, "init", "-q", ".")
	e.git(p, "add", ".")
	e.git(p, "commit", "-q", "-m", "init")
	e.own(p)
	return p
}

func (e *env) git(dir string, args ...string) {
	e.t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		e.t.Fatalf("git %v: %v: %s", args, err, out)
	}
}

// treeState is every name beneath dir (but objects and logs, which git
// changes) with its content and metadata.
func treeState(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil // the project's own mtime: the runner may create in it
		}
		if rel == ".git/objects" || rel == ".git/logs" || rel == ".git/refs" {
			return filepath.SkipDir
		}
		sum := ""
		if info.Mode().IsRegular() && rel != ".git/index" {
			d, _ := os.ReadFile(p)
			sum = fmt.Sprintf("%x", sha256.Sum256(d))[:16]
		}
		fmt.Fprintf(&b, "%s %s %s\n", rel, fileState(t, p), sum)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Every protected path beneath a --writable project: it cannot be written,
// created in a protected folder, renamed over, linked or symlinked into
// place, its metadata cannot change, and .git cannot be renamed; git's own
// work goes on; an explicit --writable re-grants a protected path; a
// symlink swapped during the calls does not lead a write to one.
func TestMountsProtectedPaths(t *testing.T) {
	namespaceModes(t, func(t *testing.T, m mode) {
		requireLandlock(t, 1)
		e := newEnv(t, m)
		p := e.gitRepo()
		before := treeState(t, p)
		mounts := hostMountsUnder(t, e.dir)
		hooks, cfg := p+"/.git/hooks", p+"/.git/config"

		want := map[string][]string{
			"write:" + cfg:                              protectedFS,
			"create:" + hooks + "/pre-commit":           protectedFS,
			"mkdir:" + hooks + "/d":                     protectedFS,
			"link:" + p + "/x:" + hooks + "/pre-push":   protectedFS,
			"symlink:" + p + "/x:" + hooks + "/post-co": protectedFS,
			"rename:" + p + "/x:" + cfg:                 protectedFS,
			"rename:" + p + "/x:" + p + "/.bashrc":      protectedFS,
			"rename:" + p + "/.git:" + p + "/git2":      protectedFS,
			"rename:" + hooks + ":" + p + "/hooks2":     protectedFS,
			"remove:" + cfg:                             protectedFS,
			"remove:" + p + "/.envrc":                   protectedFS,
			"create:" + p + "/.vscode/new.json":         protectedFS,
			"chmod:" + hooks + ":777":                   protectedFS,
			"utimes:" + cfg:                             protectedFS,
			"setxattr:" + p + "/.gitmodules":            protectedFS,
			// The rest of the project is the runner's.
			"create:" + p + "/new":           ok,
			"chmod:" + p + "/a:755":          ok,
			"rename:" + p + "/a:" + p + "/b": ok,
		}
		for _, f := range []string{".bashrc", ".envrc", ".profile", ".gitmodules", ".mcp.json", ".vscode/tasks.json", ".claude/settings.json"} {
			want["append:"+p+"/"+f] = protectedFS
			want["chmod:"+p+"/"+f+":777"] = protectedFS
		}
		ops := tryOps(want)
		// Last: a symlink in the project swapped between a file of the
		// project and the hook, while another thread writes through it.
		swap := "swapwrite:" + p + "/lnk:" + p + "/sw:" + hooks + "/pre-commit"
		ops = append(ops, swap)
		want[swap] = ok
		res := e.run(e.args([]string{"--writable", p}, e.helper(append([]string{"meta"}, ops...)...)))
		wantCode(t, res, 0)
		wantTried(t, res, want)
		for _, gone := range []string{hooks + "/pre-commit", hooks + "/pre-push", hooks + "/post-co", p + "/git2"} {
			if _, err := os.Lstat(gone); err == nil {
				t.Errorf("%s exists after the run", gone)
			}
		}
		_ = os.Remove(p + "/new")
		_ = os.Remove(p + "/lnk")
		_ = os.Remove(p + "/sw")
		if err := os.Rename(p+"/b", p+"/a"); err != nil {
			t.Error(err)
		}
		if err := os.Chmod(p+"/a", 0o644); err != nil {
			t.Error(err)
		}
		if after := treeState(t, p); after != before {
			t.Errorf("the project's protected paths changed on the host:\nbefore:\n%s\nafter:\n%s", before, after)
		}
		if now := hostMountsUnder(t, e.dir); !slices.Equal(now, mounts) {
			t.Errorf("the host's mounts beneath the test's folder changed: %v, were %v", now, mounts)
		}

		// git's own work inside the sandbox goes on.
		script := `set -e; cd "$1"; g() { git -c user.name=t -c user.email=t@t "$@"; }
echo more >> x; g add x; g commit -q -m work; g checkout -q -b topic; g tag v1; g checkout -q -; echo GIT-OK`
		res = e.run(e.args([]string{"--writable", p}, []string{"/bin/sh", "-c", script, "sh", p}), "HOME="+p, "GIT_CONFIG_NOSYSTEM=1")
		wantCode(t, res, 0)
		if !strings.Contains(res.stdout, "GIT-OK") {
			t.Errorf("git inside the sandbox: %s", res)
		}
		out, err := exec.Command("git", "-c", "safe.directory=*", "-C", p, "log", "--oneline", "topic").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "work") {
			t.Errorf("the commit made inside is not on the host: %v: %s", err, out)
		}

		// An explicit --writable re-grants the hooks, and them alone.
		regrant := map[string][]string{
			"create:" + hooks + "/pre-commit": ok,
			"write:" + cfg:                    protectedFS,
		}
		res = e.run(e.args([]string{"--writable", p, "--writable", hooks}, e.helper(append([]string{"meta"}, tryOps(regrant)...)...)))
		wantCode(t, res, 0)
		wantTried(t, res, regrant)
		e.assertGone()
	})
}

// The mounts exist only for a filesystem rule: a plain run, and a run
// with a network policy alone, see the mount table the init made.
func TestMountsOnlyWithFilesystemRule(t *testing.T) {
	namespaceModes(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		probe := e.file("probe")
		e.writeFile(probe, "x\n", 0o644)
		e.own(probe)
		for _, o := range [][]string{nil, {"--net", "none"}} {
			res := e.run(e.args(o, e.helper("meta", "chmod:"+probe+":600", "utimes:"+probe)))
			wantCode(t, res, 0)
			wantTried(t, res, map[string][]string{"chmod:" + probe + ":600": ok, "utimes:" + probe: ok})
		}
		e.assertGone()
	})
}

// A writable path holding mounts of its own: in a user namespace a mount
// the caller has read-only is locked so, and the kernel clears the
// read-only flag of a tree all or none. The other mounts beneath the
// writable path stay writable; the locked one stays as the caller had it.
func TestMountsWritableWithMountsBeneath(t *testing.T) {
	namespaceModes(t, func(t *testing.T, m mode) {
		requireLandlock(t, 1)
		e := newEnv(t, m)
		w := e.mkdirs("w")[0]
		ro, rw := w+"/ro", w+"/rw"
		for _, d := range []string{ro, rw} {
			if err := os.Mkdir(d, 0o777); err != nil {
				t.Fatal(err)
			}
		}
		e.own(w)
		if err := unix.Mount(ro, ro, "", unix.MS_BIND, ""); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = unix.Unmount(ro, unix.MNT_DETACH) })
		if err := unix.Mount("", ro, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("tmpfs", rw, "tmpfs", 0, fmt.Sprintf("mode=0777,uid=%d", m.uid())); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = unix.Unmount(rw, unix.MNT_DETACH) })
		want := map[string][]string{
			"create:" + w + "/f":  ok,
			"create:" + rw + "/f": ok,
			"create:" + ro + "/f": readOnlyFS,
		}
		res := e.run(e.args([]string{"--writable", w}, e.helper(append([]string{"meta"}, tryOps(want)...)...)))
		wantCode(t, res, 0)
		wantTried(t, res, want)
		e.assertGone()
	})
}

// The settings file corral read for the run is protected beneath a
// writable path: the runner cannot set the next run's policy.
func TestMountsSettingsFile(t *testing.T) {
	namespaceModes(t, func(t *testing.T, m mode) {
		requireLandlock(t, 1)
		e := newEnv(t, m)
		p := e.mkdirs("proj")[0]
		settings := p + "/corral.json"
		e.writeFile(settings, fmt.Sprintf("{\"writable\": [%q]}\n", p), 0o644)
		e.own(p)
		before := fileState(t, settings)
		want := map[string][]string{
			"append:" + settings:         readOnlyFS,
			"chmod:" + settings + ":666": readOnlyFS,
			"create:" + p + "/f":         ok,
		}
		res := e.run(e.args([]string{"--settings", settings}, e.helper(append([]string{"meta"}, tryOps(want)...)...)))
		wantCode(t, res, 0)
		wantTried(t, res, want)
		if now := fileState(t, settings); now != before {
			t.Errorf("the settings file changed: %s, was %s", now, before)
		}
		e.assertGone()
	})
}
