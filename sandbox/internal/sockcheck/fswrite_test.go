package sockcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func init() {
	scenarios["fswrite"] = scenarioFSWrite
	scenarios["bench-fs"] = scenarioFSBench
}

// fsPolicy is a WritePolicy for dir (canonical): dir writable, dir/.git
// pinned, dir/.git/hooks and dir/.bashrc protected.
func fsPolicy(t testing.TB) (Policy, string) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, ".git", "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	return Policy{Writes: &WritePolicy{
		Writable:  []string{dir},
		Protected: []string{filepath.Join(dir, ".git", "hooks"), filepath.Join(dir, ".bashrc")},
		Pinned:    []string{filepath.Join(dir, ".git")},
		Devices:   []string{"/dev/null"},
	}}, dir
}

func TestCheckedWrites(t *testing.T) {
	pol, dir := fsPolicy(t)
	var mu sync.Mutex // Report is called from every worker
	var refused []string
	pol.Report = func(r Refusal) {
		mu.Lock()
		defer mu.Unlock()
		refused = append(refused, r.Call+" "+r.Path)
	}
	run(t, "fswrite", pol, childWrites+"=1", "CORRAL_SOCKCHECK_DIR="+dir)
	mu.Lock()
	defer mu.Unlock()
	if len(refused) == 0 {
		t.Fatal("no refusal reported")
	}
}

func openErr(path string, flags int) (int, unix.Errno) {
	fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return -1, err.(unix.Errno)
	}
	return fd, 0
}

