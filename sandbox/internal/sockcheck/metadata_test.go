package sockcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func init() {
	scenarios["metadata"] = scenarioMetadata
	scenarios["bench-chmod"] = scenarioBenchChmod
}

// metaDirs makes W (writable), R (outside it) and H (hidden), each with a
// file f the runner's uid owns, and a link W/out to R/f.
func metaDirs(t testing.TB) (dir string, pol Policy) {
	dir = t.TempDir()
	for _, d := range []string{"W", "R", "H"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, d, "f"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(dir, "R", "f"), filepath.Join(dir, "W", "out")); err != nil {
		t.Fatal(err)
	}
	return dir, Policy{Metadata: true, Writable: []string{filepath.Join(dir, "W")}, Hide: []string{filepath.Join(dir, "H")}}
}

// Every metadata call, by path, by descriptor and relative to one: beneath
// the writable path it is made (as the caller), outside it refused with
// EROFS, beneath --hide with EACCES, and the files outside are unchanged.
func TestMetadataChecked(t *testing.T) {
	dir, pol := metaDirs(t)
	var mu sync.Mutex
	var refused []Refusal
	pol.Report = func(r Refusal) {
		mu.Lock()
		refused = append(refused, r)
		mu.Unlock()
	}
	run(t, "metadata", pol, "CORRAL_SOCKCHECK_DIR="+dir)
	mu.Lock()
	defer mu.Unlock()
	for _, d := range []string{"R", "H"} {
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(dir, d, "f"), &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode&0o7777 != 0o644 {
			t.Errorf("%s/f: mode %o, want 644", d, st.Mode&0o7777)
		}
		if _, err := unix.Getxattr(filepath.Join(dir, d, "f"), "user.t", nil); err == nil {
			t.Errorf("%s/f: the xattr was set", d)
		}
	}
	if len(refused) == 0 || refused[0].Kind != "fs" || !strings.Contains(refused[0].Reason, "--writable") {
		t.Errorf("refusals reported: %+v", refused)
	}
}

func scenarioMetadata(c *child) {
	dir := env("DIR")
	w, r, h := filepath.Join(dir, "W"), filepath.Join(dir, "R"), filepath.Join(dir, "H")
	e := func(err error) unix.Errno {
		if err == nil {
			return 0
		}
		if en, ok := err.(unix.Errno); ok {
			return en
		}
		c.errorf("not an errno: %v", err)
		return unix.EINVAL
	}
	for _, tc := range []struct {
		d    string
		want unix.Errno
	}{{w, 0}, {r, unix.EROFS}, {h, unix.EACCES}} {
		f := filepath.Join(tc.d, "f")
		want(c, "chmod "+f, e(unix.Chmod(f, 0o755)), tc.want)
		want(c, "fchmodat "+f, e(unix.Fchmodat(unix.AT_FDCWD, f, 0o700, 0)), tc.want)
		want(c, "chown "+f, e(unix.Chown(f, -1, -1)), tc.want)
		want(c, "lchown "+f, e(unix.Lchown(f, os.Getuid(), -1)), tc.want)
		want(c, "setxattr "+f, e(unix.Setxattr(f, "user.t", []byte("v"), 0)), tc.want)
		want(c, "removexattr "+f, e(unix.Removexattr(f, "user.t")), tc.want)
		want(c, "utimensat "+f, e(unix.UtimesNanoAt(unix.AT_FDCWD, f, nil, 0)), tc.want)
		tv := [2]unix.Timeval{{Sec: 1}, {Sec: 2}}
		want(c, "utimes "+f, e(unix.Utimes(f, tv[:])), tc.want)
		// A descriptor opened read-only: the file's place decides, not
		// the open mode.
		fd, err := unix.Open(f, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil && tc.d != h {
			c.errorf("open %s: %v", f, err)
		}
		if err == nil {
			want(c, "fchmod on O_RDONLY "+f, e(unix.Fchmod(fd, 0o600)), tc.want)
			want(c, "fchown "+f, e(unix.Fchown(fd, -1, -1)), tc.want)
			want(c, "fsetxattr "+f, e(unix.Fsetxattr(fd, "user.t", []byte("v"), 0)), tc.want)
			want(c, "futimens "+f, e(unix.UtimesNanoAt(fd, "", nil, unix.AT_EMPTY_PATH)), tc.want)
			want(c, "chmod /proc/self/fd/N of "+f, e(unix.Chmod(fmt.Sprintf("/proc/self/fd/%d", fd), 0o644)), tc.want)
			// futimens proper: utimensat(fd, NULL, ...).
			_, _, en := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, 0, 0, 0, 0)
			want(c, "utimensat(fd, NULL) "+f, en, tc.want)
			unix.Close(fd)
		}
		// Relative to a directory descriptor.
		dfd, err := unix.Open(tc.d, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			c.errorf("open %s: %v", tc.d, err)
			continue
		}
		want(c, "fchmodat(dirfd, f) in "+tc.d, e(unix.Fchmodat(dfd, "f", 0o644, 0)), tc.want)
		want(c, "fchownat(dirfd, f) in "+tc.d, e(unix.Fchownat(dfd, "f", -1, -1, 0)), tc.want)
		unix.Close(dfd)
	}
	// A link beneath W to a file outside: what it reaches decides; the
	// link itself is beneath W.
	out := filepath.Join(w, "out")
	want(c, "chmod through a link out of W", e(unix.Chmod(out, 0o777)), unix.EROFS)
	want(c, "lchown of the link itself", e(unix.Lchown(out, -1, -1)), 0)
	want(c, "fchmodat2 NOFOLLOW on the link", e(fchmodat2(unix.AT_FDCWD, out, 0o777, unix.AT_SYMLINK_NOFOLLOW)), unix.EOPNOTSUPP)
	// An O_PATH descriptor cannot be fchmod'ed, as without the checker.
	if fd, err := unix.Open(filepath.Join(w, "f"), unix.O_PATH|unix.O_CLOEXEC, 0); err == nil {
		want(c, "fchmod on O_PATH", e(unix.Fchmod(fd, 0o644)), unix.EBADF)
		unix.Close(fd)
	}
	// The caller's own standard output (a pipe to the test) through
	// /dev/stdout, whose /proc/self would otherwise be the checker's.
	want(c, "chmod /dev/stdout (a pipe)", e(unix.Chmod("/dev/stdout", 0o600)), 0)
	// A pipe is no one's file.
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err == nil {
		want(c, "fchmod on a pipe", e(unix.Fchmod(p[0], 0o600)), 0)
		unix.Close(p[0])
		unix.Close(p[1])
	}
	// Bad arguments get the kernel's errno.
	want(c, "chmod of a missing file", e(unix.Chmod(filepath.Join(w, "missing"), 0o644)), unix.ENOENT)
	want(c, "fchmod of a bad fd", e(unix.Fchmod(9999, 0o644)), unix.EBADF)
	_, _, en := unix.Syscall(unix.SYS_CHMOD, 8, 0o644, 0) // a bad pointer
	want(c, "chmod of a bad pointer", en, unix.EFAULT)
	want(c, "fchownat with a bad flag", e(unix.Fchownat(unix.AT_FDCWD, filepath.Join(w, "f"), -1, -1, 0x8000000)), unix.EINVAL)
	// Beneath W the change is made: chmod +x.
	want(c, "chmod +x beneath W", e(unix.Chmod(filepath.Join(w, "f"), 0o755)), 0)
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(w, "f"), &st); err != nil || st.Mode&0o777 != 0o755 {
		c.errorf("W/f after chmod 755: mode %o, %v", st.Mode&0o777, err)
	}
}

