package landlock

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/internal/seccomp"
)

func init() {
	scenarios["writable"] = scenarioWritable
	scenarios["two-writable"] = scenarioTwoWritable
	scenarios["read-only"] = scenarioReadOnly
	scenarios["hide"] = scenarioHide
	scenarios["hide-in-writable"] = scenarioHideInWritable
	scenarios["hide-only"] = scenarioHideOnly
	scenarios["hide-late"] = scenarioHideLate
	scenarios["ipc"] = scenarioIPC
	scenarios["unavailable"] = scenarioUnavailable
	scenarios["policy-error"] = scenarioPolicyError
	scenarios["needs-nnp"] = scenarioNeedsNoNewPrivs
}

// tree makes files and directories beneath a fresh temporary directory:
// a name ending in "/" is a directory, "a -> b" a symlink, "x*" an
// executable script, anything else a file holding its own name.
func tree(t *testing.T, entries ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, e := range entries {
		if name, target, ok := strings.Cut(e, " -> "); ok {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		p := filepath.Join(root, strings.TrimSuffix(e, "*"))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case strings.HasSuffix(e, "/"):
			err = os.MkdirAll(p, 0o755)
		case strings.HasSuffix(e, "*"):
			err = os.WriteFile(p, []byte("#!/bin/sh\nexit 0\n"), 0o755)
		default:
			err = os.WriteFile(p, []byte(e), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// snapshot lists everything beneath dir with contents, to prove a
// directory the runner may not write is unchanged.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %v", p, d.Type())
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %q", data)
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// childABI is the ABI the scenario's Restrict ran with: some refusals
// exist only from a given ABI.
var childABI int

func restrict(c *child, p Policy) Report {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		c.fatalf("PR_SET_NO_NEW_PRIVS: %v", err)
	}
	rep, err := Restrict(p)
	if err != nil {
		c.fatalf("Restrict(%+v): %v", p, err)
	}
	childABI = rep.ABI
	return rep
}

func appendTo(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString("+")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func sh(script string) error { return exec.Command("/bin/sh", "-c", script).Run() }

// expectWritable does everything a writable directory allows.
func expectWritable(c *child, dir string) {
	c.ok("create in "+dir, os.WriteFile(filepath.Join(dir, "new"), []byte("new"), 0o644))
	c.ok("append in "+dir, appendTo(filepath.Join(dir, "new")))
	c.ok("truncate in "+dir, os.Truncate(filepath.Join(dir, "new"), 1))
	c.ok("rename in "+dir, os.Rename(filepath.Join(dir, "new"), filepath.Join(dir, "renamed")))
	c.ok("mkdir in "+dir, os.Mkdir(filepath.Join(dir, "d"), 0o755))
	c.ok("rename into a subdirectory of "+dir, os.Rename(filepath.Join(dir, "renamed"), filepath.Join(dir, "d", "moved")))
	c.ok("symlink in "+dir, os.Symlink("moved", filepath.Join(dir, "d", "link")))
	c.ok("mkfifo in "+dir, unix.Mkfifo(filepath.Join(dir, "d", "fifo"), 0o644))
	c.ok("remove in "+dir, os.RemoveAll(filepath.Join(dir, "d")))
	c.ok("a child process writes in "+dir, sh("echo x > "+filepath.Join(dir, "from-child")))
}

// expectReadOnly tries every write a read-only directory must refuse, on a
// directory that holds a file named "file".
func expectReadOnly(c *child, dir string) {
	f := filepath.Join(dir, "file")
	c.denied("create in "+dir, os.WriteFile(filepath.Join(dir, "new"), nil, 0o644))
	c.denied("append in "+dir, appendTo(f))
	if childABI >= 3 {
		c.denied("truncate(2) in "+dir, os.Truncate(f, 0))
		c.denied("open O_RDONLY|O_TRUNC in "+dir, openClose(f, os.O_RDONLY|os.O_TRUNC))
	}
	c.denied("remove in "+dir, os.Remove(f))
	c.denied("rename in "+dir, os.Rename(f, filepath.Join(dir, "renamed")))
	c.denied("mkdir in "+dir, os.Mkdir(filepath.Join(dir, "d"), 0o755))
	c.denied("symlink in "+dir, os.Symlink("file", filepath.Join(dir, "link")))
	c.denied("mkfifo in "+dir, unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	c.denied("hard link in "+dir, os.Link(f, filepath.Join(dir, "hard")))
	if err := sh("echo x > " + filepath.Join(dir, "from-child")); err == nil {
		c.errorf("a child process started after Restrict wrote in %s", dir)
	}
	// Reading stays allowed.
	if data, err := os.ReadFile(f); err != nil || !strings.HasSuffix(string(data), "file") {
		c.errorf("read %s: %q, %v", f, data, err)
	}
	if _, err := os.ReadDir(dir); err != nil {
		c.errorf("list %s: %v", dir, err)
	}
}

func openClose(path string, flag int) error {
	f, err := os.OpenFile(path, flag, 0)
	if err == nil {
		f.Close()
	}
	return err
}

// expectEverydayAccess: reading, listing, executing and the devices.
func expectEverydayAccess(c *child) {
	_, err := os.ReadFile("/proc/self/status")
	c.ok("read /proc/self/status", err)
	_, err = os.ReadDir("/")
	c.ok("list /", err)
	c.ok("exec /bin/true", exec.Command("/bin/true").Run())
	c.ok("write /dev/null with O_TRUNC (a shell's >/dev/null)", sh("echo x > /dev/null"))
	f, err := os.OpenFile("/dev/zero", os.O_RDWR, 0)
	if err != nil {
		c.errorf("open /dev/zero: %v", err)
	} else {
		_, err = f.Read(make([]byte, 8))
		c.ok("read /dev/zero", err)
		f.Close()
	}
	f, err = os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		c.errorf("open /dev/full: %v", err)
	} else {
		if _, err := f.Write([]byte("x")); !errors.Is(err, unix.ENOSPC) {
			c.errorf("write /dev/full: %v, want ENOSPC (the device's own answer)", err)
		}
		f.Close()
	}
	// A new pty through /dev/ptmx, driven with ioctls.
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		c.errorf("open /dev/ptmx: %v", err)
	} else {
		c.ok("unlockpt", unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0))
		n, err := unix.IoctlGetInt(m, unix.TIOCGPTN)
		c.ok("TIOCGPTN", err)
		s, err := unix.Open(fmt.Sprintf("/dev/pts/%d", n), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			c.errorf("open /dev/pts/%d: %v", n, err)
		} else {
			_, err = unix.IoctlGetTermios(s, unix.TCGETS)
			c.ok("TCGETS on a new pts", err)
			unix.Close(s)
		}
		unix.Close(m)
	}
	// The controlling terminal reopened by name (the child runs in a
	// session of its own with a pty it made before Restrict).
	if tty, err := unix.Open("/dev/tty", unix.O_RDWR|unix.O_CLOEXEC, 0); err != nil {
		c.errorf("open /dev/tty: %v", err)
	} else {
		_, err = unix.IoctlGetTermios(tty, unix.TCGETS)
		c.ok("TCGETS on a reopened /dev/tty", err)
		unix.Close(tty)
	}
}

// expectDeviceIoctlHandled: a device outside the exceptions opens (reading
// is allowed) but takes no ioctl, from ABI 5.
func expectDeviceIoctlHandled(c *child, rep Report) {
	if rep.ABI < 5 {
		return
	}
	fd, err := unix.Open("/dev/urandom", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		c.errorf("open /dev/urandom: %v", err)
		return
	}
	defer unix.Close(fd)
	_, err = unix.IoctlGetInt(fd, unix.RNDGETENTCNT)
	c.denied("ioctl RNDGETENTCNT on /dev/urandom", err)
}

// withTerminal gives the child a session and, through the scenario's own
// setup, a controlling terminal, so /dev/tty means something.
func withTerminal(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} }

func makeControllingTerminal(c *child) {
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		c.fatalf("open /dev/ptmx: %v", err)
	}
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		c.fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(m, unix.TIOCGPTN)
	if err != nil {
		c.fatalf("TIOCGPTN: %v", err)
	}
	s, err := unix.Open(fmt.Sprintf("/dev/pts/%d", n), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		c.fatalf("open pts: %v", err)
	}
	if err := unix.IoctlSetInt(s, unix.TIOCSCTTY, 0); err != nil {
		c.fatalf("TIOCSCTTY: %v", err)
	}
	// Both ends stay open for the scenario's lifetime.
}

