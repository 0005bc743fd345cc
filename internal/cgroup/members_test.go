package cgroup

import (
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// pidfdOf opens a pidfd on pid, closed when the test ends.
func pidfdOf(t *testing.T, pid int) int {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("pidfd_open %d: %v", pid, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// requireCgroupID skips where the kernel cannot name a pidfd's cgroup.
func requireCgroupID(t *testing.T) {
	t.Helper()
	fd := pidfdOf(t, os.Getpid())
	if _, err := PidfdCgroupID(fd); errors.Is(err, errors.ErrUnsupported) {
		missingFeature(t, err.Error())
	} else if err != nil {
		t.Fatal(err)
	}
}

// startOutside starts a sleeping helper in the test's own cgroup.
func startOutside(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := helperCmd("sleep")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); reapAll(t) })
	return cmd
}

// handleID is the cgroup's id as name_to_handle_at gives it (what
// systemd compares a pidfd's cgroup id with): the check that the
// directory's inode number, which Holds compares, is that id.
func handleID(t *testing.T, dir string) uint64 {
	t.Helper()
	h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, dir, 0)
	if err != nil {
		t.Fatalf("name_to_handle_at %s: %v", dir, err)
	}
	if len(h.Bytes()) != 8 {
		t.Fatalf("name_to_handle_at %s: a %d-byte handle, want the 8-byte cgroup id", dir, len(h.Bytes()))
	}
	return binary.NativeEndian.Uint64(h.Bytes())
}

// The members a cgroup lists are the processes started into it, each
// confirmed through its pidfd; a process outside, given to the check, is
// refused, and so is one that moved out, and one already reaped.
func TestProcsAndHolds(t *testing.T) {
	p := requireParent(t)
	requireCgroupID(t)
	c := newCgroup(t, p)
	var inside []int
	for range 3 {
		cmd := helperCmd("sleep")
		startInto(t, c, cmd)
		inside = append(inside, cmd.Process.Pid)
	}
	outside := startOutside(t).Process.Pid
	slices.Sort(inside)

	got, err := c.Procs([]int{-7})
	if err != nil {
		t.Fatalf("Procs: %v", err)
	}
	if want := append([]int{-7}, inside...); !slices.Equal(got, want) {
		t.Fatalf("Procs appended %v, want %v", got, want)
	}
	for _, pid := range inside {
		fd := pidfdOf(t, pid)
		if ok, err := c.Holds(fd); !ok || err != nil {
			t.Errorf("Holds(pid %d, started into the cgroup) = %v, %v", pid, ok, err)
		}
		if id, err := PidfdCgroupID(fd); err != nil || id != handleID(t, c.Path()) {
			t.Errorf("the cgroup id of pid %d is %d (%v), name_to_handle_at says %d", pid, id, err, handleID(t, c.Path()))
		}
	}
	if ok, err := c.Holds(pidfdOf(t, outside)); ok || err != nil {
		t.Errorf("Holds(pid %d, outside the cgroup) = %v, %v; want false", outside, ok, err)
	}

	moved := inside[0]
	fd := pidfdOf(t, moved)
	if err := os.WriteFile(filepath.Join(p.Dir, "cgroup.procs"), []byte(strconv.Itoa(moved)), 0); err != nil {
		t.Fatalf("move pid %d out: %v", moved, err)
	}
	if ok, err := c.Holds(fd); ok || err != nil {
		t.Errorf("Holds(pid %d, moved out) = %v, %v; want false", moved, ok, err)
	}
	if got, err := c.Procs(nil); err != nil || slices.Contains(got, moved) {
		t.Errorf("Procs after the move = %v, %v; want %v without %d", got, err, inside, moved)
	}

	_ = unix.Kill(moved, unix.SIGKILL) // unreaped: ours
	var ws unix.WaitStatus
	if _, err := unix.Wait4(moved, &ws, 0, nil); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.Holds(fd); ok || err != nil {
		t.Errorf("Holds(pid %d, reaped) = %v, %v; want false", moved, ok, err)
	}
}

// A cgroup beneath the run's hides its processes from cgroup.procs:
// Procs says so rather than give a list that misses them.
func TestProcsRefusesNested(t *testing.T) {
	p := requireParent(t)
	c := newCgroup(t, p)
	if got, err := c.Procs(nil); err != nil || len(got) != 0 {
		t.Fatalf("Procs of an empty cgroup = %v, %v", got, err)
	}
	if err := os.Mkdir(filepath.Join(c.Path(), "nested"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Procs([]int{1}); !errors.Is(err, ErrNested) || !slices.Equal(got, []int{1}) {
		t.Fatalf("Procs with a cgroup beneath = %v, %v; want ErrNested and buf untouched", got, err)
	}
}

func TestParseProcs(t *testing.T) {
	got, err := parseProcs([]byte("12\n3\n4194304\n"), []int{5})
	if err != nil || !slices.Equal(got, []int{5, 12, 3, 4194304}) {
		t.Fatalf("parseProcs = %v, %v", got, err)
	}
	if got, err := parseProcs(nil, nil); err != nil || len(got) != 0 {
		t.Fatalf("parseProcs of nothing = %v, %v", got, err)
	}
	for _, bad := range []string{"12\n\n3\n", "1 2\n", "-3\n", "0\n", "x\n", "99999999999999999999\n"} {
		if got, err := parseProcs([]byte(bad), []int{5}); !errors.Is(err, errMalformed) || !slices.Equal(got, []int{5}) {
			t.Errorf("parseProcs(%q) = %v, %v; want errMalformed and buf untouched", bad, got, err)
		}
	}
}

// dirent is one struct linux_dirent64, padded to 8 bytes as the kernel does.
func dirent(name string, typ byte) []byte {
	reclen := (19 + len(name) + 1 + 7) &^ 7
	b := make([]byte, reclen)
	binary.NativeEndian.PutUint16(b[16:], uint16(reclen))
	b[18] = typ
	copy(b[19:], name)
	return b
}

func TestDirentsHoldDir(t *testing.T) {
	dots := slices.Concat(dirent(".", unix.DT_DIR), dirent("..", unix.DT_DIR))
	files := slices.Concat(dirent("cgroup.procs", unix.DT_REG), dirent("cgroup.kill", unix.DT_REG))
	for _, tc := range []struct {
		name string
		buf  []byte
		want bool
	}{
		{"dots and files", slices.Concat(dots, files), false},
		{"a child cgroup", slices.Concat(dots, files, dirent("x", unix.DT_DIR)), true},
		{"an entry of unknown type", slices.Concat(dots, dirent("y", unix.DT_UNKNOWN)), true},
		{"a record length past the buffer", slices.Concat(dots, dirent("z", unix.DT_REG)[:20]), true},
	} {
		if got := direntsHoldDir(tc.buf); got != tc.want {
			t.Errorf("%s: direntsHoldDir = %v, want %v", tc.name, got, tc.want)
		}
	}
	// The real listing of a fresh cgroup holds no directory.
	p := requireParent(t)
	c := newCgroup(t, p)
	if nested, err := c.hasChildren(); nested || err != nil {
		entries, _ := os.ReadDir(c.Path())
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("hasChildren of a fresh cgroup = %v, %v (entries %s)", nested, err, strings.Join(names, " "))
	}
}
