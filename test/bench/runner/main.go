// Command runner is the program the corral benchmarks run under every
// launcher (corral in each mode, tini, dumb-init, catatonit, bwrap, unshare,
// and directly), so each workload is the same for all of them.
//
// Its argv carries "-marker MARKER", and every process it forks is a raw
// copy of it (see fork.go), so the benchmark finds from the host's /proc
// every process a run caused to exist, by that marker, and proves that none
// survives.
//
// Commands (the first line on stdout is what the benchmark reads):
//
//	orphans N         create N orphans (double fork; the grandchild exits at
//	                  once); print "produced N NS CPU" (NS: nanoseconds the
//	                  runner spent producing them; CPU: its own and its
//	                  intermediate children's CPU time, ns) and exit 0
//	detach N ignore|exit [hold]
//	                  leave N detached helpers (double fork, new session) that
//	                  ignore SIGTERM or exit on it; once every helper is set up,
//	                  with hold print "ready" and wait for end of input;
//	                  then print "exit T" (T: CLOCK_MONOTONIC in nanoseconds,
//	                  read just before exiting) and exit 0
//	hold              print "ready", wait for end of input, exit 0
//	launch PATH [ARG...]
//	                  the least a Go launcher does: fork and exec PATH, wait
//	                  for it, exit with its status (a reference row)
//	sleepers N        start N direct children that die with the runner
//	                  (PR_SET_PDEATHSIG), print "ready", wait for end of
//	                  input, exit 0
package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	args := os.Args[1:]
	if len(args) >= 2 && args[0] == "-marker" {
		args = args[2:]
	}
	if len(args) == 0 {
		die("usage: runner [-marker M] orphans N | detach N ignore|exit [hold] | hold | sleepers N | launch PATH [ARG...] | reaper PATH [ARG...] | ticker PATH [ARG...]")
	}
	if !forkSupported && args[0] != "hold" && args[0] != "launch" && args[0] != "reaper" && args[0] != "ticker" {
		die("runner: raw forks are implemented for linux/amd64 and linux/arm64 only")
	}
	switch args[0] {
	case "orphans":
		orphans(count(args, 1))
	case "detach":
		if len(args) < 3 || (args[2] != "ignore" && args[2] != "exit") {
			die("runner: detach N ignore|exit [hold]")
		}
		detach(count(args, 1), args[2] == "ignore", len(args) > 3 && args[3] == "hold")
	case "hold":
		ready()
		waitEOF()
	case "launch":
		launch(args[1:])
	case "reaper":
		reaper(args[1:])
	case "ticker":
		ticker(args[1:])
	case "sleepers":
		n := count(args, 1)
		for i := 0; i < n; i++ {
			if _, errno := sleeper(); errno != 0 {
				die(fmt.Sprintf("runner: fork sleeper %d: %v", i, syscall.Errno(errno)))
			}
		}
		ready()
		waitEOF()
	default:
		die("runner: unknown command " + args[0])
	}
}

func orphans(n int) {
	start := time.Now()
	for i := 0; i < n; i++ {
		pid, errno := orphan()
		if errno != 0 {
			die(fmt.Sprintf("runner: fork orphan %d: %v", i, syscall.Errno(errno)))
		}
		reap(pid)
	}
	elapsed := time.Since(start)
	fmt.Printf("produced %d %d %d\n", n, elapsed.Nanoseconds(), cpuNS(syscall.RUSAGE_SELF)+cpuNS(syscall.RUSAGE_CHILDREN))
}