func TestWritable(t *testing.T) {
	requireLandlock(t, 1)
	a := tree(t, "file", "sub/")
	b := tree(t, "file", "sub/", "sub/file")
	before := snapshot(t, b)
	runChild(t, "writable", map[string]string{"a": a, "b": b}, withTerminal)
	if after := snapshot(t, b); after != before {
		t.Errorf("the directory outside the writable path changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if _, err := os.Stat(filepath.Join(a, "from-child")); err != nil {
		t.Errorf("the child process's write in the writable path: %v", err)
	}
}

func scenarioWritable(c *child) {
	makeControllingTerminal(c)
	a, b := c.arg("a"), c.arg("b")
	rep := restrict(c, Policy{Writable: []string{a}})
	if rep.ABI >= 5 && len(rep.NotEnforced) > 0 {
		c.errorf("ABI %d left %q unenforced", rep.ABI, rep.NotEnforced)
	}
	expectWritable(c, a)
	expectReadOnly(c, b)
	expectReadOnly(c, filepath.Join(b, "sub"))
	c.denied("rename from the writable path out of it", os.Rename(filepath.Join(a, "file"), filepath.Join(b, "moved")), unix.EXDEV)
	c.denied("rename into the writable path", os.Rename(filepath.Join(b, "file"), filepath.Join(a, "moved")), unix.EXDEV)
	if _, err := os.Stat(filepath.Join(a, "file")); err != nil {
		c.errorf("the file a refused rename tried to move: %v", err)
	}
	expectEverydayAccess(c)
	expectDeviceIoctlHandled(c, rep)
	c.denied("create in /tmp", os.WriteFile(filepath.Join(os.TempDir(), "corral-landlock-"+strconv.Itoa(os.Getpid())), nil, 0o644))
}

func TestTwoWritable(t *testing.T) {
	requireLandlock(t, 1)
	a, b, c, d := tree(t, "file"), tree(t, "file"), tree(t, "file"), tree(t, "file")
	before := snapshot(t, b)
	runChild(t, "two-writable", map[string]string{"a": a, "b": b, "c": c, "d": d}, nil)
	if data, _ := os.ReadFile(filepath.Join(d, "file")); string(data) != "file+" {
		t.Errorf("the writable file holds %q, want %q", data, "file+")
	}
	if after := snapshot(t, b); after != before {
		t.Errorf("the directory outside both writable paths changed:\n%s", after)
	}
}

func scenarioTwoWritable(c *child) {
	a, b, cc, d := c.arg("a"), c.arg("b"), c.arg("c"), c.arg("d")
	// A writable file: written, but its directory stays read-only.
	restrict(c, Policy{Writable: []string{a, cc, a, filepath.Join(d, "file")}})
	c.ok("append to a writable file", appendTo(filepath.Join(d, "file")))
	c.denied("create beside a writable file", os.WriteFile(filepath.Join(d, "new"), nil, 0o644))
	c.denied("remove a writable file (its directory is not writable)", os.Remove(filepath.Join(d, "file")))
	expectWritable(c, a)
	expectWritable(c, cc)
	expectReadOnly(c, b)
	// Both writable: a move between them is allowed (REFER on both sides).
	c.ok("rename between the writable paths", os.Rename(filepath.Join(a, "file"), filepath.Join(cc, "from-a")))
}

func TestReadOnly(t *testing.T) {
	requireLandlock(t, 1)
	a := tree(t, "file", "sub/", "sub/file")
	before := snapshot(t, a)
	runChild(t, "read-only", map[string]string{"a": a}, withTerminal)
	if after := snapshot(t, a); after != before {
		t.Errorf("read-only changed %s:\n%s", a, after)
	}
}

func scenarioReadOnly(c *child) {
	makeControllingTerminal(c)
	a := c.arg("a")
	rep := restrict(c, Policy{ReadOnly: true})
	expectReadOnly(c, a)
	expectReadOnly(c, filepath.Join(a, "sub"))
	c.denied("create in the parent of "+a, os.WriteFile(filepath.Join(filepath.Dir(a), "new"), nil, 0o644))
	expectEverydayAccess(c)
	expectDeviceIoctlHandled(c, rep)
}

func TestHide(t *testing.T) {
	requireLandlock(t, 1)
	root := tree(t,
		"deep/x/secret/file", "deep/x/secret/run*", "deep/x/secret/sub/", "deep/x/secret/sub/file",
		"deep/x/visible/file", "deep/x/visible/to-secret -> ../secret", "deep/x/sibling-file",
		"deep/x/other-secret/file", "deep/link-to-other -> x/other-secret",
		"deep/y/secret-file", "deep/y/ok-file",
		"w/file")
	before := snapshot(t, filepath.Join(root, "deep"))
	runChild(t, "hide", map[string]string{"root": root}, nil)
	if after := snapshot(t, filepath.Join(root, "deep")); after != before {
		t.Errorf("hidden or read-only paths changed:\n%s", after)
	}
}

func expectHidden(c *child, dir string) {
	f := filepath.Join(dir, "file")
	_, err := os.ReadFile(f)
	c.denied("read "+f, err)
	_, err = os.ReadDir(dir)
	c.denied("list "+dir, err)
	c.denied("write "+f, appendTo(f))
	c.denied("create in "+dir, os.WriteFile(filepath.Join(dir, "new"), nil, 0o644))
	c.denied("remove "+f, os.Remove(f))
	if err := sh("cat " + f); err == nil {
		c.errorf("a child process read %s", f)
	}
}

func scenarioHide(c *child) {
	root := c.arg("root")
	x := filepath.Join(root, "deep", "x")
	secret, w := filepath.Join(x, "secret"), filepath.Join(root, "w")
	y := filepath.Join(root, "deep", "y")
	rep := restrict(c, Policy{Writable: []string{w}, Hide: []string{secret, filepath.Join(root, "deep", "link-to-other"), filepath.Join(y, "secret-file")}})

	// A hidden file: its directory is split, its siblings stay readable.
	_, err := os.ReadFile(filepath.Join(y, "secret-file"))
	c.denied("read a hidden file", err)
	_, err = os.ReadFile(filepath.Join(y, "ok-file"))
	c.ok("read the sibling of a hidden file", err)

	expectHidden(c, secret)
	expectHidden(c, filepath.Join(secret, "sub"))
	c.denied("exec a script beneath the hidden path", exec.Command(filepath.Join(secret, "run")).Run())
	// Through a symlink from a visible place: checked where it leads.
	_, err = os.ReadFile(filepath.Join(x, "visible", "to-secret", "file"))
	c.denied("read through a symlink into the hidden path", err)
	// Hidden by naming a symlink: its target is what is hidden.
	expectHidden(c, filepath.Join(x, "other-secret"))
	c.denied("rename out of the hidden path", os.Rename(filepath.Join(secret, "file"), filepath.Join(w, "stolen")), unix.EXDEV)

	// Siblings along the way stay readable (and read-only).
	if data, err := os.ReadFile(filepath.Join(x, "visible", "file")); err != nil || !strings.HasPrefix(string(data), "deep/x/visible/file") {
		c.errorf("read a sibling of the hidden path: %q, %v", data, err)
	}
	_, err = os.ReadDir(filepath.Join(x, "visible"))
	c.ok("list a sibling of the hidden path", err)
	_, err = os.ReadFile(filepath.Join(x, "sibling-file"))
	c.ok("read a file beside the hidden path", err)
	c.denied("write a file beside the hidden path", appendTo(filepath.Join(x, "sibling-file")))
	// The documented cost: ancestors have no rights of their own.
	_, err = os.ReadDir(x)
	c.denied("list the hidden path's parent", err)
	expectWritable(c, w)
	expectEverydayAccess2(c)

	for _, d := range []string{"/", root, x} {
		if !slices.Contains(rep.Split, d) {
			c.errorf("Report.Split %q lacks %s", rep.Split, d)
		}
	}
	if !slices.ContainsFunc(rep.NotEnforced, func(s string) bool { return strings.Contains(s, "Unix sockets") }) {
		c.errorf("Report.NotEnforced %q does not say that sockets beneath hidden paths stay reachable", rep.NotEnforced)
	}
}

// expectEverydayAccess2 is expectEverydayAccess without a terminal.
func expectEverydayAccess2(c *child) {
	_, err := os.ReadFile("/proc/self/status")
	c.ok("read /proc/self/status", err)
	c.ok("exec /bin/true", exec.Command("/bin/true").Run())
	c.ok("write /dev/null", sh("echo x > /dev/null"))
}

func TestHideInWritable(t *testing.T) {
	requireLandlock(t, 1)
	w := tree(t, "file", "sub/", "sub/file", "h/", "h/file", "h/sub/", "h/sub/file")
	runChild(t, "hide-in-writable", map[string]string{"w": w}, nil)
	if data, err := os.ReadFile(filepath.Join(w, "h", "file")); err != nil || string(data) != "h/file" {
		t.Errorf("the hidden file inside the writable path: %q, %v", data, err)
	}
}

func scenarioHideInWritable(c *child) {
	w := c.arg("w")
	h := filepath.Join(w, "h")
	restrict(c, Policy{Writable: []string{w}, Hide: []string{h}})
	expectHidden(c, h)
	expectHidden(c, filepath.Join(h, "sub"))
	expectWritable(c, filepath.Join(w, "sub"))
	c.ok("write an existing file beside the hidden path", appendTo(filepath.Join(w, "file")))
	// The documented cost: the writable path itself has no rights of its
	// own once a hidden path lies beneath it.
	c.denied("create directly in the writable path that holds a hidden one", os.WriteFile(filepath.Join(w, "new"), nil, 0o644))
}

func TestHideOnly(t *testing.T) {
	requireLandlock(t, 1)
	root := tree(t, "s/file", "b/file")
	runChild(t, "hide-only", map[string]string{"root": root}, nil)
}

func scenarioHideOnly(c *child) {
	root := c.arg("root")
	restrict(c, Policy{Hide: []string{filepath.Join(root, "s")}})
	expectHidden(c, filepath.Join(root, "s"))
	// Without writable paths or read-only, the rest stays writable.
	expectWritable(c, filepath.Join(root, "b"))
	// Except directly in the directories the hidden path splits.
	c.denied("create beside the hidden path", os.WriteFile(filepath.Join(root, "new"), nil, 0o644))
	expectEverydayAccess2(c)
}

// Entries made in a hidden path's parent after Restrict are unreachable
// (the documented cost of splitting); those that were there stay readable.
func TestHideLateEntries(t *testing.T) {
	requireLandlock(t, 1)
	root := tree(t, "x/s/file", "x/early")
	cmd := childCmd(t, "hide-late", map[string]string{"root": root})
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err == nil && line == "restricted\n" {
		if err := os.WriteFile(filepath.Join(root, "x", "late"), []byte("late"), 0o644); err != nil {
			t.Error(err)
		}
	}
	stdin.Close()
	childResult(t, "hide-late", cmd.Wait(), line+stderr.String())
}

func scenarioHideLate(c *child) {
	x := filepath.Join(c.arg("root"), "x")
	restrict(c, Policy{Hide: []string{filepath.Join(x, "s")}})
	fmt.Println("restricted")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err == nil {
		c.fatalf("stdin: expected EOF")
	}
	_, err := os.ReadFile(filepath.Join(x, "early"))
	c.ok("read an entry that was there at Restrict", err)
	if _, err := os.Stat(filepath.Join(x, "late")); err != nil {
		c.fatalf("the late entry is not there: %v", err)
	}
	_, err = os.ReadFile(filepath.Join(x, "late"))
	c.denied("read an entry made after Restrict", err)
}

func TestIsolateIPC(t *testing.T) {
	requireLandlock(t, 6)
	decoy := exec.Command("/bin/sleep", "1000")
	if err := decoy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		decoy.Process.Kill()
		decoy.Wait()
	})
	var rnd [8]byte
	rand.Read(rnd[:])
	name := "@corral-landlock-test-" + hex.EncodeToString(rnd[:])
	ln, err := net.Listen("unix", name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	runChild(t, "ipc", map[string]string{"decoy": strconv.Itoa(decoy.Process.Pid), "socket": name}, nil)
	if err := decoy.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the decoy outside the domain did not survive: %v", err)
	}
}

