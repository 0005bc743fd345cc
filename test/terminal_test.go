package test

// Terminal mode (docs/terminal.md), driven through a real pseudo-terminal:
// the test holds the master side, types into it and reads the screen back;
// corral, or an interactive shell that runs corral as a job, starts in a new
// session with the slave side as its controlling terminal.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pty is a pseudo-terminal pair and everything the master side has read.
type pty struct {
	t      *testing.T
	master *os.File
	slave  *os.File
	screen lockedBuffer
	seen   int // screen offset up to which expect has matched
}

// openPTY opens a pseudo-terminal of 24x80 and starts reading its master
// side. Cleanup closes both sides.
func openPTY(t *testing.T) *pty {
	t.Helper()
	// O_NOCTTY: the test process must not make it its own terminal.
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		missingFeature(t, fmt.Sprintf("no pseudo-terminals here: %v", err))
	}
	var n uint32
	var ioctlErr error
	// Control, not Fd: Fd would put the master in blocking mode, and Close
	// could no longer end the reader below.
	if err := withFD(master, func(fd int) {
		if ioctlErr = unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); ioctlErr == nil {
			n, ioctlErr = unix.IoctlGetUint32(fd, unix.TIOCGPTN)
		}
	}); err != nil || ioctlErr != nil {
		master.Close()
		t.Fatalf("unlock and name the pty: %v %v", err, ioctlErr)
	}
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		t.Fatalf("open the pty's slave side: %v", err)
	}
	p := &pty{t: t, master: master, slave: slave}
	if err := unix.IoctlSetWinsize(int(slave.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 80}); err != nil {
		t.Fatalf("set the pty's size: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			p.screen.Write(buf[:n])
			if err != nil {
				return // EIO once no slave is open, or closed below
			}
		}
	}()
	t.Cleanup(func() {
		slave.Close()
		master.Close()
		<-done
	})
	return p
}

func withFD(f *os.File, fn func(fd int)) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Control(func(fd uintptr) { fn(int(fd)) })
}

// typ types s on the terminal's keyboard.
func (p *pty) typ(s string) {
	p.t.Helper()
	if _, err := p.master.WriteString(s); err != nil {
		p.t.Fatalf("typing %q: %v", s, err)
	}
}

