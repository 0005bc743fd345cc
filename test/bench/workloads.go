package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// run is one launcher running one runner.
type run struct {
	c      *child
	lines  *lineReader
	stdin  *os.File // write end of the runner's stdin, nil when /dev/null
	marker string
}

// start starts l around runner; withStdin gives the runner a pipe as
// stdin that stop closes.
func (b *bench) start(l *launcher, o opts, runner []string, marker string, withStdin bool) (*run, error) {
	out, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	spec := spawnSpec{argv: l.argv(o, runner), uid: l.uid, out: w, err: b.stderrFile(l), env: b.env, dir: b.dir}
	var stdinW *os.File
	if withStdin {
		r, wr, err := os.Pipe()
		if err != nil {
			out.Close()
			w.Close()
			return nil, err
		}
		spec.stdin, stdinW = r, wr
		defer r.Close()
	}
	c, err := b.reaper.spawn(spec)
	w.Close()
	if err != nil {
		out.Close()
		if stdinW != nil {
			stdinW.Close()
		}
		return nil, err
	}
	return &run{c: c, lines: readLines(out), stdin: stdinW, marker: marker}, nil
}

// expect reads the runner's next line and checks its first word.
func (r *run) expect(word string, timeout time.Duration) ([]string, error) {
	line, err := r.lines.next(timeout)
	if err != nil {
		return nil, err
	}
	f := strings.Fields(line)
	if len(f) == 0 || f[0] != word {
		return nil, fmt.Errorf("runner printed %q, want %q", line, word)
	}
	return f, nil
}

// abort kills the launcher and everything carrying the run's marker.
func (r *run) abort() {
	if r.stdin != nil {
		r.stdin.Close()
	}
	_, _ = r.c.wait(0)
	killMarked(r.marker)
}

var stderrFiles = map[*launcher]*os.File{}