func scenarioFSWrite(c *child) {
	dir := os.Getenv("CORRAL_SOCKCHECK_DIR")
	j := func(n string) string { return filepath.Join(dir, n) }
	// An open for writing returns a descriptor of the caller's own.
	fd, e := openErr(j("a"), unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC)
	want(c, "create a file beneath the writable folder", e, 0)
	if e == 0 {
		if n, err := unix.Write(fd, []byte("hello")); err != nil || n != 5 {
			c.errorf("write through the checked descriptor: %d %v", n, err)
		}
		if fl, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); fl&unix.FD_CLOEXEC == 0 {
			c.errorf("O_CLOEXEC asked, the descriptor has no FD_CLOEXEC")
		}
		unix.Close(fd)
	}
	if b, _ := os.ReadFile(j("a")); string(b) != "hello" {
		c.errorf("the file holds %q", b)
	}
	// A read-only open never goes to the checker, and works.
	fd, e = openErr(j("a"), unix.O_RDONLY)
	want(c, "read-only open", e, 0)
	unix.Close(fd)
	fd, e = openErr("/dev/null", unix.O_WRONLY)
	want(c, "/dev/null for writing", e, 0)
	unix.Close(fd)
	_, e = openErr(j(".bashrc"), unix.O_WRONLY|unix.O_CREAT)
	want(c, "create a protected file", e, unix.EROFS)
	_, e = openErr(j(".git/hooks/pre-commit"), unix.O_WRONLY|unix.O_CREAT)
	want(c, "create a hook", e, unix.EROFS)
	_, e = openErr(filepath.Dir(dir)+"/outside", unix.O_WRONLY|unix.O_CREAT)
	want(c, "create outside the writable folder", e, unix.EACCES)
	// A symlink is followed by reading it: the decision is on its target.
	os.Symlink(".git/hooks/post-merge", j("lnk"))
	_, e = openErr(j("lnk"), unix.O_WRONLY|unix.O_CREAT)
	want(c, "create a hook through a symlink", e, unix.EROFS)
	_, e = openErr(j("lnk"), unix.O_WRONLY|unix.O_CREAT|unix.O_NOFOLLOW)
	want(c, "O_NOFOLLOW on a symlink", e, unix.ELOOP)
	os.Symlink("a", j("lnk2"))
	fd, e = openErr(j("lnk2"), unix.O_WRONLY|unix.O_APPEND)
	want(c, "write through a symlink to a plain file", e, 0)
	unix.Close(fd)
	// Relative to a directory descriptor and to the working directory.
	dfd, err := unix.Open(j(".git"), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		c.fatalf("open .git: %v", err)
	}
	_, err = unix.Openat(dfd, "hooks/x", unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	want(c, "create a hook relative to a descriptor", errno(err), unix.EROFS)
	want(c, "mkdir beneath .git", errno(unix.Mkdirat(dfd, "refs", 0o755)), 0)
	want(c, "rename .git", errno(unix.Renameat2(unix.AT_FDCWD, j(".git"), unix.AT_FDCWD, j("g"), 0)), unix.EROFS)
	want(c, "rename over .git", errno(unix.Renameat2(unix.AT_FDCWD, j("a"), unix.AT_FDCWD, j(".git"), 0)), unix.EROFS)
	if err := unix.Chdir(dir); err != nil {
		c.fatalf("chdir: %v", err)
	}
	want(c, "a relative link into hooks", errno(unix.Linkat(unix.AT_FDCWD, "a", unix.AT_FDCWD, ".git/hooks/pre-push", 0)), unix.EROFS)
	want(c, "a relative mkdir", errno(unix.Mkdirat(unix.AT_FDCWD, "d", 0o755)), 0)
	want(c, "a relative rename", errno(unix.Renameat(unix.AT_FDCWD, "a", unix.AT_FDCWD, "d/a")), 0)
	want(c, "unlink", errno(unix.Unlinkat(unix.AT_FDCWD, "d/a", 0)), 0)
	want(c, "rmdir", errno(unix.Unlinkat(unix.AT_FDCWD, "d", unix.AT_REMOVEDIR)), 0)
	want(c, "rmdir a missing folder", errno(unix.Unlinkat(unix.AT_FDCWD, "d", unix.AT_REMOVEDIR)), unix.ENOENT)
	// A name that exists is EEXIST first, protected or not (mkdir -p).
	want(c, "mkdir an existing protected folder", errno(unix.Mkdirat(unix.AT_FDCWD, ".git/hooks", 0o755)), unix.EEXIST)
	_, err = unix.Open(".bashrc", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
	want(c, "O_EXCL create of a protected file", errno(err), unix.EROFS)
	// An unnamed file: decided on its folder.
	fd, err = unix.Open(".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	want(c, "O_TMPFILE in the writable folder", errno(err), 0)
	unix.Close(fd)
	_, err = unix.Open(".git/hooks/.", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	want(c, "O_TMPFILE in hooks", errno(err), unix.EROFS)
	// openat2 goes whole, its struct read once.
	_, err = unix.Openat2(unix.AT_FDCWD, ".bashrc", &unix.OpenHow{Flags: unix.O_WRONLY | unix.O_CREAT, Mode: 0o644})
	want(c, "openat2 a protected file", errno(err), unix.EROFS)
	fd, err = unix.Openat2(unix.AT_FDCWD, "b", &unix.OpenHow{Flags: unix.O_WRONLY | unix.O_CREAT | unix.O_CLOEXEC, Mode: 0o644, Resolve: unix.RESOLVE_BENEATH})
	want(c, "openat2 beneath", errno(err), 0)
	unix.Close(fd)
	_, err = unix.Openat2(unix.AT_FDCWD, "/etc/passwd", &unix.OpenHow{Flags: unix.O_RDONLY, Resolve: unix.RESOLVE_BENEATH})
	want(c, "openat2 an absolute path beneath", errno(err), unix.EXDEV)
}

// scenarioFSBench times n opens for writing (O_CREAT|O_TRUNC of an
// existing file) before the filter and after it, and n read-only opens
// after it: "FSBENCH plain checked readonly" in ns per call.
func scenarioFSBench(c *child) {
	dir := os.Getenv("CORRAL_SOCKCHECK_DIR")
	n, _ := strconv.Atoi(os.Getenv("CORRAL_SOCKCHECK_N"))
	path := filepath.Join(dir, "f")
	each := func(flags int) int64 {
		start := time.Now()
		for range n {
			fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0o644)
			if err != nil {
				c.fatalf("open: %v", err)
			}
			unix.Close(fd)
		}
		return int64(time.Since(start)) / int64(n)
	}
	wr := unix.O_WRONLY | unix.O_CREAT | unix.O_TRUNC
	plain := each(wr)
	c.install(false)
	checked := each(wr)
	ro := each(unix.O_RDONLY)
	fmt.Printf("FSBENCH %d %d %d\n", plain, checked, ro)
}

// BenchmarkCheckedOpen: the added cost of one open for writing made by
// the checker (a create-or-truncate beneath --writable), against the
// same open unchecked, and a read-only open under the same filter (not
// notified: it pays nothing).
func BenchmarkCheckedOpen(b *testing.B) {
	pol, dir := fsPolicy(b)
	pol.StaticCreds = true // as corral runs it (no capability kept, no_new_privs)
	n := max(b.N, 500)
	cpu := checkerCPU()
	_, cmd, buf := start(b, "bench-fs", pol, childWrites+"=1", "CORRAL_SOCKCHECK_DIR="+dir, fmt.Sprintf("CORRAL_SOCKCHECK_N=%d", n))
	if err := cmd.Wait(); err != nil {
		b.Fatalf("bench runner: %v: %s", err, buf)
	}
	out := buf.String()
	// The checker's CPU time per checked open (the read-only opens and
	// the unchecked ones cost it nothing).
	b.ReportMetric(float64(checkerCPU()-cpu)/float64(n), "checker-cpu-ns/call")
	var plain, checked, ro int64
	i := strings.Index(out, "FSBENCH")
	if i < 0 {
		b.Fatalf("no figures: %s", out)
	}
	if _, err := fmt.Sscanf(out[i:], "FSBENCH %d %d %d", &plain, &checked, &ro); err != nil {
		b.Fatalf("no figures: %s", out)
	}
	b.ReportMetric(float64(plain), "ns/unchecked-open")
	b.ReportMetric(float64(checked), "ns/checked-open")
	b.ReportMetric(float64(checked-plain), "ns/added")
	b.ReportMetric(float64(ro), "ns/readonly-open")
}

func TestProtects(t *testing.T) {
	p := &WritePolicy{
		Writable:  []string{"/p", "/p/.git/hooks/ok"},
		Protected: []string{"/p/.git/hooks", "/p/.bashrc", "/p/.vscode"},
		Patterns:  []string{"/p/.claude/settings*.json"},
		Pinned:    []string{"/p/.git"},
		Modules:   []string{"/p/.git/modules"},
	}
	for path, want := range map[string]bool{
		"/p/.git/hooks":                   true,
		"/p/.git/hooks/pre-commit":        true,
		"/p/.git/hooks/ok/x":              false, // re-granted
		"/p/.bashrc":                      true,
		"/p/.bashrc2":                     false,
		"/p/.vscode/tasks.json":           true,
		"/p/.claude/settings.json":        true,
		"/p/.claude/settings.local.json":  true,
		"/p/.claude/other.json":           false,
		"/p/.git/modules/a/hooks/x":       true,
		"/p/.git/modules/a/b/config":      true,
		"/p/.git/modules/a/refs/hooks":    false,
		"/p/.git/modules/a/objects/ab/cd": false,
		"/p/.git/objects/ab/cd":           false,
		"/p/.git":                         false,
	} {
		if _, got := p.Protects(path); got != want {
			t.Errorf("Protects(%s) = %v, want %v", path, got, want)
		}
	}
	for dir, want := range map[string]bool{"/p/.git": true, "/p/.claude": true, "/p/src": false, "/p/.git/modules/a": true, "/p/.git/refs": false} {
		if _, got := p.holds(dir); got != want {
			t.Errorf("holds(%s) = %v, want %v", dir, got, want)
		}
	}
}
