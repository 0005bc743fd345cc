package test

// The cost of the filesystem rules on a file-heavy run (issue 33): tar -x
// of a tree of small files into a folder, plain and under --writable
// (which brings the read-only mounts and protected paths), in every mode.
// Goals: in namespace modes the rules make a --writable run pay at most
// 5 % over the build before them (the mounts cost nothing per call: what a
// run pays is their setup at launch); in subreaper mode, where every
// write-intent call is the checker's, the figure is reported. Namespace
// modes also name what the rules refuse (SPEC, "Refusals are named"),
// which costs one round trip to the checker per write-intent call: a
// third build, this one without that naming, sets the two costs apart.
//
//	CORRAL_BENCH_BASE=/tmp/base/bin/corral go test -run '^$' \
//	    -bench BenchmarkMountsTar -benchtime 6x ./test/
//
// With CORRAL_BENCH_BASE each round runs the base build and this one, in
// turns; each build's median is reported, for each of plain and
// --writable (the build without the naming: --writable, namespace modes).

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
	type build struct{ name, path string }
	bins := []build{{"this", corralBin}}
	if base := os.Getenv("CORRAL_BENCH_BASE"); base != "" {
		copied := filepath.Join(baseDir, "corral-base")
		data, err := os.ReadFile(base)
		if err == nil {
			err = os.WriteFile(copied, data, 0o755)
		}
		if err != nil {
			b.Fatal(err)
		}
		bins = append([]build{{"base", copied}}, bins...)
	}
	// This build without the namespace modes' naming of refused writes
	// (sandbox/internal/plan/fsreports_off.go): what the filesystem rules
	// cost by themselves, and so what the naming costs, each shown by
	// removing the other. Only --writable, and only in namespace modes:
	// subreaper mode and a plain run never name through it.
	unnamed := build{"unnamed", unnamedBuild(b)}
	for _, m := range modes {
		if reason := m.unavailable(); reason != "" {
			b.Logf("skipped: %s", reason)
			continue
		}
		b.Run(m.name, func(b *testing.B) {
			type row struct {
				build
				writable bool
			}
			var rows []row
			for _, bin := range bins {
				rows = append(rows, row{bin, false}, row{bin, true})
			}
			if m.name != "subreaper" {
				rows = append(rows, row{unnamed, true})
			}
			medians := mediansInTurns(b, len(rows), func(k int) time.Duration {
				return tarRun(b, m, rows[k].path, archive, rows[k].writable)
			})
			for k, r := range rows {
				what := "plain"
				if r.writable {
					what = "writable"
				}
				b.ReportMetric(float64(medians[k].Milliseconds()), r.name+"-"+what+"-median-ms")
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
	return timedRun(b, cmd)
}

// mediansInTurns runs each of rows rows b.N times and returns each row's
// median. Each round runs every row once, in turns (each round starting
// one further along), so that the load of the machine weighs on every
// row alike.
func mediansInTurns(b *testing.B, rows int, run func(row int) time.Duration) []time.Duration {
	times := make([][]time.Duration, rows)
	for i := 0; i < b.N; i++ {
		for j := range rows {
			k := (i + j) % rows
			times[k] = append(times[k], run(k))
		}
	}
	medians := make([]time.Duration, rows)
	for k := range times {
		slices.Sort(times[k])
		medians[k] = times[k][len(times[k])/2]
	}
	return medians
}

// timedRun runs cmd to its end and returns how long it took, failing the
// benchmark if it fails. What the runs before it wrote (and removed) is
// on its way to the disk: it waits for that first, untimed, so that no
// run pays for another's writeback.
func timedRun(b *testing.B, cmd *exec.Cmd) time.Duration {
	b.Helper()
	syscall.Sync()
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(t0)
	if err != nil {
		b.Fatalf("%s: %v: %s", cmd.Path, err, out)
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
