package main

// Commands for the sandbox-policy tests: try (attempt operations and say
// how each went), deny-landlock (a seccomp jail without Landlock),
// pidns-reaper (a PID 1 that only reaps) and orphan-exec (exec a program
// whose parent has already exited).

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/corral-sh/corral/internal/seccomp"
	"golang.org/x/sys/unix"
)

// Usage of these commands (the helper's usage text lists the others):
//
//	try [-code N] OP...            attempt each OP, print "OP=ok" or "OP=ERRNO"
//	                               (e.g. "create:/a/x=EACCES") a line each, then
//	                               become ready and exit N. OPs:
//	                                 create:P append:P truncate:P remove:P mkdir:P
//	                                 rename:P:Q read:P write:P list:P exec:P
//	                                 kill:PID:SIG killppid:SIG killchild:SIG
//	                                 tgkillppid:SIG (each thread of the parent)
//	                                 abstract:NAME (connect to @NAME)
//	                                 abstract-self (bind @random, connect to it)
//	                                 socketpair (a byte through a pair)
//	deny-landlock [-restrict-only] -- PATH [ARG]
//	                               execve PATH under a seccomp filter that fails
//	                               the Landlock system calls with ENOSYS (only
//	                               landlock_restrict_self with -restrict-only)
//	pidns-reaper [-userns] -- PATH [ARG]
//	                               run PATH under a PID 1 of fresh pid+mount
//	                               (+user, the caller's ids mapped to themselves)
//	                               namespaces that reaps until nothing is left
//	orphan-exec -- PATH [ARG]      fork; the parent exits at once, the child
//	                               waits until it is orphaned, then execs PATH
//	thread-parent -- PATH [ARG]    start PATH from a thread that then exits,
//	                               become ready once it has, and wait for PATH

func errnoName(err error) string {
	if err == nil {
		return "ok"
	}
	var errno unix.Errno
	if errors.As(err, &errno) {
		if name := unix.ErrnoName(errno); name != "" {
			return name
		}
	}
	return strings.ReplaceAll(err.Error(), " ", "_")
}

func cmdTry(fs *flag.FlagSet) func(*common) error {
	code := fs.Int("code", 0, "exit status")
	return func(c *common) error {
		if err := c.setup(false); err != nil {
			return err
		}
		var out strings.Builder
		for _, op := range c.args {
			fmt.Fprintf(&out, "%s=%s\n", op, errnoName(try(op)))
		}
		if _, err := os.Stdout.WriteString(out.String()); err != nil {
			return err
		}
		if err := c.becomeReady(); err != nil {
			return err
		}
		os.Exit(*code)
		return nil
	}
}

func try(op string) error {
	verb, arg, _ := strings.Cut(op, ":")
	switch verb {
	case "create":
		return writeFile(arg, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY)
	case "append":
		return writeFile(arg, unix.O_APPEND|unix.O_WRONLY)
	case "write":
		return writeFile(arg, unix.O_WRONLY)
	case "truncate":
		return unix.Truncate(arg, 0)
	case "remove":
		return unix.Unlink(arg)
	case "mkdir":
		return unix.Mkdir(arg, 0o755)
	case "rename":
		from, to, _ := strings.Cut(arg, ":")
		return unix.Rename(from, to)
	case "read":
		_, err := os.ReadFile(arg)
		return err
	case "list":
		_, err := os.ReadDir(arg)
		return err
	case "exec":
		return exec.Command(arg).Run()
	case "kill":
		pid, sig, _ := strings.Cut(arg, ":")
		n, err := strconv.Atoi(pid)
		if err != nil {
			return err
		}
		s, err := parseSignal(sig)
		if err != nil {
			return err
		}
		return unix.Kill(n, s)
	case "killppid":
		s, err := parseSignal(arg)
		if err != nil {
			return err
		}
		return unix.Kill(os.Getppid(), s)
	case "killchild":
		return killChild(arg)
	case "tgkillppid":
		return tgkillParent(arg)
	case "abstract":
		conn, err := net.Dial("unix", "@"+arg)
		if err == nil {
			conn.Close()
		}
		return err
	case "abstract-self":
		name := fmt.Sprintf("@corral-helper-%d-%d", os.Getpid(), time.Now().UnixNano())
		l, err := net.Listen("unix", name)
		if err != nil {
			return err
		}
		defer l.Close()
		conn, err := net.Dial("unix", name)
		if err == nil {
			conn.Close()
		}
		return err
	case "socketpair":
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fds[0])
		defer unix.Close(fds[1])
		if _, err := unix.Write(fds[0], []byte{'x'}); err != nil {
			return err
		}
		var b [1]byte
		if n, err := unix.Read(fds[1], b[:]); err != nil || n != 1 || b[0] != 'x' {
			return fmt.Errorf("socketpair read %d %q: %v", n, b[:n], err)
		}
		return nil
	}
	return fmt.Errorf("unknown op %q", op)
}

