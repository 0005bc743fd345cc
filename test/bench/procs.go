package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/corral-sh/corral/internal/proc"
	"golang.org/x/sys/unix"
)

// The benchmark is a child subreaper and the only caller of wait4 in its
// process (never exec.Cmd.Wait): what a launcher lets escape (tini and
// dumb-init leave detached helpers running; direct runs orphan everything)
// is adopted here rather than by the host's init, counted, killed by pid
// and reaped, so nothing a run started outlives the benchmark.

// exitInfo is one reaped child.
type exitInfo struct {
	status syscall.WaitStatus
	mono   int64 // CLOCK_MONOTONIC nanoseconds right after wait4 returned
	cpuNS  int64 // user+system time of the child and every descendant it reaped
}

type reaper struct {
	mu      sync.Mutex
	waiters map[int]chan exitInfo
	kick    chan struct{}
}

func newReaper() (*reaper, error) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("prctl(PR_SET_CHILD_SUBREAPER): %w", err)
	}
	r := &reaper{waiters: map[int]chan exitInfo{}, kick: make(chan struct{}, 1)}
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, unix.SIGCHLD)
	go r.loop(chld)
	return r, nil
}

func (r *reaper) loop(chld <-chan os.Signal) {
	for {
		for {
			var ws syscall.WaitStatus
			var ru syscall.Rusage
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG|unix.WALL, &ru)
			if err == syscall.EINTR {
				continue
			}
			if err != nil || pid <= 0 {
				break
			}
			info := exitInfo{status: ws, mono: monotonic(), cpuNS: ru.Utime.Nano() + ru.Stime.Nano()}
			r.mu.Lock()
			if ch, ok := r.waiters[pid]; ok {
				ch <- info
				delete(r.waiters, pid)
			}
			r.mu.Unlock()
		}
		select {
		case <-chld:
		case <-r.kick:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func monotonic() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// child is one process the benchmark started.
type child struct {
	pid   int
	start int64 // CLOCK_MONOTONIC nanoseconds just before the fork
	done  chan exitInfo
}

// spawnSpec says how to start one process.
type spawnSpec struct {
	argv  []string
	uid   int // 0: as the benchmark; else run as uid:uid with no groups
	stdin *os.File
	out   *os.File // stdout; nil: /dev/null
	err   *os.File // stderr; nil: /dev/null
	dir   string
	env   []string
}

var devNull *os.File

// spawn starts a process. The fork and the registration of its waiter
// happen under the reaper's lock, so its exit cannot be reaped unseen.
func (r *reaper) spawn(s spawnSpec) (*child, error) {
	files := []uintptr{devNull.Fd(), devNull.Fd(), devNull.Fd()}
	if s.stdin != nil {
		files[0] = s.stdin.Fd()
	}
	if s.out != nil {
		files[1] = s.out.Fd()
	}
	if s.err != nil {
		files[2] = s.err.Fd()
	}
	sys := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if s.uid != 0 {
		sys.Credential = &syscall.Credential{Uid: uint32(s.uid), Gid: uint32(s.uid), Groups: []uint32{}}
	}
	attr := &syscall.ProcAttr{Dir: s.dir, Env: s.env, Files: files, Sys: sys}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := &child{done: make(chan exitInfo, 1)}
	c.start = monotonic()
	pid, err := syscall.ForkExec(s.argv[0], s.argv, attr)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", s.argv[0], err)
	}
	c.pid = pid
	r.waiters[pid] = c.done
	tracked.add(pid)
	select {
	case r.kick <- struct{}{}:
	default:
	}
	return c, nil
}

// wait waits for the child's exit, killing it after timeout.
func (c *child) wait(timeout time.Duration) (exitInfo, error) {
	select {
	case info := <-c.done:
		tracked.remove(c.pid)
		return info, nil
	case <-time.After(timeout):
		// Our unreaped child: its pid cannot have been reused.
		_ = unix.Kill(c.pid, unix.SIGKILL)
		info := <-c.done
		tracked.remove(c.pid)
		return info, fmt.Errorf("pid %d still running after %v: killed", c.pid, timeout)
	}
}

// tracked are the launchers started and not yet reaped, for the emergency
// cleanup on SIGINT/SIGTERM.
var tracked = &pidSet{m: map[int]bool{}}

type pidSet struct {
	mu sync.Mutex
	m  map[int]bool
}

func (s *pidSet) add(pid int)    { s.mu.Lock(); s.m[pid] = true; s.mu.Unlock() }
func (s *pidSet) remove(pid int) { s.mu.Lock(); delete(s.m, pid); s.mu.Unlock() }
func (s *pidSet) list() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]int, 0, len(s.m))
	for p := range s.m {
		out = append(out, p)
	}
	return out
}

// lineReader hands out the lines a runner prints, with a timeout.
type lineReader struct {
	lines chan string
}

func readLines(r io.ReadCloser) *lineReader {
	lr := &lineReader{lines: make(chan string, 16)}
	go func() {
		defer r.Close()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lr.lines <- sc.Text()
		}
		close(lr.lines)
	}()
	return lr
}

func (lr *lineReader) next(timeout time.Duration) (string, error) {
	select {
	case l, ok := <-lr.lines:
		if !ok {
			return "", errors.New("runner's output ended before the expected line")
		}
		return l, nil
	case <-time.After(timeout):
		return "", fmt.Errorf("no line from the runner within %v", timeout)
	}
}

// ---- /proc ----