// expect waits (bounded) until s appears on the screen after what the last
// expect matched, and returns the screen from there up to and including s.
func (p *pty) expect(s string) string {
	p.t.Helper()
	deadline := time.Now().Add(readyTimeout)
	for {
		screen := p.screen.String()
		if i := strings.Index(screen[p.seen:], s); i >= 0 {
			out := screen[p.seen : p.seen+i+len(s)]
			p.seen += i + len(s)
			return out
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%q did not appear on the terminal within %v; after the last match it shows:\n%q", s, readyTimeout, screen[p.seen:])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// retype types key until want appears on the screen, for a program that
// may discard keys typed at the wrong moment; it gives up after a bound.
func (p *pty) retype(key, want string) {
	p.t.Helper()
	for i := 0; i < 30; i++ {
		p.typ(key)
		deadline := time.Now().Add(500 * time.Millisecond)
		for time.Now().Before(deadline) {
			if strings.Contains(p.screen.String()[p.seen:], want) {
				p.expect(want)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	p.t.Fatalf("%q did not appear on the terminal after typing %q 30 times; after the last match it shows:\n%q", want, key, p.screen.String()[p.seen:])
}

// expectRegexp is expect for a pattern; it returns the submatches.
func (p *pty) expectRegexp(re *regexp.Regexp) []string {
	p.t.Helper()
	deadline := time.Now().Add(readyTimeout)
	for {
		screen := p.screen.String()
		if loc := re.FindStringSubmatchIndex(screen[p.seen:]); loc != nil {
			m := re.FindStringSubmatch(screen[p.seen:])
			p.seen += loc[1]
			return m
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%v did not appear on the terminal within %v; after the last match it shows:\n%q", re, readyTimeout, screen[p.seen:])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// foreground is the terminal's foreground process group (TIOCGPGRP on the
// master side answers for the slave side).
func (p *pty) foreground() int {
	p.t.Helper()
	var pgrp int
	var ioctlErr error
	if err := withFD(p.master, func(fd int) { pgrp, ioctlErr = unix.IoctlGetInt(fd, unix.TIOCGPGRP) }); err != nil || ioctlErr != nil {
		p.t.Fatalf("foreground group of the pty: %v %v", err, ioctlErr)
	}
	return pgrp
}

// awaitForeground waits (bounded) until the foreground group's leader runs
// a program whose command line starts with argv0, and returns its pid.
func (p *pty) awaitForeground(argv0 string) int {
	p.t.Helper()
	deadline := time.Now().Add(readyTimeout)
	for {
		pgrp := p.foreground()
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pgrp) + "/cmdline")
		if bytes.HasPrefix(cmdline, []byte(argv0+"\x00")) {
			return pgrp
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("the terminal's foreground never became %s (it is group %d: %q); the screen:\n%q",
				argv0, pgrp, cmdline, p.screen.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// unread is how many bytes wait in the slave side's input queue.
func (p *pty) unread() int {
	p.t.Helper()
	n, err := unix.IoctlGetInt(int(p.slave.Fd()), unix.TIOCINQ)
	if err != nil {
		p.t.Fatalf("TIOCINQ: %v", err)
	}
	return n
}

// stty is `stty -a` of the terminal, run from outside its session.
func (p *pty) stty() string {
	p.t.Helper()
	cmd := exec.Command("stty", "-a")
	cmd.Stdin = p.slave
	out, err := cmd.CombinedOutput()
	if err != nil {
		p.t.Fatalf("stty -a: %v: %s", err, out)
	}
	return string(out)
}

// ttyEnviron is the environment of everything started on the pty: the
// marker in every process's environment (shells and the programs they run
// carry it too, so the /proc scan finds them), a terminal type, a prompt
// the test can wait for, and no history file.
func (e *env) ttyEnviron() []string {
	return append(baseEnviron(), "HELPER_MARKER="+e.marker, "TERM=xterm", "PS1="+prompt,
		"HISTFILE="+e.file("history"), "LESSHISTFILE=-")
}

const prompt = "ptyprompt> "

// onPTY returns argv as the mode's user, unstarted, in a new session whose
// controlling terminal is p, with p on stdin, stdout and stderr.
func (e *env) onPTY(p *pty, argv ...string) *exec.Cmd {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = e.ttyEnviron()
	cmd.Dir = e.dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = p.slave, p.slave, p.slave
	cmd.WaitDelay = 2 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setsid:     true,
		Setctty:    true,
		Ctty:       0,
		Pdeathsig:  syscall.SIGKILL,
		Credential: e.m.credential(),
	}
	return cmd
}

// corralArgv is corral's command line running runner in the mode.
func (e *env) corralArgv(runner ...string) []string {
	return append([]string{corralBin}, e.args(opts("", "5"), runner)...)
}

// A terminal's Ctrl-C reaches the runner once and does not cancel the run:
// the runner counts one SIGINT per Ctrl-C, keeps reading its terminal, and
// its exit status (the count) is corral's.
func TestTerminalCtrlCReachesRunnerOnce(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		p := openPTY(t)
		c := e.startCmd(e.onPTY(p, e.corralArgv(e.helper("sigint")...)...))
		p.expect("sigint ready")
		for i := 1; i <= 3; i++ {
			p.typ("\x03")
			p.expect(fmt.Sprintf("sigint %d\r\n", i))
		}
		p.typ("exit\r")
		p.expect("sigint total 3")
		wantCode(t, c.wait(corralTimeout), 3)
		e.assertGone()
	})
}

// less keeps running through a Ctrl-C, quits on q with status 0, and
// leaves the terminal's modes as it found them.
func TestTerminalLessSurvivesCtrlC(t *testing.T) {
	less, err := exec.LookPath("less")
	if err != nil {
		missingFeature(t, "less is not installed")
	}
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		var rows strings.Builder
		for i := 1; i <= 300; i++ {
			fmt.Fprintf(&rows, "row %d\n", i)
		}
		file := e.file("rows")
		if err := os.WriteFile(file, []byte(rows.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		p := openPTY(t)
		before := p.stty()
		c := e.startCmd(e.onPTY(p, e.corralArgv(less, file)...))
		p.expect("row 5")
		p.typ("\x03")
		// G goes to the end: only a live less draws it. less discards
		// what was typed while it handled the interrupt, so type again
		// until it shows.
		p.retype("G", "row 300")
		p.typ("q")
		wantCode(t, c.wait(corralTimeout), 0)
		if after := p.stty(); after != before {
			t.Errorf("stty -a differs after less under corral:\nbefore:\n%s\nafter:\n%s", before, after)
		}
		e.assertGone()
	})
}

// An interactive bash under corral has job control: no warning, and
// background jobs, fg, Ctrl-Z and bg work; `exit 7` is corral's 7.
func TestTerminalInteractiveBash(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		p := openPTY(t)
		c := e.startCmd(e.onPTY(p, e.corralArgv("/bin/bash", "--norc", "-i")...))
		p.expect(prompt)
		p.typ("sleep 100 &\r")
		p.expectRegexp(regexp.MustCompile(`\[1\] \d+`))
		p.expect(prompt)
		p.typ("jobs\r")
		p.expectRegexp(regexp.MustCompile(`\[1\]\+ +Running +sleep 100 &`))
		p.expect(prompt)
		p.typ("fg\r")
		sleep := p.awaitForeground("sleep")
		p.typ("\x1a")
		p.expectRegexp(regexp.MustCompile(`\[1\]\+ +Stopped +sleep 100`))
		p.expect(prompt)
		waitStopped(t, sleep, true)
		p.typ("bg\r")
		p.expect("[1]+ sleep 100 &")
		p.expect(prompt)
		waitStopped(t, sleep, false)
		p.typ("kill %1; wait %1; echo waited=$?\r")
		p.expect("waited=143")
		p.typ("exit 7\r")
		wantCode(t, c.wait(corralTimeout), 7)
		for _, warning := range []string{"no job control", "cannot set terminal process group"} {
			if strings.Contains(p.screen.String(), warning) {
				t.Errorf("bash under corral warned %q:\n%q", warning, p.screen.String())
			}
		}
		e.assertGone()
	})
}

// Ctrl-Z on corral run as a job of an interactive shell stops the job
// (corral and its runner); fg resumes both with the runner in the
// foreground, and Ctrl-C then ends it with 130.
func TestTerminalCtrlZStopsCorralJob(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		p := openPTY(t)
		shell := e.startCmd(e.onPTY(p, "/bin/bash", "--norc", "-i"))
		p.expect(prompt)
		p.typ(strings.Join(e.corralArgv("/bin/sleep", "100"), " ") + "\r")
		sleep := p.awaitForeground("/bin/sleep")
		corral := corralOf(t, e)
		p.typ("\x1a")
		p.expectRegexp(regexp.MustCompile(`\[1\]\+ +Stopped +` + regexp.QuoteMeta(corralBin)))
		p.expect(prompt)
		waitStopped(t, sleep, true)
		waitStopped(t, corral, true)
		p.typ("fg\r")
		if got := p.awaitForeground("/bin/sleep"); got != sleep {
			t.Fatalf("after fg the foreground is group %d, want the runner's %d", got, sleep)
		}
		waitStopped(t, corral, false)
		waitStopped(t, sleep, false)
		p.typ("\x03")
		p.expect(prompt)
		p.typ("echo status=$?\r")
		p.expect("status=130")
		p.typ("exit\r")
		wantCode(t, shell.wait(corralTimeout), 0)
		e.assertGone()
	})
}

// corralOf finds the pid of the one corral (the host side in pidns) that
// carries the test's marker.
func corralOf(t *testing.T, e *env) int {
	t.Helper()
	deadline := time.Now().Add(readyTimeout)
	for {
		for _, pr := range markedProcs(e.marker) {
			if strings.HasPrefix(pr.cmdline, corralBin+" ") {
				return pr.pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no corral among %v", markedProcs(e.marker))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A caller without job control (corral stays in its process group) has the
// terminal's foreground again once an interactive bash under corral exits,
// also in pidns mode where the caller's group is invisible to the runner:
// it can read from the terminal.
func TestTerminalCallerKeepsForeground(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		p := openPTY(t)
		argv := append(e.helper("tty-caller", "--"), e.corralArgv("/bin/bash", "--norc", "-i")...)
		c := e.startCmd(e.onPTY(p, argv...))
		p.expect(prompt)
		p.typ("exit 5\r")
		got := p.expectRegexp(regexp.MustCompile(`caller: status=(\d+) pgrp=(\d+) tpgid=(\d+)`))
		if got[1] != "5" {
			t.Errorf("corral's status under the caller: want 5, got %s", got[1])
		}
		if got[2] != got[3] {
			t.Errorf("after corral the terminal's foreground is group %s, want the caller's %s", got[3], got[2])
		}
		p.typ("hello\r")
		p.expect("caller: got hello")
		wantCode(t, c.wait(corralTimeout), 0)
		e.assertGone()
	})
}

// kill -INT from outside still cancels the run while corral holds a
// terminal: the runner gets it, and corral exits 130 with
// termination_signal 2.
func TestTerminalKillINTCancels(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		p := openPTY(t)
		state, ready := e.file("state.json"), e.file("ready")
		argv := append([]string{corralBin}, e.args(opts(state, "5"), e.helper("sleep", "-ready", ready))...)
		c := e.startCmd(e.onPTY(p, argv...))
		c.waitFile(ready)
		c.signal(syscall.SIGINT)
		wantCode(t, c.wait(corralTimeout), 130)
		wantState(t, readState(t, state), map[string]any{"phase": "exited", "termination_signal": 2, "runner_exit_code": 130})
		e.assertGone()
	})
}

// The runner cannot push input into the caller's terminal with TIOCSTI,
// with the terminal on stdin or, with stdin a pipe, reachable as /dev/tty;
// whether corral starts it directly or through the exec stage (--rlimit),
// and with --allow-new-privs where corral can install a filter without
// no_new_privs (root, or the init of a user namespace): the ioctl fails and
// nothing reaches the terminal (no echo on the master side, nothing queued
// for the next reader).
//
// This machine has dev.tty.legacy_tiocsti=1, so the kernel itself allows
// TIOCSTI on one's controlling terminal: only corral's seccomp filter
// (internal/seccomp's DenyTerminalInjection) refuses it.
func TestTerminalInjectionRefused(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		for _, tc := range []struct {
			name      string
			viaDevTTY bool
			opts      []string
		}{
			{name: "stdin"},
			{name: "dev-tty", viaDevTTY: true},
			{name: "exec-stage", opts: []string{"--rlimit", "RLIMIT_CORE=0"}},
			{name: "allow-new-privs", viaDevTTY: true, opts: []string{"--allow-new-privs"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e := newEnv(t, m)
				refused, detail := tryInjection(t, e, tc.viaDevTTY, nil, tc.opts)
				if !refused {
					t.Errorf("TIOCSTI was not refused: %s", detail)
				}
				e.assertGone()
			})
		}
	})
}

// The documented exception: a caller without CAP_SYS_ADMIN that passes
// --allow-new-privs in subreaper mode (no user namespace of its own) can
// have no seccomp filter installed, so its runner keeps TIOCSTI. Such a
// caller must have an empty bounding set already (corral refuses to run it
// otherwise: the set cannot shrink without CAP_SETPCAP), which setpriv
// gives it here. Without --allow-new-privs the same caller's runner is
// refused.
func TestTerminalInjectionAllowNewPrivsException(t *testing.T) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		missingFeature(t, "setpriv (util-linux) is not installed")
	}
	m := mode{name: "subreaper", flag: "subreaper"}
	wrap := []string{setpriv, "--bounding-set=-all", fmt.Sprintf("--reuid=%d", nobodyUID),
		fmt.Sprintf("--regid=%d", nobodyGID), "--clear-groups"}
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow-new-privs=%v", allow), func(t *testing.T) {
			e := newEnv(t, m)
			var o []string
			if allow {
				o = []string{"--allow-new-privs"}
			}
			refused, detail := tryInjection(t, e, true, wrap, o)
			if refused == allow {
				t.Errorf("allow-new-privs=%v: want refused=%v, got %s", allow, !allow, detail)
			}
			e.assertGone()
		})
	}
}

