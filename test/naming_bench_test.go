package test

// What naming refused writes costs a real run (SPEC, "Refusals are
// named": a policy run, an npm ci into a writable project, pays at most
// 5 % for it). npm ci of a project of 150 local packages (some 4,800
// files) into a --writable project, offline, in every mode: this build
// against the same build without the naming (fsreports_off.go), which in
// namespace modes costs one round trip to the checker per write-intent
// call, and a run with no policy at all beside them. Each round runs
// every row once, in turns.
//
//	go test -run '^$' -bench BenchmarkNamingNpmCI -benchtime 5x ./test/

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	unnamedOnce sync.Once
	unnamedPath string
	unnamedErr  error
)

// unnamedBuild is this corral built without the namespace modes' naming
// of refused writes (tag corral_nofsreports), once per test binary.
func unnamedBuild(b *testing.B) string {
	b.Helper()
	unnamedOnce.Do(func() {
		unnamedPath = filepath.Join(baseDir, "corral-unnamed")
		cmd := exec.Command("go", "build", "-tags", "corral_nofsreports", "-o", unnamedPath, "./cmd/corral")
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			unnamedErr = fmt.Errorf("building corral without the naming of refused writes: %v\n%s", err, out)
		}
	})
	if unnamedErr != nil {
		b.Fatal(unnamedErr)
	}
	return unnamedPath
}

func BenchmarkNamingNpmCI(b *testing.B) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		b.Skip("npm is not installed")
	}
	npm, _ = filepath.EvalSymlinks(npm) // corral wants the runner's own path
	unnamed := unnamedBuild(b)
	for _, m := range modes {
		if reason := m.unavailable(); reason != "" {
			b.Logf("skipped: %s", reason)
			continue
		}
		b.Run(m.name, func(b *testing.B) {
			proj := npmProject(b, m.uid())
			type row struct {
				name, corral string
				writable     bool
			}
			rows := []row{{"plain", corralBin, false}, {"this", corralBin, true}}
			if m.pidns() { // subreaper mode never names through the report
				rows = append(rows, row{"unnamed", unnamed, true})
			}
			medians := mediansInTurns(b, len(rows), func(k int) time.Duration {
				return npmCIRun(b, m, rows[k].corral, npm, proj, rows[k].writable)
			})
			for k, r := range rows {
				b.ReportMetric(float64(medians[k].Milliseconds()), r.name+"-median-ms")
			}
		})
	}
}

// npmCIRun times one corral [--writable PROJ] -- npm ci, offline, from a
// project with no node_modules and an empty cache.
func npmCIRun(b *testing.B, m mode, corral, npm, proj string, writable bool) time.Duration {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	for _, d := range []string{"node_modules", ".cache", ".logs"} {
		if err := os.RemoveAll(filepath.Join(proj, d)); err != nil {
			b.Fatal(err)
		}
	}
	args := []string{"--mode", m.flag}
	if writable {
		args = append(args, "--writable", proj)
	}
	args = append(args, "--", npm, "ci", "--offline", "--no-audit", "--no-fund", "--ignore-scripts")
	cmd := exec.Command(corral, args...)
	cmd.Dir = proj
	cmd.Env = append(baseEnviron(), "HOME="+proj, "npm_config_cache="+filepath.Join(proj, ".cache"),
		"npm_config_logs_dir="+filepath.Join(proj, ".logs"), "npm_config_update_notifier=false")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: m.credential(), Pdeathsig: syscall.SIGKILL}
	return timedRun(b, cmd)
}

// npmProject makes a project of 150 local packages of 32 files each (or
// fewer, in proportion to CORRAL_BENCH_FILES: make bench-smoke), as
// tarballs beside it, with its package-lock.json, owned by uid.
func npmProject(b *testing.B, uid int) string {
	b.Helper()
	proj, err := os.MkdirTemp(baseDir, "bench-npm-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(proj) })
	src, err := os.MkdirTemp("", "corral-bench-npm-src-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(src)
	deps := map[string]string{}
	for i := range max(2, benchTreeFiles()*150/20000) {
		name := fmt.Sprintf("pkg%03d", i)
		pkg := filepath.Join(src, name, "package")
		if err := os.MkdirAll(filepath.Join(pkg, "lib"), 0o755); err != nil {
			b.Fatal(err)
		}
		files := map[string]string{
			"package.json": fmt.Sprintf(`{"name":%q,"version":"1.0.0","main":"index.js"}`, name),
			"index.js":     "module.exports = require('./lib/m00.js');\n",
		}
		for j := range 30 {
			files[fmt.Sprintf("lib/m%02d.js", j)] = fmt.Sprintf("module.exports = %d;\n", j)
		}
		for f, data := range files {
			if err := os.WriteFile(filepath.Join(pkg, f), []byte(data), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		tgz := filepath.Join("tarballs", name+"-1.0.0.tgz")
		if err := os.MkdirAll(filepath.Join(proj, "tarballs"), 0o755); err != nil {
			b.Fatal(err)
		}
		if out, err := exec.Command("tar", "-czf", filepath.Join(proj, tgz), "-C", filepath.Join(src, name), "package").CombinedOutput(); err != nil {
			b.Fatalf("tar: %v: %s", err, out)
		}
		deps[name] = "file:" + tgz
	}
	manifest, err := json.Marshal(map[string]any{"name": "bench", "version": "1.0.0", "private": true, "dependencies": deps})
	if err == nil {
		err = os.WriteFile(filepath.Join(proj, "package.json"), manifest, 0o644)
	}
	if err != nil {
		b.Fatal(err)
	}
	lock := exec.Command("npm", "install", "--package-lock-only", "--offline", "--no-audit", "--no-fund", "--ignore-scripts")
	lock.Dir = proj
	lock.Env = append(baseEnviron(), "HOME="+proj, "npm_config_cache="+filepath.Join(proj, ".cache"),
		"npm_config_logs_dir="+filepath.Join(proj, ".logs"), "npm_config_update_notifier=false")
	if out, err := lock.CombinedOutput(); err != nil {
		b.Fatalf("npm install --package-lock-only: %v: %s", err, out)
	}
	if out, err := exec.Command("chown", "-R", fmt.Sprintf("%d:%d", uid, uid), proj).CombinedOutput(); err != nil {
		b.Fatalf("chown: %v: %s", err, out)
	}
	return proj
}
