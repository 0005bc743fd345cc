// Command window measures how long after its exec a program still answers
// SIGQUIT with the Go runtime's default, a goroutine dump and exit status
// 2: corral in each mode, and, in the same run, interleaved, the floor (a
// Go program that registers SIGQUIT in its only init: ./floor).
//
//	sudo go run ./test/bench/window              # builds corral and the floor
//	sudo go run ./test/bench/window -corral bin/corral -runs 20
//
// For each delay from 0 to -max by -step, and each program, -runs times in
// a shuffled order, it starts the program (os.StartProcess returns once
// the exec has succeeded: the delay counts from there), spins until the
// delay has passed, sends SIGQUIT and classifies the end: "killed" (by
// SIGQUIT: it came before the Go runtime installed its handlers, the
// kernel's default), "dump" (exit 2 and a goroutine dump: after the
// runtime's handlers, before the program's registration), or "caught".
// It prints, per program, the median delay at which the runtime's
// handlers are in place (half the runs are no longer killed) and at which
// SIGQUIT is caught (half the runs catch it), the latest delay with a
// dump, and the difference of each to the floor's; -table, the counts.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

type target struct {
	name   string
	argv   []string
	status int // the exit status once SIGQUIT is caught
	// per delay step: counts
	dump, killed, caught, other []int
}

func main() {
	corral := flag.String("corral", "", "corral binary (default: build ./cmd/corral)")
	modes := flag.String("modes", "subreaper,pidns", "corral modes to measure")
	maxDelay := flag.Duration("max", 6*time.Millisecond, "largest delay")
	step := flag.Duration("step", 100*time.Microsecond, "delay step")
	runs := flag.Int("runs", 10, "runs per program and delay")
	table := flag.Bool("table", false, "print the counts at every delay")
	variant := flag.String("variant", "", "NAME=PATH: another corral build, measured in the same run")
	flag.Parse()

	dir, err := os.MkdirTemp("", "corral-window-")
	check(err)
	defer os.RemoveAll(dir)
	floor := filepath.Join(dir, "floor")
	check(build(floor, "./test/bench/window/floor"))
	if *corral == "" {
		*corral = filepath.Join(dir, "corral")
		check(build(*corral, "./cmd/corral"))
	}
	// A SIGQUIT before the runtime's handlers dumps core: not here.
	check(syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{}))

	steps := int(*maxDelay / *step) + 1
	targets := []*target{{name: "floor", argv: []string{floor}}}
	builds := []string{"corral=" + *corral}
	if *variant != "" {
		builds = append(builds, *variant)
	}
	for _, b := range builds {
		name, path, _ := strings.Cut(b, "=")
		for _, m := range strings.Split(*modes, ",") {
			targets = append(targets, &target{name: name + " " + m, status: 128 + int(syscall.SIGQUIT),
				argv: []string{path, "--mode", m, "--grace", "0.2", "--", "/bin/sleep", "1000"}})
		}
	}
	for _, t := range targets {
		t.dump, t.killed, t.caught, t.other = make([]int, steps), make([]int, steps), make([]int, steps), make([]int, steps)
	}
	type trial struct {
		t *target
		i int
	}
	var trials []trial
	for range *runs {
		for i := range steps {
			for _, t := range targets {
				trials = append(trials, trial{t, i})
			}
		}
	}
	rand.Shuffle(len(trials), func(a, b int) { trials[a], trials[b] = trials[b], trials[a] })
	for _, tr := range trials {
		switch one(tr.t, time.Duration(tr.i)*(*step)) {
		case "dump":
			tr.t.dump[tr.i]++
		case "killed":
			tr.t.killed[tr.i]++
		case "caught":
			tr.t.caught[tr.i]++
		default:
			tr.t.other[tr.i]++
		}
	}
	report(targets, *step, *runs, *table)
}

