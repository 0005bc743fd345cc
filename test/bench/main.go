// Command bench measures corral beside the launchers it replaces or
// resembles, and prints one markdown table per workload.
//
//	make bench        # every workload at full size (a few minutes; as root)
//	make bench-smoke  # every workload once at a tiny size (CI; exits 1 if broken)
//
// Rows: the command run directly; tini -s, dumb-init and catatonit as root;
// bwrap and unshare, which make a user namespace, as uid 65534; a minimal Go
// launcher (launch only: the floor of any Go launcher); corral in subreaper
// mode and pidns mode as root, and pidns mode as uid 65534; and, with
// -variant NAME=PATH, other corral builds in the same modes, interleaved. A
// peer that is not installed fails the run before anything is measured,
// naming its package; -peers=false measures corral alone.
//
// Workloads (see test/bench/README.md, docs/benchmarks.md):
//
//  1. launch: wall time of `X -- /bin/true`, and its ratio to /bin/true alone;
//     each opt-in (--net none, --allow-net, --writable, --timeout, --state)
//     against the plain run of its mode; the system calls, threads and
//     processes of each row under strace
//  2. reap: a runner creating orphans (double fork, grandchild exits at once)
//  3. teardown: a runner leaving detached helpers, which ignore SIGTERM
//     (grace 0) or exit on it (grace 10 s): runner exit to launcher exit
//  4. idle: CPU and context switches of every launcher process while the
//     runner sleeps, with and without --state
//  5. memory: VmHWM of every launcher process, idle and under teardown
//  6. scale: the engine's tick (scan + state write) against unrelated host
//     processes and against a large tree of its own
//
// Every process a run starts carries a unique marker in its argv; after each
// run the benchmark looks for it in /proc, reports what a launcher left
// behind, kills it by pid and proves it gone.
package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// sizes are the knobs of one benchmark run.
type sizes struct {
	launchRuns    int
	reapOrphans   int
	reapRuns      int
	helpers       int
	teardownRuns  int
	idleWindow    time.Duration
	idleRuns      int
	memoryHelpers int
	memoryRuns    int
	scaleHost     []int
	scaleTree     int
	scaleBudget   time.Duration
	scaleInSitu   time.Duration
}

var (
	fullSizes = sizes{
		launchRuns: 200, reapOrphans: 5000, reapRuns: 7, helpers: 1000, teardownRuns: 7,
		idleWindow: 10 * time.Second, idleRuns: 3, memoryHelpers: 1000, memoryRuns: 3,
		scaleHost: []int{10, 1000, 10000}, scaleTree: 1000, scaleBudget: 400 * time.Millisecond,
		scaleInSitu: 3 * time.Second,
	}
	smokeSizes = sizes{
		launchRuns: 2, reapOrphans: 50, reapRuns: 1, helpers: 20, teardownRuns: 1,
		idleWindow: 500 * time.Millisecond, idleRuns: 1, memoryHelpers: 20, memoryRuns: 1,
		scaleHost: []int{10, 100}, scaleTree: 100, scaleBudget: 20 * time.Millisecond,
		scaleInSitu: 300 * time.Millisecond,
	}
)

// bench is one benchmark run: its binaries, directories and findings.
type bench struct {
	sz       sizes
	smoke    bool
	ci       bool
	corral   string // copy of the corral binary, readable by uid 65534
	runner   string // copy of the runner binary, readable by uid 65534
	dir      string // 0755 scratch directory holding both
	stateDir string // 0777: state files of every uid
	// writableDir is --writable's directory in the launch workload (0777).
	writableDir string
	options     string // launch options to measure beside plain (launchOptions keys)
	session     string // prefix of every marker of this run
	reaper      *reaper
	env         []string
	launchers   []*launcher
	problems    []string // what is broken: makes bench-smoke fail
	notes       []string // what a target missed or a peer did
	results     map[string]float64
	out         io.Writer
	modes       string // corral modes to measure; "" all
	peers       bool   // measure the peers too

	pretendMissing string // peers to treat as not installed
}

// variants are other corral binaries measured beside the main one.
var variants variantFlag

type variantFlag []struct{ name, path string }

func (v *variantFlag) String() string { return "" }
func (v *variantFlag) Set(s string) error {
	name, path, ok := strings.Cut(s, "=")
	if !ok || name == "" || path == "" {
		return fmt.Errorf("want NAME=PATH, got %q", s)
	}
	*v = append(*v, struct{ name, path string }{name, path})
	return nil
}

const nobody = 65534