func connectAbstract(name string) error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Connect(fd, &unix.SockaddrUnix{Name: name})
}

func scenarioIPC(c *child) {
	decoy, err := strconv.Atoi(c.arg("decoy"))
	if err != nil {
		c.fatalf("decoy pid: %v", err)
	}
	name := c.arg("socket")
	// The controls: without the scopes all of this works.
	c.ok("kill(decoy, 0) before Restrict", unix.Kill(decoy, 0))
	if err := connectAbstract(name); err != nil {
		c.fatalf("connect %s before Restrict: %v", name, err)
	}

	rep := restrict(c, Policy{IsolateIPC: true})
	if len(rep.Scopes) != 2 || len(rep.FS) != 0 {
		c.errorf("Report for IsolateIPC alone: %+v", rep)
	}
	if err := unix.Kill(decoy, 0); !errors.Is(err, unix.EPERM) {
		c.errorf("kill(decoy, 0): %v, want EPERM", err)
	}
	if err := unix.Kill(decoy, unix.SIGTERM); !errors.Is(err, unix.EPERM) {
		c.errorf("kill(decoy, SIGTERM): %v, want EPERM", err)
	}
	if err := unix.Kill(os.Getppid(), 0); !errors.Is(err, unix.EPERM) {
		c.errorf("kill(parent, 0): %v, want EPERM", err)
	}
	if err := connectAbstract(name); !errors.Is(err, unix.EPERM) {
		c.errorf("connect to an abstract socket made outside: %v, want EPERM", err)
	}
	// Inside the domain everything still works.
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		c.errorf("socketpair: %v", err)
	} else {
		_, err := unix.Write(pair[0], []byte("x"))
		c.ok("write a socketpair", err)
		buf := make([]byte, 1)
		_, err = unix.Read(pair[1], buf)
		c.ok("read a socketpair", err)
	}
	inside := name + "-inside"
	lfd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err == nil {
		err = unix.Bind(lfd, &unix.SockaddrUnix{Name: inside})
	}
	if err == nil {
		err = unix.Listen(lfd, 1)
	}
	c.ok("listen on an abstract socket inside", err)
	c.ok("connect to an abstract socket made inside", connectAbstract(inside))
	own := exec.Command("/bin/sleep", "1000")
	if err := own.Start(); err != nil {
		c.fatalf("start a child: %v", err)
	}
	c.ok("signal a child started inside", own.Process.Signal(unix.SIGTERM))
	if err := own.Wait(); err == nil || !strings.Contains(err.Error(), "terminated") {
		c.errorf("the child inside: %v, want killed by SIGTERM", err)
	}
	// The file system is not part of IsolateIPC.
	c.ok("create in /tmp", os.WriteFile(filepath.Join(os.TempDir(), "corral-landlock-ipc-"+strconv.Itoa(os.Getpid())), nil, 0o644))
	os.Remove(filepath.Join(os.TempDir(), "corral-landlock-ipc-"+strconv.Itoa(os.Getpid())))
}