func fchmodat2(dirfd int, path string, mode uint32, flags int) error {
	p, err := unix.BytePtrFromString(path)
	if err != nil {
		return err
	}
	_, _, e := unix.Syscall6(452, uintptr(dirfd), uintptr(unsafe.Pointer(p)), uintptr(mode), uintptr(flags), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// BenchmarkCheckedChmod: one chmod beneath a --writable path without and
// with the checker (subreaper mode's metadata checks); ns/added is what a
// checked metadata call costs.
func BenchmarkCheckedChmod(b *testing.B) {
	dir, pol := metaDirs(b)
	pol.StaticCreds = true // as corral runs a runner without capabilities
	n := max(b.N, 2000)
	cpu := checkerCPU()
	_, cmd, buf := start(b, "bench-chmod", pol, "CORRAL_SOCKCHECK_DIR="+dir, fmt.Sprintf("CORRAL_SOCKCHECK_N=%d", n))
	if err := cmd.Wait(); err != nil {
		b.Fatalf("bench runner: %v: %s", err, buf)
	}
	// The checker's CPU time per checked call (warm-up and timed loop):
	// what a call costs corral whatever the machine's load does to the
	// wall-clock figures.
	b.ReportMetric(float64(checkerCPU()-cpu)/float64(2*n), "checker-cpu-ns/call")
	out := buf.String()
	var plain, checked int64
	if _, err := fmt.Sscanf(out[strings.Index(out, "BENCH"):], "BENCH %d %d", &plain, &checked); err != nil {
		b.Fatalf("no figures: %s", out)
	}
	b.ReportMetric(float64(plain), "ns/unchecked-chmod")
	b.ReportMetric(float64(checked), "ns/checked-chmod")
	b.ReportMetric(float64(checked-plain), "ns/added")
}

func scenarioBenchChmod(c *child) {
	f, n := filepath.Join(env("DIR"), "W", "f"), envInt("N")
	timeLoop := func() time.Duration {
		start := time.Now()
		for i := range n {
			if err := unix.Chmod(f, 0o600|uint32(i&1)<<6); err != nil {
				c.fatalf("chmod: %v", err)
			}
		}
		return time.Since(start) / time.Duration(n)
	}
	timeLoop()
	plain := timeLoop()
	c.install(false)
	timeLoop()
	checked := timeLoop()
	fmt.Printf("BENCH %d %d\n", plain.Nanoseconds(), checked.Nanoseconds())
}

// checkerCPU is this process's CPU time (user and system, every thread),
// in nanoseconds: the checker's, during a benchmark's runner.
func checkerCPU() int64 {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
