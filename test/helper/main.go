// Command helper is the program the corral integration tests run as runners
// and as the runners' descendants.
//
// Every process it starts is a re-execution of /proc/self/exe that keeps
// "-marker MARKER" in its command line, and an external program started by
// the exec command gets HELPER_MARKER=MARKER in its environment, so a test can
// find, from the host's /proc, every process it caused to exist and prove that
// none of them survives. Run it without arguments for the usage text.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const usageText = `usage: helper [-marker MARKER] COMMAND [FLAGS] [-- CHILD-COMMAND [FLAGS]...]

Every process helper starts re-executes /proc/self/exe with "-marker MARKER"
kept in its command line; "exec" puts HELPER_MARKER=MARKER in the environment
of the external program instead.

Commands:
  exit   [-code N]               exit with status N (default 0)
  sleep  [-children N] [-orphan-children] [-forkloop]
                                 sleep forever; -children starts N children
                                 ("sleep -ignore-term", orphaned to this process
                                 by a double fork with -orphan-children) before
                                 it is ready; -forkloop keeps starting such
                                 children forever (at most 16 alive at a time)
  cat    [-code N]               copy stdin to stdout unbuffered, then exit N
  usr1   [-code N] [-report F]   wait for SIGUSR1, print "got SIGUSR1" on stdout,
                                 write it to F, exit N
  env                            print the environment, one variable a line
  report                         print pid, ppid, Uid, Gid, CapInh, CapPrm, CapEff,
                                 CapBnd, CapAmb, NoNewPrivs, pid1_cmdline and
                                 proc_pids (numeric entries of /proc) as KEY=VALUE
  spawn  [SPAWN FLAGS] -- CHILD  start CHILD (a helper command line without the
                                 marker), wait until it is ready, then act
  exec   [-delay D] PATH [ARG]   once ready, sleep D, then execve PATH ARG...
  pid1   -- PATH [ARG]           be PID 1 of fresh pid+mount namespaces: make
                                 mounts private, mount /proc, execve PATH ARG...
  nsprobe [-userns]              exit 0 if this process can create pid+mount
                                 (+user) namespaces and mount a fresh /proc there
  deny-subreaper -- PATH [ARG]  execve PATH ARG... under a seccomp filter that
                                 fails prctl(PR_SET_CHILD_SUBREAPER) with EINVAL
  fds                            print "fd=N dev=D ino=I" for every descriptor
                                 this process inherited (those without
                                 FD_CLOEXEC; the Go runtime's own have it)
  accept                         accept one connection on each of the
                                 LISTEN_FDS descriptors from 3 (systemd socket
                                 activation), write "x" to it, close it
  bytes                          print "arg HEX" for each of argv, "env HEX" for
                                 each environment entry, "exe HEX", "cwd HEX"
  sigmask -block SIG[,SIG...] -- PATH [ARG]
                                 block the signals, execve PATH ARG... with
                                 this environment
  sigint                         print "sigint N" at each SIGINT; at the stdin
                                 line "exit" print "sigint total N", exit N
  tiocsti [-tty] TEXT            push TEXT into stdin's (-tty: /dev/tty's)
                                 terminal input with TIOCSTI; exit 0 and print
                                 "tiocsti: refused: ERRNO" if refused, else 1
  tty-caller -- PATH [ARG]       run PATH as a plain child (no job control),
                                 print "caller: status=S pgrp=P tpgid=T", read
                                 a line from stdin, print "caller: got LINE"
  deny-namespaces -- PATH [ARG] execve PATH ARG... under a seccomp filter that
                                 refuses namespaces as Docker's default profile
                                 does without CAP_SYS_ADMIN: clone and unshare
                                 with a CLONE_NEW* flag and every setns fail
                                 with EPERM, clone3 with ENOSYS
  deny-pidfd-thread -- PATH [ARG]
                                 execve PATH ARG... under a seccomp filter that
                                 fails pidfd_open with EPERM when its flags
                                 hold PIDFD_THREAD (a profile older than it)
  deny-openat2 -- PATH [ARG]     execve PATH ARG... under a seccomp filter that
                                 fails openat2 with ENOSYS
  deny-unshare -- PATH [ARG]     execve PATH ARG... under a seccomp filter that
                                 fails unshare with EPERM (Docker's default
                                 profile without CAP_SYS_ADMIN)
  pids-full-at-clone -cgroup DIR -- PATH [ARG]
                                 execve PATH ARG...; when it clones a new PID
                                 namespace, move the cloning thread into the
                                 v1 pids cgroup DIR, full: that clone fails
                                 with the kernel's own EAGAIN
  catch  [-log F] [-keep SIGS] [-exit SIGS] [-- CHILD]
                                 append the name of each caught signal to F; keep
                                 running on those of -keep, exit 100+signal on the
                                 first of -exit; CHILD is started in a new session
  sigparent [-sig SIG]           send SIG to the parent first thing; exit 0 once
                                 it comes back, 3 if it does not within 10 s
  trace-parent                   try to take hold of the parent as a debugger
                                 would: print "tid=T seize=RESULT" for each of
                                 its threads (PTRACE_SEIZE, detached at once
                                 when it works), "mem=RESULT" (open
                                 /proc/PPID/mem for writing) and "vm=RESULT"
                                 (process_vm_readv of one byte); RESULT is OK
                                 or the errno's name