// Fail closed: where the Landlock system calls fail (here a seccomp filter
// makes them, as a container's profile or an old kernel would), Restrict
// is an error naming Landlock and restricts nothing.
func TestUnavailable(t *testing.T) {
	for _, errno := range []string{"ENOSYS", "EOPNOTSUPP"} {
		t.Run(errno, func(t *testing.T) {
			runChild(t, "unavailable", map[string]string{"errno": errno, "dir": tree(t, "file")}, nil)
		})
	}
}

func scenarioUnavailable(c *child) {
	errno := map[string]unix.Errno{"ENOSYS": unix.ENOSYS, "EOPNOTSUPP": unix.EOPNOTSUPP}[c.arg("errno")]
	var rules []seccomp.Rule
	for _, nr := range []uintptr{unix.SYS_LANDLOCK_CREATE_RULESET, unix.SYS_LANDLOCK_ADD_RULE, unix.SYS_LANDLOCK_RESTRICT_SELF} {
		rules = append(rules, seccomp.Rule{Syscall: nr, Errno: errno})
	}
	prog, err := seccomp.Build(rules)
	if err != nil {
		c.fatalf("seccomp.Build: %v", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		c.fatalf("PR_SET_NO_NEW_PRIVS: %v", err)
	}
	if err := seccomp.InstallOnThread(prog); err != nil {
		c.fatalf("seccomp: %v", err)
	}
	_, err = ABI()
	var ue *UnavailableError
	if !errors.As(err, &ue) || ue.Errno != errno || !errors.Is(err, errno) {
		c.errorf("ABI: %v, want an *UnavailableError for %v", err, errno)
	}
	if err != nil && !strings.Contains(err.Error(), "Landlock") {
		c.errorf("the error does not name Landlock: %v", err)
	}
	if errno == unix.EOPNOTSUPP && !strings.Contains(err.Error(), "lsm=") {
		c.errorf("the disabled error does not name the fix: %v", err)
	}
	if _, err := Describe(); !errors.As(err, &ue) {
		c.errorf("Describe: %v, want an *UnavailableError", err)
	}
	dir := c.arg("dir")
	if _, err := Restrict(Policy{Writable: []string{dir}}); !errors.As(err, &ue) {
		c.errorf("Restrict: %v, want an *UnavailableError", err)
	}
	// Nothing was restricted.
	c.ok("write after a failed Restrict", os.WriteFile(filepath.Join(c.arg("dir"), "..", "outside"), nil, 0o644))
	// A policy that restricts nothing needs no Landlock.
	if _, err := Restrict(Policy{}); err != nil {
		c.errorf("Restrict of an empty policy without Landlock: %v", err)
	}
}

func TestRestrictPolicyError(t *testing.T) {
	requireLandlock(t, 1)
	runChild(t, "policy-error", map[string]string{"dir": tree(t, "file")}, nil)
}

func scenarioPolicyError(c *child) {
	dir := c.arg("dir")
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		c.fatalf("PR_SET_NO_NEW_PRIVS: %v", err)
	}
	var pe *PolicyError
	for _, p := range []Policy{
		{Writable: []string{dir, filepath.Join(dir, "missing")}},
		{Writable: []string{dir}, Hide: []string{filepath.Join(dir, "missing")}},
		{Writable: []string{dir}, ReadOnly: true},
	} {
		if _, err := Restrict(p); !errors.As(err, &pe) {
			c.errorf("Restrict(%+v): %v, want a *PolicyError", p, err)
		}
	}
	c.ok("write after a refused policy", os.WriteFile(filepath.Join(dir, "..", "outside"), nil, 0o644))
}

