package proc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseMountLine(t *testing.T) {
	for _, c := range []struct {
		line       string
		root, mp   string
		fstype     string
		nsFile     bool
		wantErrSub string
	}{
		{line: "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue",
			root: "/mnt1", mp: "/mnt2", fstype: "ext3"},
		// What ip netns add, unshare --net=FILE, podman and systemd's
		// PrivateNetwork leave in the table.
		{line: "44 26 0:4 net:[4026532173] /run/netns/a rw shared:5 - nsfs nsfs rw",
			root: "net:[4026532173]", mp: "/run/netns/a", fstype: "nsfs", nsFile: true},
		{line: "45 26 0:4 mnt:[4026531841] /tmp/with\\040space rw - nsfs nsfs rw",
			root: "mnt:[4026531841]", mp: "/tmp/with space", fstype: "nsfs", nsFile: true},
		{line: "46 26 0:4 pid_for_children:[4026531836] /x rw - nsfs nsfs rw",
			root: "pid_for_children:[4026531836]", mp: "/x", fstype: "nsfs", nsFile: true},
		// Not the nsfs form: still refused.
		{line: "47 26 0:4 relative /x rw - ext4 r rw", wantErrSub: "neither an absolute path"},
		{line: "47 26 0:4 net:[] /x rw - nsfs nsfs rw", wantErrSub: "neither an absolute path"},
		{line: "47 26 0:4 net:[12a] /x rw - nsfs nsfs rw", wantErrSub: "neither an absolute path"},
		{line: "47 26 0:4 :[12] /x rw - nsfs nsfs rw", wantErrSub: "neither an absolute path"},
		{line: "47 26 0:4 Net:[12] /x rw - nsfs nsfs rw", wantErrSub: "neither an absolute path"},
		{line: "47 26 0:4 net:[12]x /x rw - nsfs nsfs rw", wantErrSub: "neither an absolute path"},
		// The mount point of a namespace file is a path like any other.
		{line: "47 26 0:4 net:[12] x rw - nsfs nsfs rw", wantErrSub: "mount point"},
		{line: "47 26 0:4 /\\000 /x rw - ext4 r rw", wantErrSub: "neither an absolute path"},
	} {
		e, err := ParseMountLine(c.line)
		if c.wantErrSub != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErrSub) {
				t.Errorf("%q: error %v, want one containing %q", c.line, err, c.wantErrSub)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.line, err)
			continue
		}
		if e.Root != c.root || e.MountPoint != c.mp || e.FSType != c.fstype || e.NamespaceFile() != c.nsFile {
			t.Errorf("%q: root %q mount point %q fstype %q namespace file %v; want %q %q %q %v",
				c.line, e.Root, e.MountPoint, e.FSType, e.NamespaceFile(), c.root, c.mp, c.fstype, c.nsFile)
		}
	}
}

// nsfsChildEnv makes the test binary, re-executed in a private mount
// namespace, bind its network namespace file onto the path it names and
// check its own mount table.
const nsfsChildEnv = "CORRAL_PROC_TEST_NSFS"

func TestMain(m *testing.M) {
	if target := os.Getenv(nsfsChildEnv); target != "" {
		if err := nsfsChild(target); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func nsfsChild(target string) error {
	if err := unix.Mount("/proc/self/ns/net", target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind /proc/self/ns/net onto %s: %w", target, err)
	}
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &st); err != nil {
		return err
	}
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	found := 0
	for n, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		e, err := ParseMountLine(line)
		if err != nil {
			return fmt.Errorf("mountinfo line %d %q: %w", n+1, line, err)
		}
		if e.MountPoint != target {
			if e.NamespaceFile() && e.FSType != "nsfs" {
				return fmt.Errorf("line %q: a namespace file that is not nsfs", line)
			}
			continue
		}
		found++
		if want := fmt.Sprintf("net:[%d]", st.Ino); e.Root != want || !e.NamespaceFile() || e.FSType != "nsfs" {
			return fmt.Errorf("line %q: root %q namespace file %v fstype %q; want %q, true, nsfs", line, e.Root, e.NamespaceFile(), e.FSType, want)
		}
	}
	if found != 1 {
		return fmt.Errorf("%d lines for %s in:\n%s", found, target, data)
	}
	return nil
}

// TestNamespaceFileMount parses the table of a process that has a real
// network namespace file bound onto a path, as ip netns add leaves it.
func TestNamespaceFileMount(t *testing.T) {
	target := filepath.Join(t.TempDir(), "netns")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), nsfsChildEnv+"="+target, "GORACE=atexit_sleep_ms=0")
	// The private mount namespace takes the bind mount away with the child.
	attr := &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	if os.Getuid() != 0 {
		attr.Cloneflags = syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
	}
	cmd.SysProcAttr = attr
	out, err := cmd.CombinedOutput()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			reason := fmt.Sprintf("cannot start a child in a private mount namespace: %v", err)
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s (CI=true: a missing feature is a failure)", reason)
			}
			t.Skip(reason)
		}
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// Flags carries every per-mount option a bind remount must repeat, and
// nothing of the superblock's.
func TestMountEntryFlags(t *testing.T) {
	e := MountEntry{Options: []string{"ro", "nosuid", "nodev", "noexec", "relatime"}, SuperOptions: []string{"rw", "hidepid=2"}}
	want := uintptr(unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC | unix.MS_RELATIME)
	if got := e.Flags(); got != want {
		t.Errorf("Flags %#x, want %#x", got, want)
	}
	if got := (MountEntry{Options: []string{"rw", "noatime", "nodiratime", "strictatime"}}).Flags(); got != unix.MS_NOATIME|unix.MS_NODIRATIME|unix.MS_STRICTATIME {
		t.Errorf("Flags %#x", got)
	}
}