// tryInjection runs a runner that tries TIOCSTI on the pty (on stdin, or
// with stdin a pipe through /dev/tty) and reports whether it was refused
// with nothing reaching the terminal; detail describes what happened. wrap,
// when set, is the command line corral runs under.
func tryInjection(t *testing.T, e *env, viaDevTTY bool, wrap, extraOpts []string) (refused bool, detail string) {
	t.Helper()
	p := openPTY(t)
	text := "echo INJECTED-" + randomHex() + "\n"
	args := []string{"tiocsti"}
	if viaDevTTY {
		args = append(args, "-tty")
	}
	argv := append(append(append([]string{}, wrap...), corralBin), e.args(opts("", "5", extraOpts...), e.helper(append(args, text)...))...)
	cmd := e.onPTY(p, argv...)
	if viaDevTTY {
		// stdin a pipe; the pty stays the controlling terminal (the
		// child's fd 1).
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		defer w.Close()
		cmd.Stdin = r
		cmd.SysProcAttr.Ctty = 1
	}
	res := e.startCmd(cmd).wait(corralTimeout)
	got := p.expectRegexp(regexp.MustCompile(`tiocsti: (refused: \w+|injected)`))
	echoed := strings.Contains(p.screen.String(), "INJECTED-")
	queued := p.unread()
	refused = res.code == 0 && strings.HasPrefix(got[1], "refused") && !echoed && queued == 0
	detail = fmt.Sprintf("%s, corral exited %d, echoed %v, %d bytes queued; the terminal shows:\n%q",
		got[1], res.code, echoed, queued, p.screen.String())
	return refused, detail
}