func writeFile(path string, flags int) error {
	fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	_, err = unix.Write(fd, []byte("x\n"))
	return err
}

// tgkillParent sends the signal to each thread of the parent on its own
// (tgkill): ok if any thread took it, else the first error.
func tgkillParent(name string) error {
	sig, err := parseSignal(name)
	if err != nil {
		return err
	}
	ppid := os.Getppid()
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", ppid))
	if err != nil {
		return err
	}
	var first error
	for _, e := range entries {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if err := unix.Tgkill(ppid, tid, sig); err == nil {
			return nil
		} else if first == nil {
			first = err
		}
	}
	return first
}

// killChild starts a sleeping helper, signals it, and checks that the
// signal is what ended it.
func killChild(name string) error {
	sig, err := parseSignal(name)
	if err != nil {
		return err
	}
	p, err := startReady([]string{"sleep"}, nil)
	if err != nil {
		return err
	}
	if err := unix.Kill(p.Pid, sig); err != nil {
		p.Kill()
		p.Wait()
		return err
	}
	st, err := p.Wait()
	if err != nil {
		return err
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != sig {
		return fmt.Errorf("child ended with %v, not by %v", st, sig)
	}
	return nil
}

// cmdDenyLandlock execs a program in a jail where the Landlock system
// calls fail with ENOSYS, as on a kernel without Landlock; -restrict-only
// leaves the ABI query and the ruleset working, so that only the last
// step, on the runner's thread, fails.
func cmdDenyLandlock(fs *flag.FlagSet) func(*common) error {
	restrictOnly := fs.Bool("restrict-only", false, "fail only landlock_restrict_self")
	return func(c *common) error {
		if len(c.args) == 0 {
			return errors.New("deny-landlock: no program")
		}
		calls := []uintptr{unix.SYS_LANDLOCK_CREATE_RULESET, unix.SYS_LANDLOCK_ADD_RULE, unix.SYS_LANDLOCK_RESTRICT_SELF}
		if *restrictOnly {
			calls = calls[2:]
		}
		var rules []seccomp.Rule
		for _, nr := range calls {
			rules = append(rules, seccomp.Rule{Syscall: nr, Match: seccomp.Always, Errno: unix.ENOSYS})
		}
		prog, err := seccomp.Build(rules)
		if err != nil {
			return err
		}
		// The filter belongs to this thread; the exec below runs on it.
		runtime.LockOSThread()
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("no_new_privs: %w", err)
		}
		if err := seccomp.InstallOnThread(prog); err != nil {
			return err
		}
		return unix.Exec(c.args[0], c.args, os.Environ())
	}
}

