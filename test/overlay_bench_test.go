package test

// The copy-on-write workspace's cost (issue 36): a file-heavy run inside
// DIR — tar -x of a tree of small files into DIR, then grep -r of all of
// DIR (the tree DIR held and the new one) — through --overlay DIR against
// the same run directly on DIR (--writable DIR). Goal: at most 10 %
// slower. Then `corral changes apply` of a run that changed half as many
// files: its time (reported). Namespace modes only (--overlay needs a
// mount namespace).
//
//	go test -run '^$' -bench BenchmarkOverlay -benchtime 5x ./test/
//
// Each round runs the two ways in turns, and each timed run starts after
// a sync: the untar's writeback from the run before must not land on the
// next one. The runner times its untar and its grep itself (date +%s%N)
// beside corral's whole run, which also holds the overlay's mount and the
// closing line's count of the layer.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func BenchmarkOverlay(b *testing.B) {
	n := benchTreeFiles()
	tree := overlayBenchArchive(b, "bench-ov-tree.tar", n, "file")
	newer := overlayBenchArchive(b, "bench-ov-new.tar", n, "new file")
	edits := overlayBenchArchive(b, "bench-ov-edits.tar", n/2, "edited")
	for _, m := range modes {
		if !m.pidns() {
			continue
		}
		if reason := m.unavailable(); reason != "" {
			b.Logf("skipped: %s", reason)
			continue
		}
		b.Run(m.name, func(b *testing.B) {
			ways := []string{"direct", "overlay"}
			var whole, untar, grep [2][]time.Duration
			var apply []time.Duration
			for i := 0; i < b.N; i++ {
				for j := range ways {
					k := (i + j) % 2
					w, u, g := overlayBenchRun(b, m, tree, newer, k == 1)
					whole[k], untar[k], grep[k] = append(whole[k], w), append(untar[k], u), append(grep[k], g)
				}
				apply = append(apply, overlayBenchApply(b, m, tree, edits))
			}
			for k, way := range ways {
				b.ReportMetric(medianMs(whole[k]), way+"-median-ms")
				b.ReportMetric(medianMs(untar[k]), way+"-untar-median-ms")
				b.ReportMetric(medianMs(grep[k]), way+"-grep-median-ms")
			}
			b.ReportMetric(medianMs(apply), "apply-median-ms")
			b.ReportMetric(float64(n), "files")
		})
	}
}

func medianMs(d []time.Duration) float64 {
	slices.Sort(d)
	return float64(d[len(d)/2].Microseconds()) / 1000
}

