package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// syscallKinds are the system calls the launch analysis names (README,
// "Where launch time goes"); the table shows each beside the total.
var syscallKinds = []string{"futex", "rt_sigaction", "rt_sigprocmask", "nanosleep", "prctl", "mmap"}

// syscallCount is one traced run: strace's summary and the clones it saw.
type syscallCount struct {
	total   int
	kinds   map[string]int
	threads int // clone/clone3 with CLONE_THREAD
	procs   int // processes created (the runner, the pidns init, stages)
}

// syscalls counts the system calls of `X -- /bin/true` for every plain row
// (corral in each mode, the peers and the minimal Go launcher) with `strace -f -C` (the runner's own included, as
// the figure is), and the threads and processes created. Under
// strace the runner is never held with ptrace (it is strace's already), so
// the count lacks that path's waitid and PTRACE_DETACH; and strace slows
// every call, which adds scheduler futex and sysmon nanosleep calls that
// an untraced run makes fewer of. The count is the median of the runs.
func (b *bench) syscalls() {
	runs := 7
	if b.smoke {
		runs = 1
	}
	strace, err := exec.LookPath("strace")
	if err != nil {
		return // needTool said so
	}
	t := &table{head: append(append([]string{"launcher", "system calls (median)", "min–max"}, syscallKinds...), "threads created", "processes created", "runs")}
	for _, l := range b.launchers {
		if l.option != "" || (l.only != "" && l.only != "launch") {
			continue
		}
		if l.missing != "" {
			t.skip(l.name, l.missing)
			continue
		}
		var counts []syscallCount
		for i := range runs {
			out := filepath.Join(b.stateDir, fmt.Sprintf("strace-%d-%d", len(counts), i))
			argv := append([]string{strace, "-f", "-C", "-o", out}, l.argv(opts{}, []string{"/bin/true"})...)
			info, text, err := b.capture(argv, l.uid, 60*time.Second)
			if err == nil && (!info.status.Exited() || info.status.ExitStatus() != 0) {
				err = fmt.Errorf("status %s: %s", describeStatus(info.status), strings.TrimSpace(text))
			}
			var c syscallCount
			if err == nil {
				c, err = parseStrace(out)
			}
			os.Remove(out)
			if err != nil {
				if l.isCorral() {
					b.problem("syscalls: strace of %s: %v", l.name, err)
				}
				break
			}
			counts = append(counts, c)
		}
		if len(counts) == 0 {
			t.skip(l.name, "failed")
			continue
		}
		med := func(f func(syscallCount) int) (int, int, int) {
			v := make([]int, len(counts))
			for i, c := range counts {
				v[i] = f(c)
			}
			slices.Sort(v)
			return v[len(v)/2], v[0], v[len(v)-1]
		}
		total, lo, hi := med(func(c syscallCount) int { return c.total })
		threads, _, _ := med(func(c syscallCount) int { return c.threads })
		procs, _, _ := med(func(c syscallCount) int { return c.procs })
		b.results["syscalls/"+l.name] = float64(total)
		b.results["threads/"+l.name] = float64(threads)
		row := []string{l.name, strconv.Itoa(total), fmt.Sprintf("%d–%d", lo, hi)}
		for _, k := range syscallKinds {
			m, _, _ := med(func(c syscallCount) int { return c.kinds[k] })
			row = append(row, strconv.Itoa(m))
		}
		t.add(append(row, strconv.Itoa(threads), strconv.Itoa(procs), strconv.Itoa(len(counts)))...)
	}
	fmt.Fprintf(b.out, "### 1b. System calls: `strace -f -C corral --mode M -- /bin/true`\n\n")
	fmt.Fprintf(b.out, "Every call of every process and thread (the runner's own included), %d runs per row, median. "+
		"Threads created are clones with CLONE_THREAD (the Go runtime's and corral's); processes are the other clones (the runner, the pidns init, a stage). "+
		"Under strace the runner is not held with ptrace (strace holds it), and the slowdown adds scheduler futex and sysmon nanosleep calls.\n\n", runs)
	t.print(b.out)
}

// parseStrace reads `strace -f -C -o FILE`: the trace lines, then the
// summary table.
func parseStrace(path string) (syscallCount, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return syscallCount{}, err
	}
	c := syscallCount{kinds: map[string]int{}, total: -1}
	tids := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		// A summary row: "% time  seconds  usecs/call  calls  [errors]  syscall".
		if len(f) >= 5 && !strings.Contains(line, "(") {
			if _, err := strconv.ParseFloat(f[0], 64); err == nil {
				if n, err := strconv.Atoi(f[3]); err == nil {
					name := f[len(f)-1]
					if name == "total" {
						c.total = n
					} else {
						c.kinds[name] += n
					}
				}
			}
			continue
		}
		// A trace line: "TID name(args) = result", possibly split into
		// "<unfinished ...>" and "<... name resumed>" lines.
		if len(f) < 2 {
			continue
		}
		tids[f[0]] = true
		call := f[1]
		if (strings.HasPrefix(call, "clone(") || strings.HasPrefix(call, "clone3(")) && strings.Contains(line, "CLONE_THREAD") {
			c.threads++
		}
	}
	// Every task strace saw is the first process, a thread or a process
	// created (a clone that failed made none).
	c.procs = max(0, len(tids)-1-c.threads)
	if c.total < 0 {
		return c, fmt.Errorf("no summary in %s", path)
	}
	c.kinds["clone"] += c.kinds["clone3"]
	return c, nil
}