// cmdPidnsReaper runs a program under a PID 1 that does nothing but reap,
// so that an orphan is adopted by PID 1 of its namespace whatever
// subreaper the machine runs the tests under.
func cmdPidnsReaper(fs *flag.FlagSet) func(*common) error {
	userns := fs.Bool("userns", false, "create a user namespace too")
	inner := fs.Bool("inner", false, "internal: the PID 1 inside the namespaces")
	return func(c *common) error {
		if len(c.args) == 0 {
			return errors.New("pidns-reaper: no program")
		}
		if *inner {
			return reapAsPID1(c.args)
		}
		attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
		if *userns {
			uid, gid := os.Getuid(), os.Getgid()
			attr.Cloneflags |= syscall.CLONE_NEWUSER
			attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
			attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
			attr.GidMappingsEnableSetgroups = false
			if uid != 0 {
				attr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN} // to mount /proc after the exec
			}
		}
		cmd := exec.Command("/proc/self/exe", append([]string{"-marker", marker, "pidns-reaper", "-inner", "--"}, c.args...)...)
		cmd.Args[0] = "helper"
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		cmd.SysProcAttr = attr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("pidns-reaper: %w", err)
		}
		return nil
	}
}

func reapAsPID1(args []string) error {
	if os.Getpid() != 1 {
		return fmt.Errorf("pidns-reaper: running as pid %d, not 1", os.Getpid())
	}
	if err := mountProc(); err != nil {
		return err
	}
	// What this process held to mount /proc, its children must not.
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	if _, err := os.StartProcess(args[0], args, &os.ProcAttr{Files: []*os.File{os.Stdin, os.Stdout, os.Stderr}}); err != nil {
		return err
	}
	for {
		var ws unix.WaitStatus
		_, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.ECHILD) {
			return nil
		}
		if err != nil && !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// cmdOrphanExec makes PATH start with its parent already gone.
func cmdOrphanExec(fs *flag.FlagSet) func(*common) error {
	parent := fs.Int("parent", 0, "internal: wait until this is no longer the parent")
	return func(c *common) error {
		if len(c.args) == 0 {
			return errors.New("orphan-exec: no program")
		}
		if *parent == 0 {
			args := append([]string{"helper", "-marker", marker, "orphan-exec", "-parent", strconv.Itoa(os.Getpid()), "--"}, c.args...)
			_, err := os.StartProcess("/proc/self/exe", args, &os.ProcAttr{Files: []*os.File{os.Stdin, os.Stdout, os.Stderr}})
			return err // exit at once, without waiting
		}
		deadline := time.Now().Add(readyTimeout)
		for os.Getppid() == *parent {
			if time.Now().After(deadline) {
				return errors.New("orphan-exec: the parent never exited")
			}
			time.Sleep(time.Millisecond)
		}
		return unix.Exec(c.args[0], c.args, os.Environ())
	}
}

// cmdThreadParent starts a program from an OS thread that exits right
// after, while the process lives on: what fires PR_SET_PDEATHSIG in the
// child, and must not look like the parent's exit.
func cmdThreadParent(fs *flag.FlagSet) func(*common) error {
	return func(c *common) error {
		if len(c.args) == 0 {
			return errors.New("thread-parent: no program")
		}
		if err := c.setup(false); err != nil {
			return err
		}
		type started struct {
			p   *os.Process
			tid int
			err error
		}
		ch := make(chan started, 1)
		var start func()
		start = func() {
			runtime.LockOSThread()
			if unix.Gettid() == unix.Getpid() {
				// The main thread never exits, even so: hold it while
				// another goroutine, on another thread, starts over.
				done := make(chan struct{})
				go func() { start(); close(done) }()
				<-done
				runtime.UnlockOSThread()
				return
			}
			// Never unlocked: the thread ends with this goroutine.
			p, err := os.StartProcess(c.args[0], c.args, &os.ProcAttr{Files: []*os.File{os.Stdin, os.Stdout, os.Stderr}})
			ch <- started{p, unix.Gettid(), err}
		}
		go start()
		st := <-ch
		if st.err != nil {
			return st.err
		}
		task := fmt.Sprintf("/proc/self/task/%d", st.tid)
		deadline := time.Now().Add(readyTimeout)
		for {
			if _, err := os.Stat(task); err != nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("thread-parent: thread %d never exited", st.tid)
			}
			time.Sleep(time.Millisecond)
		}
		if err := c.becomeReady(); err != nil {
			return err
		}
		_, err := st.p.Wait()
		return err
	}
}