// corral probe says whether the runner gets the TIOCSTI filter, and names
// the --allow-new-privs exception where it applies (a caller without
// CAP_SYS_ADMIN).
func TestProbeSaysTerminalInjectionFilter(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		_, available, detail := parseProbe(t, e.run([]string{"probe", "--json"}))
		if !available["seccomp"] || !strings.Contains(detail["seccomp"], "denied TIOCSTI and TIOCLINUX") {
			t.Errorf("probe's seccomp answer: available %v, %q", available["seccomp"], detail["seccomp"])
		}
		if exception := strings.Contains(detail["seccomp"], "--allow-new-privs"); exception != m.rootless {
			t.Errorf("uid %d: probe names the --allow-new-privs exception: %v, want %v (%q)", m.uid(), exception, m.rootless, detail["seccomp"])
		}
	})
}

// Closing the terminal ends the run and leaves nothing behind: the hangup
// reaches the runner's group (its SIGHUP kills the runner), corral tears
// the tree down, a detached helper in a session of its own included, and
// exits as the runner did (bubblewrap's PID 1 outlives its terminal).
func TestTerminalHangupEndsRun(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		p := openPTY(t)
		ready := e.file("ready")
		runner := e.helper("spawn", "-setsid", "-ready", ready, "-then", "sleep", "--", "sleep", "-ignore-term")
		c := e.startCmd(e.onPTY(p, e.corralArgv(runner...)...))
		c.waitFile(ready)
		p.awaitForeground(helperBin) // terminal mode: the runner holds the foreground
		p.master.Close()             // the hangup
		wantCode(t, c.wait(corralTimeout), 128+int(syscall.SIGHUP))
		e.assertGone()
	})
}
