package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The checker reaches the runner's descriptors through a pidfd, asked
// for a thread's own (PIDFD_THREAD, Linux 6.9) first. A container profile
// written before that flag, which admits pidfd_open with the flags it
// knew only, refuses it with EPERM: the checker must then take the
// process's pidfd, as on a kernel without the flag, and every checked
// call must work as it would without the profile. It did not: every
// checked connect failed (curl: "Couldn't connect"). In every mode: three
// direct connects from one thread (the checker keeps a thread's pidfd
// from one call to the next), and tar -x into --writable (opens relative
// to a directory descriptor, and a chmod and a chown on each file's).
func TestCheckedCallsWithoutThreadPidfd(t *testing.T) {
	requireClients(t)
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		srv := startHTTP(t, "127.0.0.1", "")
		src := filepath.Join(e.dir, "src")
		if err := os.MkdirAll(filepath.Join(src, "tree"), 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			e.writeFile(filepath.Join(src, "tree", fmt.Sprintf("f%d", i)), fmt.Sprintf("file %d\n", i), 0o640)
		}
		archive := filepath.Join(e.dir, "tree.tar")
		if out, err := exec.Command("tar", "-cf", archive, "-C", src, "tree").CombinedOutput(); err != nil {
			t.Fatalf("tar: %v: %s", err, out)
		}
		if err := os.Chmod(archive, 0o644); err != nil {
			t.Fatal(err)
		}
		w := filepath.Join(e.dir, "w")
		if err := os.Mkdir(w, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(w, m.uid(), m.uid()); err != nil {
			t.Fatal(err)
		}
		var body strings.Builder
		for i := range 3 {
			fmt.Fprintf(&body, "curl -sS --max-time 10 --noproxy '*' -o \"$R\"/%[1]d.body -w '%%{http_code}' %[2]s >\"$R\"/%[1]d.code 2>\"$R\"/%[1]d.err\n",
				i, shq(fmt.Sprintf("http://127.0.0.1:%d/direct%d", srv.port, i)))
		}
		fmt.Fprintf(&body, "tar -xf %s -C %s 2>\"$R\"/tar.err; echo $? >\"$R\"/tar.exit\n", shq(archive), shq(w))
		runner, results := e.script(body.String())
		args := append(e.helper("deny-pidfd-thread", "--", corralBin),
			e.args(netOpts("--writable", w, "--writable", results, "--allow-net", fmt.Sprintf("localhost:%d", srv.port)), runner)...)
		cmd := e.command(args[1:], e.markerEnv()) // the helper, then corral
		cmd.Path, cmd.Args[0] = helperBin, helperBin
		res := e.startCmd(cmd).wait(corralTimeout)
		wantNetCode(t, res, 0)
		for i := range 3 {
			code, _ := os.ReadFile(filepath.Join(results, fmt.Sprintf("%d.code", i)))
			got, _ := os.ReadFile(filepath.Join(results, fmt.Sprintf("%d.body", i)))
			if string(code) != "200" || !strings.Contains(string(got), fmt.Sprintf("path=/direct%d", i)) {
				t.Errorf("connect %d under a profile without PIDFD_THREAD: code %q body %q err %q; want the server's page", i, code, got,
					readResult(t, results, fmt.Sprintf("%d.err", i)))
			}
		}
		if exit := readResult(t, results, "tar.exit"); exit != "0" {
			t.Errorf("tar -x into --writable under a profile without PIDFD_THREAD: exit %s: %s", exit, readResult(t, results, "tar.err"))
		}
		for i := range 5 {
			st, err := os.Stat(filepath.Join(w, "tree", fmt.Sprintf("f%d", i)))
			if err != nil || st.Mode().Perm() != 0o640 {
				t.Errorf("tree/f%d after tar -x: %v, %v; want mode 0640", i, st, err)
			}
		}
		e.assertGone()
	})
}

// corral's checker resolves the paths of the calls it decides on with
// openat2(2) (Linux 5.6). Under a container profile that refuses it,
// every such call failed with ENOSYS, unnamed: a write under --writable
// in subreaper mode ("cannot create: Function not implemented"), a Unix
// socket's connect under a network policy. The run now stops before the
// runner starts (125), in one line naming openat2. A namespace mode's
// --writable alone, whose checker only names what the mounts refuse,
// runs as before.
func TestCheckedCallsWithoutOpenat2(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		w := filepath.Join(e.dir, "w")
		if err := os.Mkdir(w, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(w, m.uid(), m.uid()); err != nil {
			t.Fatal(err)
		}
		run := func(opts ...string) result {
			args := append(e.helper("deny-openat2", "--", corralBin),
				e.args(netOpts(opts...), e.helper("exit", "-code", "3"))...)
			cmd := e.command(args[1:]) // the helper, then corral
			cmd.Path, cmd.Args[0] = helperBin, helperBin
			return e.startCmd(cmd).wait(corralTimeout)
		}
		refused := func(res result, what string) {
			t.Helper()
			wantCode(t, res, 125)
			if lines := strings.Split(strings.TrimSpace(res.stderr), "\n"); len(lines) != 1 ||
				!strings.Contains(res.stderr, "openat2") || strings.Contains(res.stderr, "goroutine") {
				t.Errorf("%s: want one line naming openat2, got %q", what, res.stderr)
			}
		}
		refused(run("--net", "none", "--read-only"), "--net none")
		if m.pidns() {
			wantCode(t, run("--writable", w), 3)
		} else {
			refused(run("--writable", w), "--writable")
		}
		e.assertGone()
	})
}

// Docker's default seccomp profile refuses unshare(2) to a container
// without CAP_SYS_ADMIN, so the checker's threads cannot take a umask of
// their own (unshare(CLONE_FS)); in subreaper mode the checker creates
// the runner's files under --writable, and they got corral's umask, not
// the runner's: a tool that sets umask 077 before writing a key had it
// written 0644. The runner's umask now holds there too.
func TestCheckedCreatesKeepUmaskWithoutUnshare(t *testing.T) {
	e := newEnv(t, modes[0])
	w := filepath.Join(e.dir, "w")
	if err := os.Mkdir(w, 0o755); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("umask 077; echo key > %[1]s/key; mkdir %[1]s/dir; mkfifo %[1]s/fifo", shq(w))
	args := append(e.helper("deny-unshare", "--", corralBin),
		e.args([]string{"--writable", w}, []string{"/bin/sh", "-c", script})...)
	cmd := e.command(args[1:]) // the helper, then corral
	cmd.Path, cmd.Args[0] = helperBin, helperBin
	res := e.startCmd(cmd).wait(corralTimeout)
	wantCode(t, res, 0)
	for name, want := range map[string]os.FileMode{"key": 0o600, "dir": 0o700, "fifo": 0o600} {
		st, err := os.Stat(filepath.Join(w, name))
		if err != nil {
			t.Errorf("%s made under umask 077 through the checker: %v", name, err)
		} else if got := st.Mode().Perm(); got != want {
			t.Errorf("%s made under umask 077 through the checker: mode %v; want %v", name, got, want)
		}
	}
	e.assertGone()
}