// overlayBenchWorld is a fresh DIR holding tree, and a state folder, both
// the mode's user's; untimed.
func overlayBenchWorld(b *testing.B, m mode, tree string) (top, dir, state string) {
	b.Helper()
	top, err := os.MkdirTemp(baseDir, "bench-ov-")
	if err != nil {
		b.Fatal(err)
	}
	dir, state = filepath.Join(top, "proj"), filepath.Join(top, "state")
	for _, d := range []string{dir, state} {
		if err := os.Mkdir(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	if out, err := exec.Command("tar", "-xf", tree, "-C", dir).CombinedOutput(); err != nil {
		b.Fatalf("tar: %v: %s", err, out)
	}
	// Rootless overlayfs copies up only what a mapped uid and gid own.
	if out, err := exec.Command("chown", "-R", fmt.Sprintf("%d:%d", m.uid(), m.uid()), top).CombinedOutput(); err != nil {
		b.Fatalf("chown: %v: %s", err, out)
	}
	return top, dir, state
}

var benchTimes = regexp.MustCompile(`(?m)^untar=(\d+) grep=(\d+)$`)

// overlayBenchRun times one corral (--overlay DIR | --writable DIR) --
// untar newer into DIR/new, then grep -r of DIR.
func overlayBenchRun(b *testing.B, m mode, tree, newer string, overlay bool) (whole, untar, grep time.Duration) {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	top, dir, state := overlayBenchWorld(b, m, tree)
	defer removeBenchTree(b, top)
	way := "--writable"
	if overlay {
		way = "--overlay"
	}
	script := `cd "$1" && mkdir new && t0=$(date +%s%N) && tar -xf "$2" -C new && t1=$(date +%s%N) && ` +
		`{ grep -r -l needle . >/dev/null; t2=$(date +%s%N); echo "untar=$((t1-t0)) grep=$((t2-t1))"; }`
	cmd := exec.Command(corralBin, "--mode", m.flag, way, dir, "--", "/bin/sh", "-c", script, "sh", dir, newer)
	cmd.Dir = baseDir
	cmd.Env = append(baseEnviron(), "XDG_STATE_HOME="+state)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: m.credential(), Pdeathsig: syscall.SIGKILL}
	syscall.Sync()
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 := time.Now()
	err := cmd.Run()
	whole = time.Since(t0)
	sm := benchTimes.FindStringSubmatch(out.String())
	if err != nil || sm == nil {
		b.Fatalf("%s %s: %v: %s%s", way, dir, err, out.String(), errb.String())
	}
	if overlay != strings.Contains(errb.String(), "added") {
		b.Fatalf("%s: the closing line: %q", way, errb.String())
	}
	u, _ := strconv.ParseInt(sm[1], 10, 64)
	g, _ := strconv.ParseInt(sm[2], 10, 64)
	return whole, time.Duration(u), time.Duration(g)
}

// overlayBenchApply times corral changes apply of a run that rewrote
// every file of edits (half of DIR's tree) through the overlay.
func overlayBenchApply(b *testing.B, m mode, tree, edits string) time.Duration {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	top, dir, state := overlayBenchWorld(b, m, tree)
	defer removeBenchTree(b, top)
	env := append(baseEnviron(), "XDG_STATE_HOME="+state)
	attr := func() *syscall.SysProcAttr {
		return &syscall.SysProcAttr{Credential: m.credential(), Pdeathsig: syscall.SIGKILL}
	}
	cmd := exec.Command(corralBin, "--mode", m.flag, "--overlay", dir, "--", "/usr/bin/tar", "-xf", edits, "-C", dir)
	cmd.Dir, cmd.Env, cmd.SysProcAttr = baseDir, env, attr()
	out, err := cmd.CombinedOutput()
	sm := seeRe.FindStringSubmatch(string(out))
	if err != nil || sm == nil {
		b.Fatalf("the run to apply: %v: %s", err, out)
	}
	if want := strconv.Itoa(strings.Count(listArchive(b, edits), "\n") - benchFolders(b, edits)); sm[2] != want {
		b.Fatalf("want %s modified: %s", want, out)
	}
	apply := exec.Command(corralBin, "changes", "apply", sm[5])
	apply.Dir, apply.Env, apply.SysProcAttr = baseDir, env, attr()
	syscall.Sync()
	t0 := time.Now()
	out, err = apply.CombinedOutput()
	d := time.Since(t0)
	if err != nil {
		b.Fatalf("changes apply: %v: %s", err, out)
	}
	return d
}

func listArchive(b *testing.B, archive string) string {
	b.Helper()
	out, err := exec.Command("tar", "-tf", archive).Output()
	if err != nil {
		b.Fatal(err)
	}
	return string(out)
}

// benchFolders is how many of archive's entries are folders.
func benchFolders(b *testing.B, archive string) int {
	return strings.Count(listArchive(b, archive), "/\n")
}

// removeBenchTree removes a round's folders: the layer's work folder is
// mode 000, which root passes.
func removeBenchTree(b *testing.B, top string) {
	if err := os.RemoveAll(top); err != nil {
		b.Errorf("remove %s: %v", top, err)
	}
}

// overlayBenchArchive makes, once per run, a tar of n small files whose
// content starts with what, in folders of 100 (tree/dNNN/fNNNNN.txt: the
// same paths across archives, so that one archive's files rewrite
// another's).
func overlayBenchArchive(b *testing.B, name string, n int, what string) string {
	b.Helper()
	archive := filepath.Join(baseDir, name)
	if _, err := os.Stat(archive); err == nil {
		return archive
	}
	src, err := os.MkdirTemp("", "corral-bench-ov-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(src)
	for i := 0; i < n; i++ {
		dir := filepath.Join(src, "tree", fmt.Sprintf("d%03d", i/100))
		if i%100 == 0 {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		body := fmt.Sprintf("%s %d\nsome text a grep reads through, line two\nand a third line\n", what, i)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d.txt", i)), []byte(body), 0o644); err != nil {
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
