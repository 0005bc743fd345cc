package test

// Nothing pinned (docs/ARCHITECTURE.md, "Containment"): once the runner
// has its working directory, corral's own processes (the host side, and
// the init in pidns mode) move to / and keep no hold on the caller's
// directory, while the runner keeps it.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestCorralLeavesTheCallersDirectory(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		mnt := e.file("m")
		if err := os.Mkdir(mnt, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "mode=0777"); err != nil {
			missingFeature(t, fmt.Sprintf("mount a tmpfs: %v", err))
		}
		mounted := true
		t.Cleanup(func() {
			if mounted {
				_ = unix.Unmount(mnt, unix.MNT_DETACH)
			}
		})
		// The runner is in the tmpfs until told to leave it, then goes to
		// / and sleeps.
		script := ": " + e.marker + "; touch ready; while [ ! -e leave ]; do sleep 0.02; done; cd / && exec " +
			strings.Join(e.helper("sleep", "30"), " ")
		cmd := e.command(e.args(opts("", "0.1"), []string{"/bin/sh", "-c", script}))
		cmd.Dir = mnt
		r := e.startCmd(cmd)
		r.waitFile(filepath.Join(mnt, "ready"))

		corral := cmd.Process.Pid
		runner := markedShell(t, e.marker)
		own := []int{corral}
		if m.pidns() {
			own = append(own, childrenOf(t, corral)...) // the init
			if len(own) != 2 {
				t.Fatalf("corral %d has %d children, want the init alone", corral, len(own)-1)
			}
		}
		for _, pid := range own {
			if got := waitCwd(pid, "/"); got != "/" {
				t.Errorf("pid %d (corral's own) has cwd %q while the runner runs, want /", pid, got)
			}
			if fds := fdsBeneath(pid, mnt); len(fds) > 0 {
				t.Errorf("pid %d (corral's own) holds descriptors beneath the caller's directory: %v", pid, fds)
			}
		}
		if got := cwdOf(runner); got != mnt {
			t.Errorf("the runner's cwd is %q, want the caller's %q", got, mnt)
		}

		if err := os.WriteFile(filepath.Join(mnt, "leave"), nil, 0o666); err != nil {
			t.Fatal(err)
		}
		if got := waitCwd(runner, "/"); got != "/" {
			t.Fatalf("the runner did not leave the tmpfs: cwd %q; %s", got, r.partial())
		}
		if err := unix.Unmount(mnt, 0); err != nil {
			t.Errorf("umount of the caller's tmpfs while corral runs: %v (a process of corral's pins it)", err)
		} else {
			mounted = false
		}
		r.signal(unix.SIGTERM)
		r.wait(corralTimeout)
		e.assertGone()
	})
}

// markedShell is the pid of the one shell carrying marker: the runner.
func markedShell(t *testing.T, marker string) int {
	t.Helper()
	shells := map[int]bool{}
	for _, p := range markedProcs(marker) {
		if strings.HasPrefix(p.cmdline, "/bin/sh ") {
			shells[p.pid] = true
		}
	}
	// The shell forks a child for each sleep, which carries the same
	// command line until it execs: the runner is the shell whose parent
	// is not one of them.
	var found []int
	for pid := range shells {
		if !shells[parentOf(pid)] {
			found = append(found, pid)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one runner shell carrying %s, found %v", marker, found)
	}
	return found[0]
}

// childrenOf lists the children of pid, from every thread's children file.
func childrenOf(t *testing.T, pid int) []int {
	t.Helper()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, task := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

func cwdOf(pid int) string {
	got, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return got
}

// waitCwd polls, bounded, until pid's cwd is want, and returns the last
// seen: corral moves right after the runner started, which may come after
// the runner's first instructions.
func waitCwd(pid int, want string) string {
	deadline := time.Now().Add(goneTimeout)
	for {
		got := cwdOf(pid)
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fdsBeneath lists pid's descriptors that name a path beneath dir.
func fdsBeneath(pid int, dir string) []string {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return []string{err.Error()}
	}
	var out []string
	for _, ent := range entries {
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, ent.Name()))
		if err == nil && (target == dir || strings.HasPrefix(target, dir+"/")) {
			out = append(out, ent.Name()+" → "+target)
		}
	}
	return out
}