// cmdline returns a process's argv, nil when it is gone or a zombie.
func cmdline(pid int) []string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(data) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")
}

func hasMarker(argv []string, marker string) bool {
	for _, a := range argv {
		if a == marker {
			return true
		}
	}
	return false
}

// marked lists the live (non-zombie) processes whose argv holds marker.
// The benchmark's marker is a whole argument, so the launcher, whose argv
// holds the runner's, carries it too.
func marked(marker string) []int {
	out := processesWhere(func(argv []string) bool { return hasMarker(argv, marker) })
	sort.Ints(out)
	return out
}

// markedPrefix lists live processes with an argument starting with prefix.
func markedPrefix(prefix string) []int {
	return processesWhere(func(argv []string) bool {
		return slices.ContainsFunc(argv, func(a string) bool { return strings.HasPrefix(a, prefix) })
	})
}

// processesWhere lists the live processes but this one whose argv matches.
func processesWhere(match func(argv []string) bool) []int {
	names, _ := readDirNames("/proc")
	var out []int
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if match(cmdline(pid)) {
			out = append(out, pid)
		}
	}
	return out
}

func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// killMarked SIGKILLs, by pid, every live process carrying marker as a
// whole argument, and waits until none is left. It returns how many it
// killed.
func killMarked(marker string) int {
	return killWhere(func() []int { return marked(marker) }, func(argv []string) bool { return hasMarker(argv, marker) })
}

// killPrefixed does the same for every argument starting with prefix.
func killPrefixed(prefix string) int {
	return killWhere(func() []int { return markedPrefix(prefix) }, func(argv []string) bool {
		for _, a := range argv {
			if strings.HasPrefix(a, prefix) {
				return true
			}
		}
		return false
	})
}

// killWhere signals each process through a pidfd taken before its argv is
// checked, so a pid reused meanwhile is never hit.
func killWhere(find func() []int, check func([]string) bool) int {
	killed := map[int]bool{}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		pids := find()
		if len(pids) == 0 {
			return len(killed)
		}
		for _, pid := range pids {
			fd, err := unix.PidfdOpen(pid, 0)
			if err != nil {
				continue
			}
			if check(cmdline(pid)) && unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) == nil {
				killed[pid] = true
			}
			unix.Close(fd)
		}
		time.Sleep(5 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "bench: processes survive SIGKILL: %v\n", find())
	return len(killed)
}

// launcherProcs lists the launcher's own processes: the launcher and every
// descendant that is not the runner or below it. The runner is the first
// process of the tree whose argv[0] is runnerPath (the exec stage of corral
// or unshare's fork is the launcher until it execs). Both workloads that
// ask skip the direct row, so root is always a launcher, even when it is
// the runner's binary (a reference row).
func launcherProcs(root int, runnerPath string) []int {
	var out []int
	queue := []int{root}
	src := proc.System()
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		argv := cmdline(pid)
		if argv == nil || (argv[0] == runnerPath && pid != root) {
			continue
		}
		out = append(out, pid)
		kids, _ := src.Children(pid)
		queue = append(queue, kids...)
	}
	return out
}

// procUsage is what the idle workload reads of one process.
type procUsage struct {
	ticks   uint64 // utime+stime from /proc/PID/stat, clock ticks (all threads, dead ones too)
	runNS   uint64 // sum over live threads of /proc/PID/task/TID/schedstat field 1
	ctxsw   uint64 // sum over live threads of voluntary+nonvoluntary context switches
	threads int
}

func readUsage(pid int) (procUsage, error) {
	var u procUsage
	base := "/proc/" + strconv.Itoa(pid)
	data, err := os.ReadFile(base + "/stat")
	if err != nil {
		return u, err
	}
	f := bytes.Fields(data[bytes.LastIndexByte(data, ')')+1:])
	if len(f) < 13 {
		return u, fmt.Errorf("short stat for %d", pid)
	}
	ut, _ := strconv.ParseUint(string(f[11]), 10, 64)
	st, _ := strconv.ParseUint(string(f[12]), 10, 64)
	u.ticks = ut + st
	tids, err := readDirNames(base + "/task")
	if err != nil {
		return u, err
	}
	for _, tid := range tids {
		if s, err := os.ReadFile(base + "/task/" + tid + "/schedstat"); err == nil {
			if fs := strings.Fields(string(s)); len(fs) > 0 {
				v, _ := strconv.ParseUint(fs[0], 10, 64)
				u.runNS += v
			}
		}
		if s, err := os.ReadFile(base + "/task/" + tid + "/status"); err == nil {
			u.ctxsw += statusField(string(s), "voluntary_ctxt_switches") + statusField(string(s), "nonvoluntary_ctxt_switches")
		}
		u.threads++
	}
	return u, nil
}

// statusField returns a numeric field of /proc/PID/status (kB for sizes).
func statusField(status, key string) uint64 {
	for _, line := range strings.Split(status, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || k != key {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) == 0 {
			return 0
		}
		n, _ := strconv.ParseUint(fs[0], 10, 64)
		return n
	}
	return 0
}

// hwm returns VmHWM of pid in KiB, 0 when it is gone.
func hwm(pid int) uint64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	return statusField(string(data), "VmHWM")
}

// roleOf names a launcher process by its argv[0] (corral's stages are
// "corral [init]" and "corral [exec]").
func roleOf(pid int) string {
	argv := cmdline(pid)
	if argv == nil {
		return "?"
	}
	return filepath.Base(argv[0])
}