Flags every command accepts (applied in this order):
  -ignore-term         ignore SIGTERM
  -exit-on-term N      exit with N on SIGTERM
  -usr1-file F         on each SIGUSR1 append a line to F and keep running
  -subreaper           set PR_SET_CHILD_SUBREAPER on itself
  -stdout TEXT         print TEXT and a newline on stdout
  -stderr TEXT         print TEXT and a newline on stderr
  (children of sleep/spawn are started and awaited here)
  -ready F             create F once set up
  -ready-fd N          write one byte to fd N once set up (used between helpers)
  -stop                SIGSTOP itself once ready
  -kill-parent SIG     send SIG (TERM, INT, HUP, USR1...) to the parent once ready

Spawn flags:
  -count N             start N children (default 1)
  -setsid              children start a new session
  -setpgid             children start a new process group
  -orphan              double fork: an intermediate process starts the child
                       and exits, so the child is orphaned at once
  -await-stopped       wait until every (direct) child is stopped
  -killpg SIG          once ready, send SIG to each child's process group
  -wait                then wait for the (direct) children to exit
  -check               with -wait: exit 1 unless every child exited 0
  -pause D             then sleep D (a Go duration, e.g. 250ms)
  -then ACTION         finally exit (default), sleep (forever), usr1, or
                       report (print what "report" prints, then exit)
  -code N, -report F   as for exit and usr1

Examples:
  a runner that leaves a detached helper ignoring SIGTERM and exits 3:
    helper -marker corral-test-1 spawn -setsid -code 3 -- sleep -ignore-term
  a runner that creates 4 orphans (double fork; each exits at once):
    helper -marker corral-test-1 spawn -orphan -count 4 -- exit
  a runner that ignores SIGTERM, leaves a helper in a new session, then
  sends SIGTERM to its parent (corral) and sleeps:
    helper -marker corral-test-1 spawn -ignore-term -setsid -kill-parent TERM \
      -then sleep -- sleep -ignore-term