func main() {
	var (
		corralPath = flag.String("corral", "bin/corral", "corral binary to measure")
		runnerPath = flag.String("runner", "bin/bench-runner", "the benchmark's runner binary (./test/bench/runner)")
		smoke      = flag.Bool("smoke", false, "every workload once at a tiny size; exit 1 if anything is broken")
		only       = flag.String("only", "", "comma-separated workloads to run: launch,reap,teardown,idle,memory,scale (default all)")
		cpuprofile = flag.String("cpuprofile", "", "write a CPU profile of the scale workload's in-process ticks")
		launchRuns = flag.Int("launch-runs", 0, "override the number of launch runs per launcher")
		runs       = flag.Int("runs", 0, "override the runs of the reap and teardown workloads")
		modes      = flag.String("modes", "", "comma-separated corral modes to measure: subreaper,pidns,pidns-rootless (default all)")
		peers      = flag.Bool("peers", true, "measure the peers (tini, dumb-init, catatonit, bwrap, unshare) beside corral")
		missing    = flag.String("pretend-missing", "", "comma-separated peers to treat as not installed (tests that the benchmark then fails)")
		options    = flag.String("options", "net-none,allow-net,writable,timeout,state", "comma-separated corral options whose launch cost is measured beside the plain run: net-none,allow-net,writable,timeout,state (\"\" for none)")
	)
	flag.Var(&variants, "variant", "NAME=PATH: also measure another corral binary (e.g. a patched build), in the same modes, interleaved with the rest; repeatable")
	flag.Parse()
	b := &bench{sz: fullSizes, smoke: *smoke, ci: os.Getenv("CI") == "true", out: os.Stdout, results: map[string]float64{},
		modes: *modes, peers: *peers, pretendMissing: *missing, options: *options}
	if *smoke {
		b.sz = smokeSizes
	}
	if *launchRuns > 0 {
		b.sz.launchRuns = *launchRuns
	}
	if *runs > 0 {
		b.sz.reapRuns, b.sz.teardownRuns = *runs, *runs
	}
	status := b.main(*corralPath, *runnerPath, *only, *cpuprofile)
	os.Exit(status)
}

func (b *bench) main(corralPath, runnerPath, only, cpuprofile string) int {
	start := time.Now()
	var err error
	if devNull, err = os.OpenFile(os.DevNull, os.O_RDWR, 0); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if err := b.setup(corralPath, runnerPath); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		b.cleanup()
		return 1
	}
	defer b.cleanup()

	// An interrupted benchmark still kills what it started.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "bench: %v: killing what the benchmark started\n", s)
		b.cleanup()
		os.Exit(130)
	}()

	want := func(name string) bool {
		if only == "" {
			return true
		}
		for _, w := range strings.Split(only, ",") {
			if strings.TrimSpace(w) == name {
				return true
			}
		}
		return false
	}
	b.header()
	if want("launch") {
		b.needTool("strace") // the system-call count (syscalls.go)
	}
	if len(b.problems) > 0 {
		// A peer the ratios need is missing: say so before spending
		// minutes on numbers that could not be compared.
		return b.failed()
	}
	b.probe()
	type workload struct {
		name string
		run  func()
	}
	var idle idleResult
	for _, w := range []workload{
		{"launch", func() { b.launch(); b.syscalls() }},
		{"reap", b.reap},
		{"teardown", b.teardown},
		{"idle", func() { idle = b.idle() }},
		{"memory", func() { b.memory(idle) }},
		{"scale", func() { b.scale(cpuprofile) }},
	} {
		if !want(w.name) {
			continue
		}
		t := time.Now()
		w.run()
		fmt.Fprintf(os.Stderr, "bench: %s done in %.1f s\n", w.name, time.Since(t).Seconds())
		// Whatever a workload missed, nothing of it survives into the next.
		if n := killPrefixed(b.session); n > 0 {
			b.problem("%d processes of the %s workload were still running after it and were killed", n, w.name)
		}
	}
	b.targets()
	fmt.Fprintf(b.out, "\n_Total benchmark time: %.0f s._\n", time.Since(start).Seconds())
	if len(b.problems) > 0 {
		return b.failed()
	}
	return 0
}

func (b *bench) failed() int {
	fmt.Fprintln(os.Stderr, "\nbench: FAILED:")
	for _, p := range b.problems {
		fmt.Fprintln(os.Stderr, "  -", p)
	}
	return 1
}

// needTool fails the benchmark, naming the package, when a tool it runs
// is missing.
func (b *bench) needTool(name string) {
	if _, err := exec.LookPath(name); err != nil || slices.Contains(strings.Split(b.pretendMissing, ","), name) {
		b.problem("%s is not installed: install the package %q (Debian/Ubuntu: apt-get install %s)", name, peerPackages[name], peerPackages[name])
	}
}

func (b *bench) problem(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	b.problems = append(b.problems, msg)
	fmt.Fprintln(os.Stderr, "bench: problem:", msg)
}

