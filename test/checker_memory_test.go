package test

// The socket checker against a runner that turns on corral (issue 33,
// finding 2; SPEC "A policy run holds against a runner that turns on
// corral"): no corral process grows past 64 MiB whatever the runner's
// socket calls are.

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// corralMemoryBound is SPEC's bound on any corral process's memory.
const corralMemoryBound = 64 << 20

// corralProcs returns corral's process and its descendants that run
// corral's binary (the pidns init), as pid → name.
func corralProcs(t *testing.T, root int) map[int]string {
	t.Helper()
	children := map[int][]int{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(data)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		children[ppid] = append(children[ppid], pid)
	}
	want, err := filepath.EvalSymlinks(corralBin)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{root: "corral"}
	var walk func(int)
	walk = func(pid int) {
		for _, c := range children[pid] {
			if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", c)); err == nil && strings.TrimSuffix(exe, " (deleted)") == want {
				out[c] = "corral's process beneath it"
			}
			walk(c)
		}
	}
	walk(root)
	return out
}

// peakRSS is a process's VmHWM in bytes.
func peakRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

// A flood of blocking sendto calls with an address, each interrupted by a
// signal whose handler has no SA_RESTART once the checker has made some of
// it: each leaves a completed call whose answer found no one, and the
// restart it would wait for never comes. Before the fix each kept its 4 MiB
// copy: 96 of them took it past 100 MiB in corral (subreaper) or the init (pidns).
func TestCheckerMemoryInterruptedSends(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		requireLandlock(t, 1)
		e := newEnv(t, m)
		ready, done := e.file("ready"), e.file("done")
		// Subreaper mode needs TCP allowed (--allow-net) for the runner's
		// loopback connections; the namespace modes have a loopback of
		// their own either way, and the checker sees the same calls.
		runner := e.helper("sendflood", "-n", "96", "-threads", "4", "-ready", ready, "-done", done)
		r := e.start(e.args(netOpts("--allow-net", "x.test:443"), runner), e.markerEnv())
		r.waitFile(ready)
		var over []string
		for pid, name := range corralProcs(t, r.cmd.Process.Pid) {
			hwm, err := peakRSS(pid)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			t.Logf("%s (pid %d): peak RSS %d KiB", name, pid, hwm>>10)
			if hwm >= corralMemoryBound {
				over = append(over, fmt.Sprintf("%s (pid %d): peak RSS %d MiB", name, pid, hwm>>20))
			}
		}
		if err := os.WriteFile(done, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		res := r.wait(corralTimeout)
		wantCode(t, res, 0)
		t.Logf("runner: %s", strings.TrimSpace(res.stdout))
		var eintr, sent int
		if _, err := fmt.Sscanf(strings.TrimSpace(res.stdout), "eintr=%d done=%d", &eintr, &sent); err != nil || eintr < 32 {
			t.Errorf("the flood did not interrupt its sends (%q, stderr %q): the test proves nothing", res.stdout, res.stderr)
		}
		if len(over) > 0 {
			t.Errorf("a corral process grew past %d MiB under a flood of interrupted sends:\n%s", corralMemoryBound>>20, strings.Join(over, "\n"))
		}
		e.assertGone()
	})
}