func TestRestrictNeedsNoNewPrivs(t *testing.T) {
	requireLandlock(t, 1)
	runChild(t, "needs-nnp", map[string]string{"dir": tree(t, "file")}, nil)
}

func scenarioNeedsNoNewPrivs(c *child) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		c.fatalf("capget: %v", err)
	}
	data[unix.CAP_SYS_ADMIN/32].Effective &^= 1 << (unix.CAP_SYS_ADMIN % 32)
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		c.fatalf("capset: %v", err)
	}
	if v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); err != nil || v != 0 {
		c.fatalf("no_new_privs is already %d (%v)", v, err)
	}
	dir := c.arg("dir")
	_, err := Restrict(Policy{Writable: []string{dir}})
	if !errors.Is(err, unix.EPERM) || !strings.Contains(err.Error(), "no_new_privs") {
		c.errorf("Restrict without no_new_privs or CAP_SYS_ADMIN: %v, want EPERM naming no_new_privs", err)
	}
	c.ok("write after the refused Restrict", os.WriteFile(filepath.Join(dir, "..", "outside"), nil, 0o644))
	rep := restrict(c, Policy{Writable: []string{dir}})
	if rep.Rules == 0 {
		c.errorf("no rules added")
	}
	c.denied("write outside after Restrict", os.WriteFile(filepath.Join(dir, "..", "outside2"), nil, 0o644))
}