func detach(n int, ignore, hold bool) {
	// A blocking pipe (os.Pipe would make it non-blocking, and a helper's
	// byte could then be lost to EAGAIN), drained while helpers start.
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		die("runner: pipe: " + err.Error())
	}
	readyR, readyW := fds[0], fds[1]
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 4096)
		got := 0
		for got < n {
			k, err := unix.Read(readyR, buf)
			if err == unix.EINTR {
				continue
			}
			if err != nil || k == 0 {
				done <- fmt.Errorf("only %d of %d helpers reported ready: %v", got, n, err)
				return
			}
			got += k
		}
		done <- nil
	}()
	handler := uintptr(0) // SIG_DFL: SIGTERM ends the helper
	if ignore {
		handler = 1 // SIG_IGN
	}
	for i := 0; i < n; i++ {
		pid, errno := detached(handler, readyW)
		if errno != 0 {
			die(fmt.Sprintf("runner: fork helper %d: %v", i, syscall.Errno(errno)))
		}
		reap(pid)
	}
	unix.Close(readyW)
	// Each helper writes one byte once its SIGTERM disposition is set.
	if err := <-done; err != nil {
		die("runner: " + err.Error())
	}
	if hold {
		ready()
		waitEOF()
	}
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	fmt.Printf("exit %d\n", ts.Nano())
	os.Exit(0)
}

// launch is the least a Go launcher does: fork and exec its argument,
// wait for it, exit with its status.
func launch(argv []string) {
	if len(argv) == 0 {
		die("runner: launch PATH [ARG...]")
	}
	pid, err := syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{Env: os.Environ(), Files: []uintptr{0, 1, 2}})
	if err != nil {
		die("runner: launch: " + err.Error())
	}
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			break
		}
	}
	if ws.Signaled() {
		os.Exit(128 + int(ws.Signal()))
	}
	os.Exit(ws.ExitStatus())
}

// reaper is the floor of a Go reaper: a child subreaper that starts its
// argument and blocks in wait4(-1) until nothing is left, nothing else
// (no signals forwarded, no accounting). What corral pays per orphan
// beyond it is corral's; what it pays itself is the Go runtime's around
// one blocking system call.
func reaper(argv []string) {
	if len(argv) == 0 {
		die("runner: reaper PATH [ARG...]")
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		die("runner: reaper: " + err.Error())
	}
	pid, err := syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{Env: os.Environ(), Files: []uintptr{0, 1, 2}})
	if err != nil {
		die("runner: reaper: " + err.Error())
	}
	code := 0
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, unix.WALL, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			break // ECHILD: the tree is empty
		}
		if got == pid {
			code = ws.ExitStatus()
		}
	}
	os.Exit(code)
}

// ticker is the floor of a Go program that wakes twice a second (as
// corral does with --state at the default --poll) and does nothing
// then: it starts its argument, waits for it in a goroutine blocked in
// wait4, and selects on a time.Ticker until it exits.
func ticker(argv []string) {
	if len(argv) == 0 {
		die("runner: ticker PATH [ARG...]")
	}
	pid, err := syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{Env: os.Environ(), Files: []uintptr{0, 1, 2}})
	if err != nil {
		die("runner: ticker: " + err.Error())
	}
	done := make(chan syscall.WaitStatus)
	go func() {
		var ws syscall.WaitStatus
		for {
			if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
				break
			}
		}
		done <- ws
	}()
	t := time.NewTicker(500 * time.Millisecond)
	for {
		select {
		case <-t.C:
		case ws := <-done:
			os.Exit(ws.ExitStatus())
		}
	}
}

// cpuNS is user+system time of who (RUSAGE_SELF or RUSAGE_CHILDREN).
func cpuNS(who int) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// reap waits for the intermediate child of a double fork.
func reap(pid int) {
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			die(fmt.Sprintf("runner: wait for %d: %v", pid, err))
		}
		if !ws.Exited() || ws.ExitStatus() != 0 {
			die(fmt.Sprintf("runner: intermediate child %d failed: %v", pid, ws))
		}
		return
	}
}

func ready() { fmt.Println("ready") }

// waitEOF blocks until the benchmark closes the runner's stdin.
func waitEOF() {
	buf := make([]byte, 64)
	for {
		n, err := syscall.Read(0, buf)
		if err == syscall.EINTR {
			continue
		}
		if n <= 0 {
			return
		}
	}
}

func count(args []string, i int) int {
	if len(args) <= i {
		die("runner: " + args[0] + " needs a count")
	}
	n, err := strconv.Atoi(args[i])
	if err != nil || n < 0 {
		die("runner: bad count " + strconv.Quote(args[i]))
	}
	return n
}

func die(msg string) {
	fmt.Fprintln(os.Stderr, msg)
	os.Exit(3)
}