// stderrFile collects a launcher's stderr, for the reason of a failure.
func (b *bench) stderrFile(l *launcher) *os.File {
	if f, ok := stderrFiles[l]; ok {
		return f
	}
	name := strings.NewReplacer(" ", "-", "(", "", ")", "").Replace(l.name)
	f, err := os.OpenFile(filepath.Join(b.dir, "stderr-"+name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil
	}
	stderrFiles[l] = f
	return f
}

// stderrTail returns the last line a launcher printed on stderr.
func (b *bench) stderrTail(l *launcher) string {
	f := stderrFiles[l]
	if f == nil {
		return ""
	}
	data, _ := os.ReadFile(f.Name())
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return lines[len(lines)-1]
}

// fail records a broken run: a problem for corral, and for a peer too
// (the benchmark itself must never be what breaks).
func (b *bench) fail(workload string, l *launcher, err error) {
	msg := err.Error()
	if t := b.stderrTail(l); t != "" {
		msg += "; stderr: " + t
	}
	b.problem("%s: %s: %s", workload, l.name, msg)
}

// rotate returns ls starting at i, so no launcher always runs first.
func rotate(ls []*launcher, i int) []*launcher {
	if len(ls) == 0 {
		return ls
	}
	i %= len(ls)
	return append(append([]*launcher{}, ls[i:]...), ls[:i]...)
}

// ---- 1. launch ----

func (b *bench) launch() {
	var ls []*launcher
	for _, l := range b.launchers {
		if l.missing == "" && (l.only == "" || l.only == "launch") {
			ls = append(ls, l)
		}
	}
	res := map[*launcher]samples{}
	failed := map[*launcher]bool{}
	warmup := 3
	if b.smoke {
		warmup = 0
	}
	for round := -warmup; round < b.sz.launchRuns; round++ {
		for _, l := range rotate(ls, round+warmup) {
			if failed[l] {
				continue
			}
			c, err := b.reaper.spawn(spawnSpec{argv: l.argv(opts{}, []string{"/bin/true"}), uid: l.uid, err: b.stderrFile(l), env: b.env, dir: b.dir})
			if err != nil {
				b.fail("launch", l, err)
				failed[l] = true
				continue
			}
			info, err := c.wait(30 * time.Second)
			if err == nil && (!info.status.Exited() || info.status.ExitStatus() != 0) {
				err = fmt.Errorf("status %s", describeStatus(info.status))
			}
			if err != nil {
				b.fail("launch", l, err)
				failed[l] = true
				continue
			}
			if round >= 0 {
				res[l] = append(res[l], float64(info.mono-c.start))
			}
		}
	}
	direct := res[b.find("direct (no launcher)")].median()
	tini := res[b.find("tini -s")].median()
	n := b.sz.launchRuns
	t := &table{head: []string{"launcher", "median", spreadName(n) + " (ms)", "× /bin/true", "× tini -s", "option's cost (vs the same mode plain)", "runs"}}
	for _, l := range b.launchers {
		if l.only != "" && l.only != "launch" {
			continue
		}
		s := res[l]
		if l.missing != "" || len(s) == 0 {
			t.skip(l.name, orStr(l.missing, "failed"))
			continue
		}
		med := s.median()
		b.results["launch/"+l.name] = med
		cost := ""
		if l.base != nil && len(res[l.base]) > 0 {
			plain := res[l.base].median()
			cost = fmt.Sprintf("%+.2f ms (%s×)", ms(med-plain), ratio(med, plain))
		}
		t.add(l.name, fmt.Sprintf("%.2f ms", ms(med)), s.spread("%.2f", 1e-6), ratio(med, direct), ratio(med, tini), cost, strconv.Itoa(len(s)))
	}
	fmt.Fprintf(b.out, "### 1. Launch: `X -- /bin/true`\n\n")
	fmt.Fprintf(b.out, "Wall time from fork to reaped exit, %d runs per launcher, launchers interleaved (each round in a rotated order). "+
		"Rows with an option are corral with that one opt-in; an option this build does not know (status 2) or refuses here (status 125) is shown as unsupported, not measured.\n\n", n)
	t.print(b.out)
}

func ratio(a, b float64) string {
	if b == 0 || a != a || b != b {
		return "—"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func orStr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// ---- 2. reap throughput ----

func (b *bench) reap() {
	ls := b.available()
	rows := b.rows()
	for _, ref := range b.refs("reap") {
		if ref.missing == "" {
			ls = append(ls, ref)
		}
		rows = append(rows, ref)
	}
	n := b.sz.reapOrphans
	wall := map[*launcher]samples{}
	rate := map[*launcher]samples{}
	produce := map[*launcher]samples{}
	cpu := map[*launcher]samples{}
	inflight := map[*launcher]int{}
	failed := map[*launcher]bool{}
	for round := 0; round < b.sz.reapRuns; round++ {
		for _, l := range rotate(ls, round) {
			if failed[l] {
				continue
			}
			marker := b.marker()
			r, err := b.start(l, opts{}, []string{b.runner, "-marker", marker, "orphans", strconv.Itoa(n)}, marker, false)
			if err != nil {
				b.fail("reap", l, err)
				failed[l] = true
				continue
			}
			f, err := r.expect("produced", 120*time.Second)
			if err != nil {
				r.abort()
				b.fail("reap", l, err)
				failed[l] = true
				continue
			}
			info, err := r.c.wait(120 * time.Second)
			if err == nil && (!info.status.Exited() || info.status.ExitStatus() != 0) {
				err = fmt.Errorf("status %s", describeStatus(info.status))
			}
			// corral waits for its whole tree; a peer that exits with its
			// runner can leave orphans still exiting, which the benchmark
			// adopts (and kills, should one linger).
			if n := killMarked(marker); n > 0 {
				if l.isCorral() && err == nil {
					err = fmt.Errorf("%d processes left behind", n)
				}
				inflight[l] = max(inflight[l], n)
			}
			if err != nil {
				b.fail("reap", l, err)
				failed[l] = true
				continue
			}
			d := float64(info.mono - r.c.start)
			p, _ := strconv.ParseFloat(f[2], 64)
			if len(f) > 3 {
				runnerCPU, _ := strconv.ParseFloat(f[3], 64)
				cpu[l] = append(cpu[l], max(float64(info.cpuNS)-runnerCPU, 0)/float64(n))
			}
			wall[l] = append(wall[l], d)
			rate[l] = append(rate[l], float64(n)/(d/1e9))
			produce[l] = append(produce[l], p)
		}
	}
	tini := rate[b.find("tini -s")].median()
	t := &table{head: []string{"launcher", "orphans/s (median)", spreadName(b.sz.reapRuns), "× tini -s", "wall (ms)", "runner alone (ms)",
		"CPU per orphan, reaper + orphan exit (µs)", "who reaps the orphans"}}
	for _, l := range rows {
		s := rate[l]
		if l.missing != "" || len(s) == 0 {
			t.skip(l.name, orStr(l.missing, "failed"))
			continue
		}
		med := s.median()
		b.results["reap/"+l.name] = med
		t.add(l.name, fmt.Sprintf("%.0f", med), s.spread("%.0f", 1), ratio(med, tini),
			fmt.Sprintf("%.0f", ms(wall[l].median())), fmt.Sprintf("%.0f", ms(produce[l].median())), cpuCell(l, cpu[l]), reaperOf(l, inflight[l]))
	}
	fmt.Fprintf(b.out, "### 2. Reap throughput: a runner creating %d orphans\n\n", n)
	fmt.Fprintf(b.out, "The runner double-forks %d times (the grandchild exits at once; raw vfork-style clones, so producing one costs "+
		"tens of µs and the reaper's cost shows); orphans/s = %d ÷ wall time from launch to the launcher's exit, %d runs. "+
		"\"runner alone\" is the runner's own time to produce them; CPU per orphan is the launcher's rusage (with what it reaped) "+
		"minus the runner's, per orphan: the reaper's work plus each orphan's exit.\n\n", n, n, b.sz.reapRuns)
	t.print(b.out)
}

// cpuCell is the launcher's CPU per orphan: the rusage wait4 reports for it
// (itself and every descendant it reaped) minus the runner's own. Where the
// benchmark reaps the orphans, the launcher's share is not in it.
func cpuCell(l *launcher, s samples) string {
	if len(s) == 0 {
		return "—"
	}
	if l.path == "" || strings.HasPrefix(l.name, "dumb-init") {
		return fmt.Sprintf("%.1f (the benchmark reaps)", s.median()/1e3)
	}
	if strings.HasPrefix(l.name, "bwrap") {
		return "— (the outer bwrap exits before reaping its PID 1)"
	}
	return fmt.Sprintf("%.1f", s.median()/1e3)
}

// reaperOf says who adopts and reaps what the runner orphans, and how
// many orphans at most were still alive when the launcher exited.
func reaperOf(l *launcher, inflight int) string {
	s := reaperName(l)
	if inflight > 0 {
		s += fmt.Sprintf("; it exits before its tree is empty: up to %d orphans still exiting were left to the benchmark", inflight)
	}
	return s
}

func reaperName(l *launcher) string {
	switch {
	case l.path == "":
		return "the benchmark (nearest subreaper)"
	case l.isCorral() && l.ns:
		return "corral (PID 1 of its namespace)"
	case l.isCorral():
		return "corral (subreaper)"
	case strings.HasPrefix(l.name, "unshare"):
		return "the runner (PID 1 of the namespace) never reaps: zombies until the namespace ends"
	case strings.HasPrefix(l.name, "bwrap"):
		return "bwrap (its PID 1)"
	case strings.HasPrefix(l.name, "tini"):
		return "tini (subreaper)"
	case strings.HasPrefix(l.name, "catatonit"):
		return "catatonit (subreaper)"
	case strings.HasPrefix(l.name, "dumb-init"):
		return "the benchmark: dumb-init is no subreaper unless PID 1"
	case l.only == "reap":
		return "itself (subreaper, blocked in wait4)"
	}
	return "?"
}

// ---- 3. teardown ----

func (b *bench) teardown() {
	for _, v := range []struct {
		helpers, grace, key, title string
	}{
		{"ignore", "0", "teardown0", "helpers ignoring SIGTERM, `--grace 0`"},
		{"exit", "10", "teardown10", "helpers exiting on SIGTERM, `--grace 10`"},
	} {
		b.teardownVariant(v.helpers, v.grace, v.key, v.title)
	}
}

func (b *bench) teardownVariant(helpers, grace, key, title string) {
	ls := b.available()
	n := b.sz.helpers
	res := map[*launcher]samples{}
	left := map[*launcher]int{}
	kept := map[*launcher]int{}
	failed := map[*launcher]bool{}
	for round := 0; round < b.sz.teardownRuns; round++ {
		for _, l := range rotate(ls, round) {
			if failed[l] {
				continue
			}
			marker := b.marker()
			r, err := b.start(l, opts{grace: grace}, []string{b.runner, "-marker", marker, "detach", strconv.Itoa(n), helpers}, marker, false)
			if err != nil {
				b.fail("teardown", l, err)
				failed[l] = true
				continue
			}
			f, err := r.expect("exit", 120*time.Second)
			if err != nil {
				r.abort()
				b.fail("teardown", l, err)
				failed[l] = true
				continue
			}
			info, err := r.c.wait(60 * time.Second)
			survivors, keepers := 0, 0
			for _, pid := range marked(marker) {
				if argv := cmdline(pid); len(argv) > 0 && argv[0] == b.runner {
					survivors++
				} else {
					keepers++ // a launcher process that stays with them (bwrap's PID 1)
				}
			}
			killMarked(marker)
			if err == nil && (!info.status.Exited() || info.status.ExitStatus() != 0) {
				err = fmt.Errorf("status %s", describeStatus(info.status))
			}
			if err == nil && (survivors > 0 || keepers > 0) && l.isCorral() {
				err = fmt.Errorf("%d helpers and %d other processes survived corral", survivors, keepers)
			}
			if err != nil {
				b.fail("teardown", l, err)
				failed[l] = true
				continue
			}
			exitAt, _ := strconv.ParseInt(f[1], 10, 64)
			res[l] = append(res[l], float64(info.mono-exitAt))
			left[l] = max(left[l], survivors)
			kept[l] = max(kept[l], keepers)
		}
	}
	t := &table{head: []string{"launcher", "runner exit → launcher exit (median)", spreadName(b.sz.teardownRuns) + " (ms)", "helpers left behind", "what ended the helpers"}}
	for _, l := range b.rows() {
		s := res[l]
		if l.missing != "" || len(s) == 0 {
			t.skip(l.name, orStr(l.missing, "failed"))
			continue
		}
		med := s.median()
		b.results[key+"/"+l.name] = med
		var how string
		switch {
		case left[l] > 0 && kept[l] > 0:
			how = fmt.Sprintf("nothing: left running, and %d launcher process (the namespace's PID 1) stays up with them after the outer one exits; killed by the benchmark, by pid", kept[l])
		case left[l] > 0:
			how = "nothing: left running (killed by the benchmark, by pid)"
		case l.isCorral() && helpers == "ignore":
			how = "corral: SIGTERM, then SIGKILL (grace 0)"
		case l.isCorral():
			how = "corral: SIGTERM; they exit"
		case l.ns:
			how = "the kernel: SIGKILL with the PID namespace"
		default:
			how = "?"
		}
		t.add(l.name, fmt.Sprintf("%.1f ms", ms(med)), s.spread("%.1f", 1e-6), fmt.Sprintf("%d of %d", left[l], n), how)
	}
	fmt.Fprintf(b.out, "### 3. Teardown: %d detached %s\n\n", n, title)
	fmt.Fprintf(b.out, "The runner double-forks %d helpers into their own sessions, waits until each is set up, "+
		"stamps CLOCK_MONOTONIC and exits; the time is from that stamp to the launcher's reaped exit, %d runs. "+
		"Peers get no grace option.\n\n", n, b.sz.teardownRuns)
	t.print(b.out)
}

// ---- 4. idle ----

// idleEntry is one launcher (and, for corral, with or without --state) in
// the idle workload.
type idleEntry struct {
	l     *launcher
	state bool
	label string
}

type idleResult struct {
	hwm map[string][]roleKiB // label -> VmHWM of each launcher process, max over runs
}

type roleKiB struct {
	role string
	kib  uint64
}

func (b *bench) idle() idleResult {
	var entries []idleEntry
	ls := b.available()
	for _, ref := range b.refs("idle") {
		if ref.missing == "" {
			ls = append(ls, ref)
		}
	}
	for _, l := range ls {
		if l.path == "" {
			continue
		}
		entries = append(entries, idleEntry{l: l, label: l.name})
		if l.isCorral() {
			entries = append(entries, idleEntry{l: l, state: true, label: l.name + " --state"})
		}
	}
	cpu := map[string]samples{}
	ticks := map[string]samples{}
	wake := map[string]samples{}
	burst := map[string]samples{}
	nprocs := map[string]int{}
	res := idleResult{hwm: map[string][]roleKiB{}}
	failed := map[string]bool{}
	window := b.sz.idleWindow
	for round := 0; round < b.sz.idleRuns; round++ {
		runs := map[string]*run{}
		for i, e := range entries {
			if failed[e.label] {
				continue
			}
			marker := b.marker()
			o := opts{}
			if e.state {
				o.state = filepath.Join(b.stateDir, fmt.Sprintf("idle-%d-%d.json", round, i))
			}
			r, err := b.start(e.l, o, []string{b.runner, "-marker", marker, "hold"}, marker, true)
			if err != nil {
				b.fail("idle", e.l, err)
				failed[e.label] = true
				continue
			}
			runs[e.label] = r
		}
		for label, r := range runs {
			if _, err := r.expect("ready", 30*time.Second); err != nil {
				r.abort()
				delete(runs, label)
				failed[label] = true
				b.problem("idle: %s: %v", label, err)
			}
		}
		time.Sleep(300 * time.Millisecond) // let start-up settle
		procs := map[string][]int{}
		before := map[string]map[int]procUsage{}
		for label, r := range runs {
			procs[label] = launcherProcs(r.c.pid, b.runner)
			before[label] = map[int]procUsage{}
			for _, pid := range procs[label] {
				u, _ := readUsage(pid)
				before[label][pid] = u
			}
		}
		bursts := sampleWakeups(procs, window, 20*time.Millisecond)
		for label := range runs {
			var dNS, dTicks, dCS uint64
			var roles []roleKiB
			for _, pid := range procs[label] {
				u, err := readUsage(pid)
				if err != nil {
					continue
				}
				a := before[label][pid]
				dNS += u.runNS - a.runNS
				dTicks += u.ticks - a.ticks
				dCS += u.ctxsw - a.ctxsw
				roles = append(roles, roleKiB{role: roleOf(pid), kib: hwm(pid)})
			}
			sec := window.Seconds()
			cpu[label] = append(cpu[label], float64(dNS)/1e6/sec)
			ticks[label] = append(ticks[label], float64(dTicks)*10/sec) // 100 Hz ticks -> ms per s
			wake[label] = append(wake[label], float64(dCS)/sec)
			burst[label] = append(burst[label], float64(bursts[label])/sec)
			nprocs[label] = len(procs[label])
			res.hwm[label] = maxRoles(res.hwm[label], roles)
		}
		for label, r := range runs {
			r.stdin.Close()
			info, err := r.c.wait(30 * time.Second)
			killMarked(r.marker)
			if err == nil && (!info.status.Exited() || info.status.ExitStatus() != 0) {
				err = fmt.Errorf("status %s", describeStatus(info.status))
			}
			if err != nil {
				b.problem("idle: %s: %v", label, err)
				failed[label] = true
			}
		}
	}
	t := &table{head: []string{"launcher", "processes", "CPU (ms per s, median)", spreadName(b.sz.idleRuns), "utime+stime (ms per s)",
		"context switches per s", "wake-ups per s (20 ms bins)"}}
	for _, l := range append(b.rows(), b.refs("idle")...) {
		if l.path == "" {
			continue
		}
		if l.missing != "" {
			t.skip(l.name, l.missing)
			continue
		}
		for _, e := range entries {
			if e.l != l {
				continue
			}
			s := cpu[e.label]
			if len(s) == 0 {
				t.skip(e.label, "failed")
				continue
			}
			b.results["idle/"+e.label] = s.median()
			b.results["wake/"+e.label] = burst[e.label].median()
			b.results["ctxsw/"+e.label] = wake[e.label].median()
			t.add(e.label, strconv.Itoa(nprocs[e.label]), fmt.Sprintf("%.3f", s.median()), s.spread("%.3f", 1),
				fmt.Sprintf("%.2f", ticks[e.label].median()), fmt.Sprintf("%.2f", wake[e.label].median()), fmt.Sprintf("%.2f", burst[e.label].median()))
		}
	}
	fmt.Fprintf(b.out, "### 4. Idle cost: %v while the runner sleeps\n\n", window)
	fmt.Fprintf(b.out, "Every launcher process (for corral in pidns mode: the outer process and the init), all launchers side by side, %d windows. "+
		"CPU is the sum of /proc/PID/task/*/schedstat run time (ns precision); utime+stime is /proc/PID/stat at 100 Hz; "+
		"context switches are voluntary+nonvoluntary over every thread; wake-ups count the 20 ms bins in which any thread of the launcher ran "+
		"(/proc/PID/task/*/schedstat), so one wake-up that switches several threads counts once. `--state` uses the default --poll 0.5 (2 ticks per s).\n\n", b.sz.idleRuns)
	t.print(b.out)
	return res
}

// sampleWakeups watches the launchers' threads for window and counts, per
// label, the bins of length bin in which any of them was scheduled
// (field 3 of /proc/PID/task/TID/schedstat counts the times a thread ran).
func sampleWakeups(procs map[string][]int, window, bin time.Duration) map[string]int {
	tasks := map[string][]string{}
	for label, pids := range procs {
		for _, pid := range pids {
			base := "/proc/" + strconv.Itoa(pid) + "/task/"
			tids, _ := readDirNames(base)
			for _, tid := range tids {
				tasks[label] = append(tasks[label], base+tid+"/schedstat")
			}
		}
	}
	runs := func(paths []string) uint64 {
		var n uint64
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			if f := strings.Fields(string(data)); len(f) >= 3 {
				v, _ := strconv.ParseUint(f[2], 10, 64)
				n += v
			}
		}
		return n
	}
	last := map[string]uint64{}
	for label, paths := range tasks {
		last[label] = runs(paths)
	}
	count := map[string]int{}
	tk := time.NewTicker(bin)
	defer tk.Stop()
	end := time.Now().Add(window)
	for time.Now().Before(end) {
		<-tk.C
		for label, paths := range tasks {
			n := runs(paths)
			if n != last[label] {
				count[label]++
			}
			last[label] = n
		}
	}
	return count
}

// maxRoles keeps, per process position, the larger VmHWM.
func maxRoles(have, got []roleKiB) []roleKiB {
	if len(have) != len(got) {
		if len(got) > len(have) {
			return got
		}
		return have
	}
	for i := range have {
		have[i].kib = max(have[i].kib, got[i].kib)
	}
	return have
}

// ---- 5. memory ----

func (b *bench) memory(idle idleResult) {
	ls := b.available()
	n := b.sz.memoryHelpers
	peak := map[*launcher][]roleKiB{}
	for round := 0; round < b.sz.memoryRuns; round++ {
		for _, l := range rotate(ls, round) {
			if l.path == "" {
				continue
			}
			marker := b.marker()
			o := opts{grace: "0", state: filepath.Join(b.stateDir, fmt.Sprintf("memory-%d-%s.json", round, randomHex())), poll: "0.05"}
			r, err := b.start(l, o, []string{b.runner, "-marker", marker, "detach", strconv.Itoa(n), "ignore", "hold"}, marker, true)
			if err != nil {
				b.fail("memory", l, err)
				continue
			}
			if _, err := r.expect("ready", 60*time.Second); err != nil {
				r.abort()
				b.fail("memory", l, err)
				continue
			}
			// Sample every 2 ms: VmHWM only grows, so the last sample of a
			// process is its peak up to a couple of ms before it exits.
			stop := make(chan struct{})
			done := make(chan []roleKiB)
			go func() {
				var best []roleKiB
				tk := time.NewTicker(2 * time.Millisecond)
				defer tk.Stop()
				for {
					var got []roleKiB
					for _, pid := range launcherProcs(r.c.pid, b.runner) {
						got = append(got, roleKiB{role: roleOf(pid), kib: hwm(pid)})
					}
					if len(got) > 0 && (best == nil || len(got) == len(best)) {
						best = maxRoles(best, got)
					}
					select {
					case <-stop:
						done <- best
						return
					case <-tk.C:
					}
				}
			}()
			time.Sleep(300 * time.Millisecond) // a few ticks at --poll 0.05 over the adopted helpers
			r.stdin.Close()
			_, _ = r.expect("exit", 30*time.Second)
			info, err := r.c.wait(60 * time.Second)
			close(stop)
			best := <-done
			killMarked(marker)
			if err == nil && (!info.status.Exited() || info.status.ExitStatus() != 0) {
				err = fmt.Errorf("status %s", describeStatus(info.status))
			}
			if err != nil {
				b.fail("memory", l, err)
				continue
			}
			peak[l] = maxRoles(peak[l], best)
		}
	}
	t := &table{head: []string{"launcher", "process", "VmHWM idle (MiB)", fmt.Sprintf("VmHWM with %d helpers, teardown (MiB)", n)}}
	for _, l := range b.rows() {
		if l.path == "" {
			continue
		}
		if l.missing != "" {
			t.skip(l.name, l.missing)
			continue
		}
		idleRoles := idle.hwm[l.name]
		roles := peak[l]
		if len(roles) == 0 && len(idleRoles) == 0 {
			t.skip(l.name, "failed")
			continue
		}
		count := max(len(roles), len(idleRoles))
		for i := 0; i < count; i++ {
			var role, a, c string = "", "—", "—"
			if i < len(idleRoles) {
				role = idleRoles[i].role
				a = fmt.Sprintf("%.1f", float64(idleRoles[i].kib)/1024)
				b.results[fmt.Sprintf("memidle/%s/%d", l.name, i)] = float64(idleRoles[i].kib) / 1024
			}
			if i < len(roles) {
				role = roles[i].role
				c = fmt.Sprintf("%.1f", float64(roles[i].kib)/1024)
				b.results[fmt.Sprintf("mem/%s/%d", l.name, i)] = float64(roles[i].kib) / 1024
			}
			if i > 0 && role == roleName(roles, idleRoles, 0) {
				role += " (inner)"
			}
			t.add(l.name, role, a, c)
		}
	}
	fmt.Fprintf(b.out, "### 5. Memory: peak RSS (VmHWM) of every launcher process\n\n")
	fmt.Fprintf(b.out, "Idle: at the end of the idle workload. Under load: the runner leaves %d helpers ignoring SIGTERM; corral runs with "+
		"`--state --poll 0.05 --grace 0`; sampled every 2 ms until the launcher exits; the largest of %d runs. "+
		"corral's exec stage lives only until it execs the runner and is not shown.\n\n", n, b.sz.memoryRuns)
	t.print(b.out)
}

func roleName(a, b []roleKiB, i int) string {
	if i < len(a) {
		return a[i].role
	}
	if i < len(b) {
		return b[i].role
	}
	return ""
}
