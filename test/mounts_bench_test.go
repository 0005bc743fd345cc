package test

// The cost of the filesystem rules on a file-heavy run (issue 33): tar -x
// of a tree of small files into a folder, plain and under --writable
// (which brings the read-only mounts and protected paths), in every mode.
// Goals: in namespace modes a --writable run pays at most 5 % over the
// build before them (the mounts cost nothing per call: what a run pays is
// their setup at launch); in subreaper mode, where every write-intent
// call is the checker's, the figure is reported.
//
//	CORRAL_BENCH_BASE=/tmp/base/bin/corral go test -run '^$' \
//	    -bench BenchmarkMountsTar -benchtime 6x ./test/
//
// With CORRAL_BENCH_BASE each round runs the base build and this one, in
// turns; each build's median is reported, for each of plain and
// --writable.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// benchTreeFiles is the size of the extracted tree: 20,000 files, or
// CORRAL_BENCH_FILES (make bench-smoke runs the workload once, small, so
// that it never rots).
func benchTreeFiles() int {
	if n, err := strconv.Atoi(os.Getenv("CORRAL_BENCH_FILES")); err == nil && n >= 200 {
		return n
	}
	return 20000
}

func BenchmarkMountsTar(b *testing.B) {
	archive := benchArchive(b)
	bins := []struct{ name, path string }{{"this", corralBin}}
	if base := os.Getenv("CORRAL_BENCH_BASE"); base != "" {
		copied := filepath.Join(baseDir, "corral-base")
		data, err := os.ReadFile(base)
		if err == nil {
			err = os.WriteFile(copied, data, 0o755)
		}
		if err != nil {
			b.Fatal(err)
		}
		bins = append([]struct{ name, path string }{{"base", copied}}, bins...)
	}
	for _, m := range modes {
		if reason := m.unavailable(); reason != "" {
			b.Logf("skipped: %s", reason)
			continue
		}
		b.Run(m.name, func(b *testing.B) {
			// Each round runs every build once, in turns, so that the
			// load of the machine weighs on both alike.
			// Each build plain and under --writable: 2 rows a build.
			rows := 2 * len(bins)
			times := make([][]time.Duration, rows)
			for i := 0; i < b.N; i++ {
				for j := range rows {
					k := (i + j) % rows
					times[k] = append(times[k], tarRun(b, m, bins[k/2].path, archive, k%2 == 1))
				}
			}
			for k := range rows {
				slices.Sort(times[k])
				what := "plain"
				if k%2 == 1 {
					what = "writable"
				}
				b.ReportMetric(float64(times[k][len(times[k])/2].Milliseconds()), bins[k/2].name+"-"+what+"-median-ms")
			}
		})
	}
}

// tarRun times one corral [--writable W] -- tar -x into a fresh W.
func tarRun(b *testing.B, m mode, corral, archive string, writable bool) time.Duration {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	w, err := os.MkdirTemp(baseDir, "bench-w-")
	if err == nil {
		err = os.Chown(w, m.uid(), m.uid())
	}
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(w)
	args := []string{"--mode", m.flag}
	if writable {
		args = append(args, "--writable", w)
	}
	cmd := exec.Command(corral, append(args, "--", "/usr/bin/tar", "-xf", archive, "-C", w)...)
	cmd.Dir = baseDir
	cmd.Env = baseEnviron()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: m.credential(), Pdeathsig: syscall.SIGKILL}
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(t0)
	if err != nil {
		b.Fatalf("%s: %v: %s", corral, err, out)
	}
	return d
}

// benchArchive makes, once per run, a tar of benchTreeFiles() small files in
// 200 folders.
func benchArchive(b testing.TB) string {
	b.Helper()
	archive := filepath.Join(baseDir, "bench-tree.tar")
	if _, err := os.Stat(archive); err == nil {
		return archive
	}
	src, err := os.MkdirTemp("", "corral-bench-tree-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(src)
	for i, n := 0, benchTreeFiles(); i < n; i++ {
		dir := filepath.Join(src, "tree", fmt.Sprintf("d%03d", i%200))
		if i < 200 {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d.txt", i)), []byte(fmt.Sprintf("file %d\n", i)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if out, err := exec.Command("tar", "-cf", archive, "-C", src, "tree").CombinedOutput(); err != nil {
		b.Fatalf("tar: %v: %s", err, out)
	}
	if err := os.Chmod(archive, 0o644); err != nil {
		b.Fatal(err)
	}
	return archive
}
