package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/corral-sh/corral/internal/proc"
	"github.com/corral-sh/corral/reaper/statefile"
)

// scale measures what one engine tick costs: the engine's tick is
// observe (proc.ChildrenOf(self): its direct children, runner and adopted
// orphans) and writeState (statefile.Writer.Write); teardown walks the
// whole tree (proc.Descendants). They run here, in process, against a
// stand-in engine: a runner process whose children are the tree. The
// unrelated processes are the children of another runner, outside that
// tree. A full /proc scan (proc.ScanAll) is shown for comparison: it is
// what a tick costs when it reads every process on the host.
//
// The in-situ column runs the real thing: corral subreaper with --state
// --poll 0.01 over a runner that holds still, and divides corral's CPU
// time by the ticks in the window.
func (b *bench) scale(cpuprofile string) {
	type row struct {
		label     string
		unrelated int
		tree      int
	}
	var rows []row
	for _, n := range b.sz.scaleHost {
		rows = append(rows, row{fmt.Sprintf("%d unrelated host processes", n), n, 1})
	}
	rows = append(rows, row{fmt.Sprintf("%d processes in the runner's own tree", b.sz.scaleTree), 0, b.sz.scaleTree})

	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err == nil {
			if err := pprof.StartCPUProfile(f); err == nil {
				defer func() { pprof.StopCPUProfile(); f.Close() }()
			}
		}
	}
	t := &table{head: []string{"host", "processes in /proc", "tick: scan + state write (µs, median)", "p10–p90", "children scan (µs)",
		"state write (µs)", "tree walk (µs)", "full /proc scan (µs)", "in situ: corral CPU per tick (µs)"}}
	for _, r := range rows {
		_, cleanup, err := b.holdSleepersRoot(r.unrelated)
		if err != nil {
			b.problem("scale: %s: %v", r.label, err)
			continue
		}
		root, rootDone, err := b.holdSleepersRoot(r.tree)
		if err != nil {
			cleanup()
			b.problem("scale: %s: %v", r.label, err)
			continue
		}
		state := statefile.Open(filepath.Join(b.stateDir, "scale.json"), io.Discard)
		var kids []proc.Stat
		var walked []proc.Stat
		scan := measure(b.sz.scaleBudget, func() { kids, _ = proc.ChildrenOf(root) })
		write := measure(b.sz.scaleBudget, func() { _ = state.Write(doc(len(kids))) })
		tick := measure(b.sz.scaleBudget, func() {
			kids, _ = proc.ChildrenOf(root)
			_ = state.Write(doc(len(kids)))
		})
		walk := measure(b.sz.scaleBudget, func() { walked = proc.Descendants(proc.System(), root) })
		full := measure(b.sz.scaleBudget, func() { _, _ = proc.ScanAll() })
		state.Close()
		if len(kids) != r.tree || len(walked) != r.tree {
			b.problem("scale: %s: the scan found %d children and the walk %d processes, want %d", r.label, len(kids), len(walked), r.tree)
		}
		inSitu := b.inSitu(r.tree)
		n := processCount()
		rootDone()
		cleanup()
		b.results["tick/"+strconv.Itoa(r.unrelated)+"/"+strconv.Itoa(r.tree)] = tick.median()
		b.results["insitu/"+strconv.Itoa(r.unrelated)+"/"+strconv.Itoa(r.tree)] = inSitu
		t.add(r.label, strconv.Itoa(n), fmt.Sprintf("%.1f", tick.median()/1e3), tick.spread("%.1f", 1e-3),
			fmt.Sprintf("%.1f", scan.median()/1e3), fmt.Sprintf("%.1f", write.median()/1e3),
			fmt.Sprintf("%.1f", walk.median()/1e3), fmt.Sprintf("%.0f", full.median()/1e3), inSituString(inSitu))
	}
	fmt.Fprintf(b.out, "### 6. Scale: one engine tick\n\n")
	fmt.Fprintf(b.out, "In process, against a stand-in engine whose direct children are the tree (as adopted orphans are): "+
		"children scan = `proc.ChildrenOf` (the tick's observe), state write = `statefile.Writer.Write`, tree walk = "+
		"`proc.Descendants` (teardown's scan); full /proc scan = `proc.ScanAll`, for comparison. "+
		"Each repeated for %v. In situ: corral subreaper `--state --poll 0.01` over the same tree, its CPU time divided by its ticks "+
		"(%v window; a tick writes only when the document changed).\n\n", b.sz.scaleBudget, b.sz.scaleInSitu)
	t.print(b.out)
}