func (b *bench) setup(corralPath, runnerPath string) error {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "bench: not root: rows that run as uid 65534 are skipped")
	}
	dir, err := os.MkdirTemp("", "corral-bench-")
	if err != nil {
		return err
	}
	b.dir = dir
	b.stateDir = filepath.Join(dir, "state")
	b.writableDir = filepath.Join(dir, "writable")
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(b.stateDir, 0o777); err != nil {
		return err
	}
	if err := os.Chmod(b.stateDir, 0o777); err != nil {
		return err
	}
	if err := os.Mkdir(b.writableDir, 0o777); err != nil {
		return err
	}
	if err := os.Chmod(b.writableDir, 0o777); err != nil {
		return err
	}
	b.corral = filepath.Join(dir, "corral")
	b.runner = filepath.Join(dir, "runner")
	copies := []struct{ from, to string }{{corralPath, b.corral}, {runnerPath, b.runner}}
	for i := range variants {
		to := filepath.Join(dir, "corral-"+variants[i].name)
		copies = append(copies, struct{ from, to string }{variants[i].path, to})
		variants[i].path = to
	}
	for _, c := range copies {
		data, err := os.ReadFile(c.from)
		if err != nil {
			return fmt.Errorf("%w (run `make build` and build ./test/bench/runner first, or use `make bench`)", err)
		}
		if err := os.WriteFile(c.to, data, 0o755); err != nil {
			return err
		}
	}
	b.session = "corral-bench-" + randomHex() + "-"
	b.env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/"}
	if b.reaper, err = newReaper(); err != nil {
		return err
	}
	b.launchers = b.defineLaunchers()
	return nil
}

func (b *bench) cleanup() {
	for _, pid := range tracked.list() {
		_ = syscall.Kill(pid, syscall.SIGKILL) // our unreaped children
	}
	if b.session != "" {
		killPrefixed(b.session)
	}
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}

func randomHex() string {
	buf := make([]byte, 6)
	if _, err := rand.Read(buf); err != nil {
		panic(err)
	}
	return hex.EncodeToString(buf)
}

// marker returns a fresh marker of this benchmark run.
func (b *bench) marker() string { return b.session + randomHex() }

// header prints the machine and the tools measured.
func (b *bench) header() {
	w := b.out
	title := "corral benchmarks"
	if b.smoke {
		title += " (smoke: tiny sizes, numbers are not meaningful)"
	}
	fmt.Fprintf(w, "## %s\n\n", title)
	cpu := "unknown"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	var uts syscall.Utsname
	_ = syscall.Uname(&uts)
	kernel := cstr(uts.Release[:])
	fmt.Fprintf(w, "Machine: %d CPUs (%s), Linux %s, %s, %s.\n", runtime.NumCPU(), cpu, kernel, memTotal(), runtime.Version())
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(w, "Measured %s; load average at start: %s.\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		strings.Join(strings.Fields(string(load))[:min(3, len(strings.Fields(string(load))))], " "))
	fmt.Fprintln(w, "| tool | version |")
	fmt.Fprintln(w, "|---|---|")
	fmt.Fprintf(w, "| corral | %s |\n", b.toolVersion(b.corral, "version"))
	for _, v := range variants {
		fmt.Fprintf(w, "| corral variant %s | %s |\n", v.name, b.toolVersion(v.path, "version"))
	}
	for _, t := range []struct{ name, arg string }{
		{"tini", "--version"}, {"dumb-init", "--version"}, {"catatonit", "--version"}, {"bwrap", "--version"}, {"unshare", "--version"},
		{"strace", "-V"},
	} {
		path, err := exec.LookPath(t.name)
		v := "not installed"
		if err == nil && !slices.Contains(strings.Split(b.pretendMissing, ","), t.name) {
			v = b.toolVersion(path, t.arg)
		}
		fmt.Fprintf(w, "| %s | %s |\n", t.name, v)
	}
	fmt.Fprintln(w)
}

func cstr(b []int8) string {
	var s []byte
	for _, c := range b {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}

func memTotal() string {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "? RAM"
	}
	kb := statusField(string(data), "MemTotal")
	return fmt.Sprintf("%.0f GiB RAM", float64(kb)/(1<<20))
}

// toolVersion runs a version query and returns its first line.
func (b *bench) toolVersion(path, arg string) string {
	_, out, err := b.capture([]string{path, arg}, 0, 10*time.Second)
	if err != nil {
		return "? (" + err.Error() + ")"
	}
	if s := strings.TrimSpace(strings.SplitN(strings.TrimSpace(out), "\n", 2)[0]); s != "" {
		return s
	}
	return "?"
}

// capture runs argv to completion and returns its status and its stdout
// and stderr together.
func (b *bench) capture(argv []string, uid int, timeout time.Duration) (exitInfo, string, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return exitInfo{}, "", err
	}
	c, err := b.reaper.spawn(spawnSpec{argv: argv, uid: uid, out: w, err: w, env: b.env, dir: b.dir})
	w.Close()
	if err != nil {
		r.Close()
		return exitInfo{}, "", err
	}
	var buf bytes.Buffer
	read := make(chan struct{})
	go func() {
		_, _ = io.Copy(&buf, r)
		close(read)
	}()
	info, err := c.wait(timeout)
	select {
	case <-read:
	case <-time.After(2 * time.Second):
		// Something the command left behind holds the pipe open.
	}
	r.Close()
	<-read
	return info, buf.String(), err
}