// one starts t, sends SIGQUIT delay after its exec and classifies the
// end.
func one(t *target, delay time.Duration) string {
	var stderr bytes.Buffer
	cmd := exec.Command(t.argv[0], t.argv[1:]...)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		check(err)
	}
	start := time.Now()
	// Sleep, not to take a CPU from the program, then spin the last 0.3
	// ms: a sleep is not that precise.
	if delay > 300*time.Microsecond {
		time.Sleep(delay - 300*time.Microsecond)
	}
	for time.Since(start) < delay {
	}
	_ = cmd.Process.Signal(syscall.SIGQUIT)
	_ = cmd.Wait()
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled() && ws.Signal() == syscall.SIGQUIT:
		return "killed"
	case ws.Exited() && ws.ExitStatus() == 2 && strings.Contains(stderr.String(), "goroutine "):
		return "dump"
	case ws.Exited() && ws.ExitStatus() == t.status:
		return "caught"
	}
	fmt.Fprintf(os.Stderr, "%s: unexpected end %v: %s\n", t.name, ws, stderr.String())
	return "other"
}

func report(targets []*target, step time.Duration, runs int, table bool) {
	ms := func(i float64) string { return fmt.Sprintf("%.2f", i*float64(step)/float64(time.Millisecond)) }
	if table {
		fmt.Printf("dumps (killed before the runtime's handlers) of %d runs at each delay\n\n| delay ms |", runs)
		for _, t := range targets {
			fmt.Printf(" %s |", t.name)
		}
		fmt.Printf("\n|---|%s\n", strings.Repeat("---|", len(targets)))
		for i := range targets[0].dump {
			fmt.Printf("| %s |", ms(float64(i)))
			for _, t := range targets {
				fmt.Printf(" %d (%d) |", t.dump[i], t.killed[i])
			}
			fmt.Println()
		}
		fmt.Println()
	}
	fmt.Printf("SIGQUIT sent at a delay after exec, %d runs per program and delay (ms; median: half the runs at that delay)\n\n", runs)
	fmt.Printf("| program | runtime's handlers, median | caught, median | latest dump | dumps | other ends | caught median vs floor | latest dump vs floor |\n|---|---|---|---|---|---|---|---|\n")
	f := targets[0]
	for _, t := range targets {
		dumps, other := 0, 0
		for i := range t.dump {
			dumps += t.dump[i]
			other += t.other[i]
		}
		fmt.Printf("| %s | %s | %s | %s | %d | %d | %+.2f | %+.2f |\n", t.name,
			ms(median(t.killed, runs, false)), ms(median(t.caught, runs, true)), ms(float64(latest(t.dump))), dumps, other,
			(median(t.caught, runs, true)-median(f.caught, runs, true))*float64(step)/float64(time.Millisecond),
			float64(time.Duration(latest(t.dump)-latest(f.dump))*step)/float64(time.Millisecond))
	}
}

// latest is the last delay step with a dump.
func latest(dump []int) int {
	for i := len(dump) - 1; i >= 0; i-- {
		if dump[i] > 0 {
			return i
		}
	}
	return 0
}

// median is the delay step (interpolated) at which half the runs have
// count: the first where it reaches half (rising), or falls below it
// (not rising), on a running mean of three steps.
func median(count []int, runs int, rising bool) float64 {
	frac := func(i int) float64 {
		lo, hi := max(i-1, 0), min(i+1, len(count)-1)
		sum := 0
		for j := lo; j <= hi; j++ {
			sum += count[j]
		}
		return float64(sum) / float64(runs*(hi-lo+1))
	}
	prev := frac(0)
	for i := 1; i < len(count); i++ {
		cur := frac(i)
		if rising && prev < 0.5 && cur >= 0.5 || !rising && prev >= 0.5 && cur < 0.5 {
			return float64(i-1) + (0.5-prev)/(cur-prev)
		}
		prev = cur
	}
	return float64(len(count))
}

func build(out, pkg string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "window:", err)
		os.Exit(1)
	}
}