`

// markerEnv names the variable that carries the marker into external programs.
const markerEnv = "HELPER_MARKER"

// readyTimeout bounds every wait of a helper for another helper.
const readyTimeout = 20 * time.Second

var marker string

func main() {
	global := flag.NewFlagSet("helper", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	global.StringVar(&marker, "marker", "", "marker kept in the command line of every process")
	err := global.Parse(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) || (err == nil && global.NArg() > 0 && global.Arg(0) == "help") {
		fmt.Print(usageText)
		return
	}
	if err != nil || global.NArg() == 0 {
		fmt.Fprint(os.Stderr, usageText)
		os.Exit(2)
	}
	args := global.Args()
	cmd, ok := commands[args[0]]
	if !ok {
		fail(fmt.Errorf("unknown command %q", args[0]))
	}
	c := &common{name: args[0], exitOnTerm: -1}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	fs.Usage = func() { fmt.Fprint(os.Stderr, usageText) }
	c.register(fs)
	body := cmd(fs)
	if err := fs.Parse(args[1:]); err != nil {
		os.Exit(2)
	}
	c.args = fs.Args()
	if err := body(c); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "helper: %v\n", err)
	os.Exit(1)
}

// A command registers its own flags and returns its body.
type command func(fs *flag.FlagSet) func(c *common) error

var commands map[string]command

func init() {
	commands = map[string]command{
		"exit":               cmdExit,
		"sleep":              cmdSleep,
		"cat":                cmdCat,
		"usr1":               cmdUsr1,
		"env":                cmdEnv,
		"report":             cmdReport,
		"spawn":              cmdSpawn,
		"exec":               cmdExec,
		"pid1":               cmdPID1,
		"nsprobe":            cmdNSProbe,
		"deny-subreaper":     cmdDenySubreaper,
		"deny-getrandom":     cmdDenyGetrandom,
		"deny-setsigmask":    cmdDenySetsigmask,
		"deny-pidfd-thread":  cmdDenyPidfdThread,
		"deny-openat2":       cmdDenyOpenat2,
		"deny-unshare":       cmdDenyUnshare,
		"fds":                cmdFDs,
		"accept":             cmdAccept,
		"bytes":              cmdBytes,
		"sigmask":            cmdSigmask,
		"sigint":             cmdSigint,    // terminal.go
		"tiocsti":            cmdTiocsti,   // terminal.go
		"tty-caller":         cmdTTYCaller, // terminal.go
		"deny-namespaces":    cmdDenyNamespaces,
		"pids-full-at-clone": cmdPidsFullAtClone,
		"landlock-free":      cmdLandlockFree, // launchcost.go
		// Sandbox policy (policy.go).
		"try":           cmdTry,
		"meta":          cmdMeta, // mounts.go
		"deny-landlock": cmdDenyLandlock,
		"pidns-reaper":  cmdPidnsReaper,
		"orphan-exec":   cmdOrphanExec,
		"thread-parent": cmdThreadParent,
		"sendflood":     cmdSendFlood, "checker-try": cmdCheckerTry, // checker.go
		"enforcer": cmdEnforcer,                         // enforcer.go
		"fswrite":  cmdFSWrite, "swaprace": cmdSwapRace, // protect.go
		"agentapi": cmdAgentAPI,                                                 // agentapi.go
		"udp-get":  cmdUDPGet, "udp-try": cmdUDPTry, "udp-toctou": cmdUDPToctou, // udp.go
		"egressns": cmdEgressNS, // egressns.go
	}
}

// common holds the flags every command accepts.
type common struct {
	name       string
	args       []string
	ignoreTerm bool
	exitOnTerm int
	usr1File   string
	subreaper  bool
	stdout     string
	stderr     string
	ready      string
	readyFD    int
	stop       bool
	killParent string

	usr1 chan os.Signal // set up by setup when the command waits for SIGUSR1
}

func (c *common) register(fs *flag.FlagSet) {
	fs.BoolVar(&c.ignoreTerm, "ignore-term", false, "ignore SIGTERM")
	fs.IntVar(&c.exitOnTerm, "exit-on-term", -1, "exit with N on SIGTERM")
	fs.StringVar(&c.usr1File, "usr1-file", "", "append a line to this file on SIGUSR1")
	fs.BoolVar(&c.subreaper, "subreaper", false, "set PR_SET_CHILD_SUBREAPER")
	fs.StringVar(&c.stdout, "stdout", "", "line to print on stdout")
	fs.StringVar(&c.stderr, "stderr", "", "line to print on stderr")
	fs.StringVar(&c.ready, "ready", "", "file to create once set up")
	fs.IntVar(&c.readyFD, "ready-fd", -1, "fd to write one byte to once set up")
	fs.BoolVar(&c.stop, "stop", false, "SIGSTOP itself once ready")
	fs.StringVar(&c.killParent, "kill-parent", "", "signal to send to the parent once ready")
}

// setup applies the flags that must be in force before anything else.
func (c *common) setup(waitUsr1 bool) error {
	if c.ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	if c.exitOnTerm >= 0 {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM)
		go func() {
			<-ch
			os.Exit(c.exitOnTerm)
		}()
	}
	if waitUsr1 {
		c.usr1 = make(chan os.Signal, 1)
		signal.Notify(c.usr1, syscall.SIGUSR1)
	} else if c.usr1File != "" {
		ch := make(chan os.Signal, 8)
		signal.Notify(ch, syscall.SIGUSR1)
		go func() {
			for range ch {
				appendLine(c.usr1File, "got SIGUSR1")
			}
		}()
	}
	if c.subreaper {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("PR_SET_CHILD_SUBREAPER: %w", err)
		}
	}
	if c.stdout != "" {
		fmt.Fprintln(os.Stdout, c.stdout)
	}
	if c.stderr != "" {
		fmt.Fprintln(os.Stderr, c.stderr)
	}
	return nil
}

// becomeReady announces readiness, then stops and signals the parent if asked.
func (c *common) becomeReady() error {
	if c.ready != "" {
		if err := os.WriteFile(c.ready, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
			return err
		}
	}
	if c.readyFD >= 0 {
		f := os.NewFile(uintptr(c.readyFD), "ready")
		_, err := f.Write([]byte{'r'})
		f.Close()
		if err != nil {
			return fmt.Errorf("ready fd: %w", err)
		}
	}
	if c.stop {
		if err := unix.Kill(os.Getpid(), unix.SIGSTOP); err != nil {
			return err
		}
	}
	if c.killParent != "" {
		sig, err := parseSignal(c.killParent)
		if err != nil {
			return err
		}
		if err := unix.Kill(os.Getppid(), sig); err != nil {
			return fmt.Errorf("kill parent %d: %w", os.Getppid(), err)
		}
	}
	return nil
}

func parseSignal(name string) (unix.Signal, error) {
	if n, err := strconv.Atoi(name); err == nil {
		return unix.Signal(n), nil
	}
	name = strings.ToUpper(name)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	sig := unix.SignalNum(name)
	if sig == 0 {
		return 0, fmt.Errorf("unknown signal %q", name)
	}
	return sig, nil
}

func appendLine(path, line string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	fmt.Fprintln(f, line)
	f.Close()
}

func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}

func cmdExit(fs *flag.FlagSet) func(*common) error {
	code := fs.Int("code", 0, "exit status")
	return func(c *common) error {
		if err := c.setup(false); err != nil {
			return err
		}
		if err := c.becomeReady(); err != nil {
			return err
		}
		os.Exit(*code)
		return nil
	}
}

func cmdSleep(fs *flag.FlagSet) func(*common) error {
	children := fs.Int("children", 0, "children to start before becoming ready")
	orphan := fs.Bool("orphan-children", false, "orphan the children to this process")
	forkloop := fs.Bool("forkloop", false, "keep starting children forever")
	return func(c *common) error {
		if err := c.setup(false); err != nil {
			return err
		}
		if *children > 0 {
			o := spawnOptions{count: *children, orphan: *orphan}
			if _, err := o.start([]string{"sleep", "-ignore-term"}); err != nil {
				return err
			}
		}
		if err := c.becomeReady(); err != nil {
			return err
		}
		if *forkloop {
			forkLoop()
		}
		sleepForever()
		return nil
	}
}

// forkLoop starts "sleep -ignore-term" children forever, killing the oldest
// when 16 are alive, so there is always a fork in flight.
func forkLoop() {
	var live []*os.Process
	for {
		p, err := startHelper([]string{"sleep", "-ignore-term"}, nil, nil)
		if err == nil {
			live = append(live, p)
		}
		if len(live) > 16 {
			live[0].Kill()
			live[0].Wait()
			live = live[1:]
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func cmdCat(fs *flag.FlagSet) func(*common) error {
	code := fs.Int("code", 0, "exit status")
	return func(c *common) error {
		if err := c.setup(false); err != nil {
			return err
		}
		if err := c.becomeReady(); err != nil {
			return err
		}
		buf := make([]byte, 32<<10)
		for {
			n, err := os.Stdin.Read(buf)
			if n > 0 {
				if _, werr := os.Stdout.Write(buf[:n]); werr != nil {
					return werr
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
		}
		os.Exit(*code)
		return nil
	}
}

func cmdUsr1(fs *flag.FlagSet) func(*common) error {
	code := fs.Int("code", 0, "exit status")
	report := fs.String("report", "", "file to write once SIGUSR1 arrived")
	return func(c *common) error {
		if err := c.setup(true); err != nil {
			return err
		}
		if err := c.becomeReady(); err != nil {
			return err
		}
		awaitUsr1(c, *report, *code)
		return nil
	}
}

func awaitUsr1(c *common, report string, code int) {
	<-c.usr1
	fmt.Println("got SIGUSR1")
	if report != "" {
		appendLine(report, "got SIGUSR1")
	}
	os.Exit(code)
}

func cmdEnv(fs *flag.FlagSet) func(*common) error {
	return func(c *common) error {
		if err := c.setup(false); err != nil {
			return err
		}
		for _, kv := range os.Environ() {
			fmt.Println(kv)
		}
		return c.becomeReady()
	}
}

func cmdReport(fs *flag.FlagSet) func(*common) error {
	return func(c *common) error {
		if err := c.setup(false); err != nil {
			return err
		}
		if err := writeReport(); err != nil {
			return err
		}
		return c.becomeReady()
	}
}

// writeReport prints what the runner sees of itself and of /proc.
func writeReport() error {
	var out strings.Builder
	fmt.Fprintf(&out, "pid=%d\nppid=%d\n", os.Getpid(), os.Getppid())
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err
	}
	want := map[string]bool{"Uid": true, "Gid": true, "CapInh": true, "CapPrm": true,
		"CapEff": true, "CapBnd": true, "CapAmb": true, "NoNewPrivs": true}
	sc := bufio.NewScanner(strings.NewReader(string(status)))
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if ok && want[key] {
			fmt.Fprintf(&out, "%s=%s\n", key, strings.Join(strings.Fields(value), " "))
		}
	}
	cmdline, err := os.ReadFile("/proc/1/cmdline")
	if err != nil {
		cmdline = []byte("error: " + err.Error())
	}
	fmt.Fprintf(&out, "pid1_cmdline=%s\n", strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " ")))
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	pids := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			pids++
		}
	}
	fmt.Fprintf(&out, "proc_pids=%d\n", pids)
	_, err = os.Stdout.WriteString(out.String())
	return err
}

// spawnOptions says how children are started.
type spawnOptions struct {
	count   int
	setsid  bool
	setpgid bool
	orphan  bool
}

// start starts count children running the helper command line child and
// waits until each is ready. With orphan, the returned list is empty: the
// intermediate processes have exited and been waited for.
func (o spawnOptions) start(child []string) ([]*os.Process, error) {
	if len(child) == 0 {
		return nil, errors.New("no child command")
	}
	if _, ok := commands[child[0]]; !ok {
		return nil, fmt.Errorf("unknown child command %q", child[0])
	}
	var procs []*os.Process
	for i := 0; i < max(o.count, 1); i++ {
		if o.orphan {
			mid := []string{"spawn", "-then", "exit"}
			if o.setsid {
				mid = append(mid, "-setsid")
			}
			if o.setpgid {
				mid = append(mid, "-setpgid")
			}
			mid = append(append(mid, "--"), child...)
			p, err := startReady(mid, nil)
			if err != nil {
				return nil, err
			}
			st, err := p.Wait()
			if err != nil {
				return nil, err
			}
			if !st.Success() {
				return nil, fmt.Errorf("intermediate process: %v", st)
			}
			continue
		}
		attr := &syscall.SysProcAttr{Setsid: o.setsid, Setpgid: o.setpgid && !o.setsid}
		p, err := startReady(child, attr)
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
	}
	return procs, nil
}

// startReady starts a helper command line with a readiness pipe as fd 3 and
// waits (bounded) for its byte.
func startReady(child []string, attr *syscall.SysProcAttr) (*os.Process, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	args := append([]string{child[0], "-ready-fd", "3"}, child[1:]...)
	p, err := startHelper(args, attr, w)
	w.Close()
	if err != nil {
		return nil, err
	}
	r.SetReadDeadline(time.Now().Add(readyTimeout))
	var b [1]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return p, fmt.Errorf("child %v (pid %d) never became ready: %w", child, p.Pid, err)
	}
	return p, nil
}

// startHelper re-executes this program with the marker and args; extra, when
// not nil, becomes fd 3 of the child.
func startHelper(args []string, attr *syscall.SysProcAttr, extra *os.File) (*os.Process, error) {
	argv := append([]string{"helper", "-marker", marker}, args...)
	files := []*os.File{os.Stdin, os.Stdout, os.Stderr}
	if extra != nil {
		files = append(files, extra)
	}
	return os.StartProcess("/proc/self/exe", argv, &os.ProcAttr{Files: files, Sys: attr})
}

func cmdSpawn(fs *flag.FlagSet) func(*common) error {
	var o spawnOptions
	fs.IntVar(&o.count, "count", 1, "children to start")
	fs.BoolVar(&o.setsid, "setsid", false, "children start a new session")
	fs.BoolVar(&o.setpgid, "setpgid", false, "children start a new process group")
	fs.BoolVar(&o.orphan, "orphan", false, "double fork")
	awaitStopped := fs.Bool("await-stopped", false, "wait until every child is stopped")
	killpg := fs.String("killpg", "", "signal to send to each child's process group")
	wait := fs.Bool("wait", false, "wait for the children to exit")
	check := fs.Bool("check", false, "with -wait: fail unless every child exited 0")
	pause := fs.Duration("pause", 0, "sleep this long before the final action")
	then := fs.String("then", "exit", "final action: exit, sleep, usr1 or report")
	code := fs.Int("code", 0, "exit status")
	report := fs.String("report", "", "file to write once SIGUSR1 arrived (-then usr1)")
	return func(c *common) error {
		switch *then {
		case "exit", "sleep", "usr1", "report":
		default:
			return fmt.Errorf("unknown -then %q", *then)
		}
		if err := c.setup(*then == "usr1"); err != nil {
			return err
		}
		procs, err := o.start(c.args)
		if err != nil {
			return err
		}
		if *awaitStopped {
			for _, p := range procs {
				if err := awaitState(p.Pid, 'T'); err != nil {
					return err
				}
			}
		}
		if err := c.becomeReady(); err != nil {
			return err
		}
		if *killpg != "" {
			sig, err := parseSignal(*killpg)
			if err != nil {
				return err
			}
			for _, p := range procs {
				if err := unix.Kill(-p.Pid, sig); err != nil {
					return fmt.Errorf("killpg %d: %w", p.Pid, err)
				}
			}
		}
		if *wait {
			for _, p := range procs {
				st, err := p.Wait()
				if err != nil {
					return err
				}
				if *check && !st.Success() {
					return fmt.Errorf("child %d: %v", p.Pid, st)
				}
			}
		}
		time.Sleep(*pause)
		switch *then {
		case "sleep":
			sleepForever()
		case "usr1":
			awaitUsr1(c, *report, *code)
		case "report":
			if err := writeReport(); err != nil {
				return err
			}
		}
		os.Exit(*code)
		return nil
	}
}

// awaitState waits (bounded) until /proc/PID/stat shows the given state.
func awaitState(pid int, state byte) error {
	deadline := time.Now().Add(readyTimeout)
	for time.Now().Before(deadline) {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return err
		}
		if i := strings.LastIndexByte(string(data), ')'); i > 0 && i+2 < len(data) && data[i+2] == state {
			return nil
		}
		time.Sleep(2 * time.Millisecond)
	}
	return fmt.Errorf("pid %d never reached state %c", pid, state)
}

func cmdExec(fs *flag.FlagSet) func(*common) error {
	delay := fs.Duration("delay", 0, "sleep this long before execve")
	return func(c *common) error {
		if len(c.args) == 0 {
			return errors.New("exec: no program")
		}
		if err := c.setup(false); err != nil {
			return err
		}
		if err := c.becomeReady(); err != nil {
			return err
		}
		time.Sleep(*delay)
		argv := append([]string{filepath.Base(c.args[0])}, c.args[1:]...)
		env := append(os.Environ(), markerEnv+"="+marker)
		return unix.Exec(c.args[0], argv, env)
	}
}

// mountProc gives this process (in a fresh mount namespace) private mounts
// and a /proc for its pid namespace.
func mountProc() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount proc: %w", err)
	}
	return nil
}

func cmdPID1(fs *flag.FlagSet) func(*common) error {
	return func(c *common) error {
		if len(c.args) == 0 {
			return errors.New("pid1: no program")
		}
		if os.Getpid() != 1 {
			return fmt.Errorf("pid1: running as pid %d, not 1", os.Getpid())
		}
		if err := mountProc(); err != nil {
			return err
		}
		return unix.Exec(c.args[0], c.args, os.Environ())
	}
}

func cmdNSProbe(fs *flag.FlagSet) func(*common) error {
	userns := fs.Bool("userns", false, "create a user namespace too")
	inner := fs.Bool("inner", false, "internal: the process inside the namespaces")
	return func(c *common) error {
		if *inner {
			return mountProc()
		}
		cmd := exec.Command("/proc/self/exe", "-marker", marker, "nsprobe", "-inner")
		attr := &syscall.SysProcAttr{
			Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS,
			Pdeathsig:  syscall.SIGKILL,
		}
		if *userns {
			attr.Cloneflags |= syscall.CLONE_NEWUSER
			attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
			attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
			attr.GidMappingsEnableSetgroups = false
		}
		cmd.SysProcAttr = attr
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("namespaces unavailable: %v: %s", err, strings.TrimSpace(string(out)))
		}
		return nil
	}
}

// The deny-* commands exec a program under a seccomp filter that fails
// one system call (with its first argument, when given) with an errno and
// allows everything else: the one way to make a step of corral's fail for
// real.
var (
	// prctl(PR_SET_CHILD_SUBREAPER) fails with EINVAL: corral's subreaper
	// setup.
	cmdDenySubreaper = denyCall("deny-subreaper", unix.SYS_PRCTL, unix.PR_SET_CHILD_SUBREAPER, unix.EINVAL)
	// getrandom(2) fails with ENOSYS, as container profiles older than
	// the call did: the proxy's credentials.
	cmdDenyGetrandom = denyCall("deny-getrandom", unix.SYS_GETRANDOM, anyArg, unix.ENOSYS)
	// ptrace(PTRACE_SETSIGMASK) fails with EPERM: the pidns init cannot
	// give its held runner the caller's mask, and must start it again
	// without the hold.
	cmdDenySetsigmask = denyCall("deny-setsigmask", unix.SYS_PTRACE, unix.PTRACE_SETSIGMASK, unix.EPERM)
)

// anyArg is denyCall's arg0 for a call refused whatever its arguments.
const anyArg = -1

func denyCall(name string, nr uint32, arg0 int64, errno unix.Errno) func(*flag.FlagSet) func(*common) error {
	return func(fs *flag.FlagSet) func(*common) error {
		return func(c *common) error {
			if len(c.args) == 0 {
				return errors.New(name + ": no program")
			}
			arch, err := seccompArch()
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			// struct seccomp_data: nr at 0, arch at 4, args[0] (low word)
			// at 16. Jump offsets count from the next instruction.
			deny := unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(errno)}
			allow := unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ALLOW}
			filter := []unix.SockFilter{
				{Code: ld, K: 4},
				{Code: jeq, K: arch, Jt: 0, Jf: 2}, // another arch: allow
				{Code: ld, K: 0},
				{Code: jeq, K: nr, Jt: 1, Jf: 0}, // the call: deny (or check arg0)
				allow,
				deny,
			}
			if arg0 != anyArg {
				filter = []unix.SockFilter{
					{Code: ld, K: 4},
					{Code: jeq, K: arch, Jt: 0, Jf: 4},
					{Code: ld, K: 0},
					{Code: jeq, K: nr, Jt: 0, Jf: 2},
					{Code: ld, K: 16},
					{Code: jeq, K: uint32(arg0), Jt: 1, Jf: 0},
					allow,
					deny,
				}
			}
			return execFiltered(filter, c.args)
		}
	}
}

// cmdDenyNamespaces execs a program under the part of moby's default
// seccomp profile that a container without CAP_SYS_ADMIN meets when it
// tries to make namespaces: clone and unshare with any CLONE_NEW* flag
// and setns fail with EPERM, and clone3 fails with ENOSYS (its flags sit
// behind a pointer a filter cannot read, so the profile makes libc fall
// back to clone). Everything else is allowed.
func cmdDenyNamespaces(fs *flag.FlagSet) func(*common) error {
	return func(c *common) error {
		if len(c.args) == 0 {
			return errors.New("deny-namespaces: no program")
		}
		arch, err := seccompArch()
		if err != nil {
			return fmt.Errorf("deny-namespaces: %w", err)
		}
		// CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET (moby's
		// mask 0x7E020000), and CLONE_NEWTIME, which unshare takes.
		const nsFlags = 0x7E020000 | unix.CLONE_NEWTIME
		// struct seccomp_data: nr at 0, arch at 4, args[0] (low word) at 16.
		// Jump offsets count from the next instruction.
		filter := []unix.SockFilter{
			/* 0 */ {Code: ld, K: 4},
			/* 1 */ {Code: jeq, K: arch, Jt: 0, Jf: 5}, // another arch: allow (7)
			/* 2 */ {Code: ld, K: 0},
			/* 3 */ {Code: jeq, K: unix.SYS_CLONE, Jt: 4}, // flags (8)
			/* 4 */ {Code: jeq, K: unix.SYS_UNSHARE, Jt: 3}, // flags (8)
			/* 5 */ {Code: jeq, K: unix.SYS_SETNS, Jt: 4}, // EPERM (10)
			/* 6 */ {Code: jeq, K: unix.SYS_CLONE3, Jt: 4}, // ENOSYS (11)
			/* 7 */ {Code: ret, K: unix.SECCOMP_RET_ALLOW},
			/* 8 */ {Code: ld, K: 16},
			/* 9 */ {Code: jset, K: nsFlags, Jt: 0, Jf: 2}, // EPERM (10) or allow (12)
			/* 10 */ {Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
			/* 11 */ {Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
			/* 12 */ {Code: ret, K: unix.SECCOMP_RET_ALLOW},
		}
		return execFiltered(filter, c.args)
	}
}

// cmdPidsFullAtClone makes the clone of a new PID namespace by a program
// meet a full pids cgroup, for real. A seccomp filter hands that clone to
// this process (SECCOMP_RET_USER_NOTIF), which moves the calling thread
// alone into the v1 pids cgroup DIR (cgroup v1 places threads one by one),
// sets pids.max there to what is in use, and lets the kernel carry the
// clone out (SECCOMP_USER_NOTIF_FLAG_CONTINUE): it fails with the kernel's
// own EAGAIN. The program's other threads stay where they were, so its Go
// runtime can still start threads: a Go program that cannot dies (a
// fatal error, not an error value), which is not what this is for.
func cmdPidsFullAtClone(fs *flag.FlagSet) func(*common) error {
	cgroup := fs.String("cgroup", "", "pids cgroup directory")
	inner := fs.Bool("inner", false, "internal: the process that becomes PATH")
	return func(c *common) error {
		if len(c.args) == 0 || *cgroup == "" {
			return errors.New("pids-full-at-clone: want -cgroup DIR -- PATH [ARG...]")
		}
		if *inner {
			return pidsInner(c.args)
		}
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		theirs := os.NewFile(uintptr(fds[1]), "listener socket")
		cmd := exec.Command("/proc/self/exe", append([]string{"-marker", marker, "pids-full-at-clone", "-inner", "-cgroup", *cgroup, "--"}, c.args...)...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		cmd.ExtraFiles = []*os.File{theirs} // fd 3
		if err := cmd.Start(); err != nil {
			return err
		}
		theirs.Close()
		buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
		_, oobn, _, _, err := unix.Recvmsg(fds[0], buf, oob, 0)
		unix.Close(fds[0])
		if err != nil {
			return fmt.Errorf("receive the seccomp listener: %w", err)
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil || len(msgs) != 1 {
			return fmt.Errorf("receive the seccomp listener: %v", err)
		}
		listener, err := unix.ParseUnixRights(&msgs[0])
		if err != nil || len(listener) != 1 {
			return fmt.Errorf("receive the seccomp listener: %v", err)
		}
		go fillAtClone(listener[0], *cgroup)
		err = cmd.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				os.Exit(128 + int(ws.Signal()))
			}
			os.Exit(exit.ExitCode())
		}
		return err
	}
}

// seccompNotif and seccompNotifResp are struct seccomp_notif and struct
// seccomp_notif_resp of <linux/seccomp.h>.
type seccompNotif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Nr    int32
	Arch  uint32
	IP    uint64
	Args  [6]uint64
}

type seccompNotifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// fillAtClone answers every notification of listener: the first moves
// the cloning thread into cgroup and fills it, and each lets the clone run.
func fillAtClone(listener int, cgroup string) {
	filled := false
	for {
		var n seccompNotif
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(listener), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(&n))); errno != 0 {
			if errno == unix.EINTR {
				continue
			}
			return // the program is gone
		}
		if !filled {
			// n.Pid is the thread that called clone.
			if err := os.WriteFile(filepath.Join(cgroup, "tasks"), []byte(strconv.Itoa(int(n.Pid))), 0); err != nil {
				fmt.Fprintf(os.Stderr, "helper: move thread %d into %s: %v\n", n.Pid, cgroup, err)
			}
			if cur, err := os.ReadFile(filepath.Join(cgroup, "pids.current")); err == nil {
				_ = os.WriteFile(filepath.Join(cgroup, "pids.max"), []byte(strings.TrimSpace(string(cur))), 0)
			}
			filled = true
		}
		resp := seccompNotifResp{ID: n.ID, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
		_, _, _ = unix.Syscall(unix.SYS_IOCTL, uintptr(listener), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp)))
	}
}

// pidsInner installs the filter on its own locked thread (the one that
// execs, so the program carries it), sends the listener to its parent on
// fd 3, and execs the program.
func pidsInner(args []string) error {
	arch, err := seccompArch()
	if err != nil {
		return fmt.Errorf("pids-full-at-clone: %w", err)
	}
	runtime.LockOSThread()
	filter := []unix.SockFilter{
		/* 0 */ {Code: ld, K: 4},
		/* 1 */ {Code: jeq, K: arch, Jt: 0, Jf: 4}, // allow (6)
		/* 2 */ {Code: ld, K: 0},
		/* 3 */ {Code: jeq, K: unix.SYS_CLONE, Jt: 0, Jf: 2}, // allow (6)
		/* 4 */ {Code: ld, K: 16},
		/* 5 */ {Code: jset, K: unix.CLONE_NEWPID, Jt: 1, Jf: 0}, // notify (7) or allow (6)
		/* 6 */ {Code: ret, K: unix.SECCOMP_RET_ALLOW},
		/* 7 */ {Code: ret, K: unix.SECCOMP_RET_USER_NOTIF},
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	listener, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&prog)))
	if errno != 0 {
		return fmt.Errorf("seccomp: %w", errno)
	}
	if err := unix.Sendmsg(3, []byte{0}, unix.UnixRights(int(listener)), nil, 0); err != nil {
		return fmt.Errorf("send the seccomp listener: %w", err)
	}
	unix.Close(int(listener))
	unix.Close(3)
	return unix.Exec(args[0], args, os.Environ())
}

// Commands the containment tests use (test/containment_test.go).
func init() {
	commands["catch"] = cmdCatch
	commands["sigparent"] = cmdSigparent
	commands["trace-parent"] = cmdTraceParent
}

// cmdTraceParent is a hostile runner: with corral's own uid, it tries to
// attach to each of its parent's threads, to open the parent's memory and
// to read it, and reports what the kernel said.
func cmdTraceParent(fs *flag.FlagSet) func(*common) error {
	return func(c *common) error {
		if err := c.setup(false); err != nil {
			return err
		}
		ppid := os.Getppid()
		result := func(err error) string {
			if err == nil {
				return "OK"
			}
			var errno syscall.Errno
			if errors.As(err, &errno) {
				return unix.ErrnoName(errno)
			}
			return err.Error()
		}
		entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", ppid))
		if err != nil {
			return err
		}
		for _, ent := range entries {
			tid, err := strconv.Atoi(ent.Name())
			if err != nil {
				continue
			}
			err = unix.PtraceSeize(tid)
			if err == nil {
				_ = unix.PtraceDetach(tid)
			}
			fmt.Printf("tid=%d seize=%s\n", tid, result(err))
		}
		mem, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", ppid), os.O_RDWR, 0)
		if err == nil {
			mem.Close()
		}
		fmt.Printf("mem=%s\n", result(err))
		// Any mapped address will do: the check comes before the copy.
		var local [1]byte
		var remote uintptr
		if maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", ppid)); err == nil {
			start, _, _ := strings.Cut(string(maps), "-")
			v, _ := strconv.ParseUint(start, 16, 64)
			remote = uintptr(v)
		}
		_, err = unix.ProcessVMReadv(ppid, []unix.Iovec{{Base: &local[0], Len: 1}},
			[]unix.RemoteIovec{{Base: remote, Len: 1}}, 0)
		fmt.Printf("vm=%s\n", result(err))
		return nil
	}
}

// cmdCatch logs the signals it is told to catch: those of -keep are
// logged and it keeps running (a service reloading on SIGHUP), the first
// of -exit is logged and it exits with 100+signal. With a child command
// after --, it first starts that child in a new session and waits until
// it is ready.
func cmdCatch(fs *flag.FlagSet) func(*common) error {
	logFile := fs.String("log", "", "file to append each caught signal's name to")
	keep := fs.String("keep", "", "comma-separated signals to log and keep running")
	exit := fs.String("exit", "", "comma-separated signals to log and exit 100+signal on")
	return func(c *common) error {
		if err := c.setup(false); err != nil {
			return err
		}
		parse := func(list string) (map[os.Signal]bool, error) {
			out := map[os.Signal]bool{}
			for _, name := range strings.Split(list, ",") {
				if name == "" {
					continue
				}
				sig, err := parseSignal(name)
				if err != nil {
					return nil, err
				}
				out[sig] = true
			}
			return out, nil
		}
		keepSet, err := parse(*keep)
		if err != nil {
			return err
		}
		exitSet, err := parse(*exit)
		if err != nil {
			return err
		}
		ch := make(chan os.Signal, 16)
		for s := range keepSet {
			signal.Notify(ch, s)
		}
		for s := range exitSet {
			signal.Notify(ch, s)
		}
		if len(c.args) > 0 {
			if _, err := (spawnOptions{count: 1, setsid: true}).start(c.args); err != nil {
				return err
			}
		}
		if err := c.becomeReady(); err != nil {
			return err
		}
		for s := range ch {
			if *logFile != "" {
				appendLine(*logFile, unix.SignalName(s.(syscall.Signal)))
			}
			if exitSet[s] {
				os.Exit(100 + int(s.(syscall.Signal)))
			}
		}
		return nil
	}
}

// cmdSigparent sends a signal to its parent first thing, then waits (at
// most 10 s) for the signal to come back: a runner probing whether corral
// forwards what it receives in the runner's first instants.
func cmdSigparent(fs *flag.FlagSet) func(*common) error {
	name := fs.String("sig", "USR1", "signal to send to the parent")
	return func(c *common) error {
		sig, err := parseSignal(*name)
		if err != nil {
			return err
		}
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, sig)
		if err := unix.Kill(os.Getppid(), sig); err != nil {
			return fmt.Errorf("kill parent %d: %w", os.Getppid(), err)
		}
		select {
		case <-ch:
			os.Exit(0)
		case <-time.After(10 * time.Second):
			fmt.Fprintf(os.Stderr, "helper: %s sent to the parent never came back\n", unix.SignalName(sig))
			os.Exit(3)
		}
		return nil
	}
}

// execFiltered sets no_new_privs, installs filter on every thread of this
// process (SECCOMP_FILTER_FLAG_TSYNC, so the exec carries it whichever
// thread runs it) and execs args.
func execFiltered(filter []unix.SockFilter, args []string) error {
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog))); errno != 0 {
		return fmt.Errorf("seccomp: %w", errno)
	}
	return unix.Exec(args[0], args, os.Environ())
}

// The classic-BPF opcodes the hand-built seccomp filters above use.
const (
	ld   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	ret  = unix.BPF_RET | unix.BPF_K
)

// seccompArch is seccomp_data.arch for the native system calls of this build.
func seccompArch() (uint32, error) {
	arch, ok := map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}[runtime.GOARCH]
	if !ok {
		return 0, fmt.Errorf("no seccomp arch for %s", runtime.GOARCH)
	}
	return arch, nil
}