func doc(children int) statefile.Document {
	code := 0
	return statefile.Document{ActiveChildren: children, AdoptedChildren: children - 1, Phase: "running",
		OrphanedChildrenTotal: children, RunnerExitCode: &code}
}

// measure calls fn repeatedly for at least budget (5 calls at least, 5000
// at most) and returns the time of each call in ns.
func measure(budget time.Duration, fn func()) samples {
	fn() // warm up
	var s samples
	start := time.Now()
	for len(s) < 5 || (time.Since(start) < budget && len(s) < 5000) {
		t := time.Now()
		fn()
		s = append(s, float64(time.Since(t).Nanoseconds()))
	}
	return s
}

func processCount() int {
	names, _ := readDirNames("/proc")
	n := 0
	for _, name := range names {
		if _, err := strconv.Atoi(name); err == nil {
			n++
		}
	}
	return n
}

// holdSleepersRoot starts a runner with n sleeping direct children (the
// unrelated processes, or the stand-in engine's tree) and returns its pid
// and how to end it.
func (b *bench) holdSleepersRoot(n int) (int, func(), error) {
	marker := b.marker()
	direct := b.find("direct (no launcher)")
	r, err := b.start(direct, opts{}, []string{b.runner, "-marker", marker, "sleepers", strconv.Itoa(n)}, marker, true)
	if err != nil {
		return 0, nil, err
	}
	if _, err := r.expect("ready", 120*time.Second); err != nil {
		r.abort()
		return 0, nil, err
	}
	return r.c.pid, func() {
		r.stdin.Close()
		_, _ = r.c.wait(30 * time.Second)
		killMarked(marker) // the sleepers die with the runner (PDEATHSIG); make sure
	}, nil
}

// inSitu runs corral subreaper --state --poll 0.01 over a runner whose
// tree is tree processes (tree-1 detached helpers: adopted by corral, so
// they are its direct children like the stand-in's), and returns corral's
// CPU ns per tick, or -1.
func (b *bench) inSitu(tree int) float64 {
	l := b.find("corral subreaper (root)")
	if l == nil || l.missing != "" {
		return -1
	}
	const poll = 0.01
	marker := b.marker()
	o := opts{grace: "0", state: filepath.Join(b.stateDir, "insitu-"+randomHex()+".json"), poll: strconv.FormatFloat(poll, 'f', -1, 64)}
	runner := []string{b.runner, "-marker", marker, "detach", strconv.Itoa(tree - 1), "ignore", "hold"}
	r, err := b.start(l, o, runner, marker, true)
	if err != nil {
		b.problem("scale: in situ: %v", err)
		return -1
	}
	defer func() {
		r.stdin.Close()
		_, _ = r.c.wait(30 * time.Second)
		killMarked(marker)
	}()
	if _, err := r.expect("ready", 60*time.Second); err != nil {
		b.problem("scale: in situ: %v", err)
		return -1
	}
	time.Sleep(200 * time.Millisecond) // the first scans adopt the helpers
	a, err := readUsage(r.c.pid)
	if err != nil {
		return -1
	}
	time.Sleep(b.sz.scaleInSitu)
	z, err := readUsage(r.c.pid)
	if err != nil {
		return -1
	}
	ticks := b.sz.scaleInSitu.Seconds() / poll
	return float64(z.runNS-a.runNS) / ticks
}

func inSituString(ns float64) string {
	if ns < 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f", ns/1e3)
}
