package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/setuperr"
	"github.com/corral-sh/corral/internal/wire"
	"github.com/corral-sh/corral/sandbox/internal/stage"
	"golang.org/x/sys/unix"
)

// The test binary stands in for corral when a test re-executes it: as one
// of corral's stages (/proc/self/exe is this binary), or as a process in a
// jail where the kernel refuses one step of pidns mode.
func TestMain(m *testing.M) {
	if say := os.Getenv(fakeInitEnv); say != "" && stage.Current() == stage.InitArg0 {
		os.Exit(fakeInit(say))
	}
	RunStage()
	if jail := os.Getenv(jailEnv); jail != "" {
		os.Exit(jailedLaunch(jail))
	}
	os.Exit(m.Run())
}

// fakeInitEnv makes a re-executed init say what the protocol does not
// have: "unknown" (a kind no table lists) or "early-stop" (RunnerStopped
// before InitReady).
const fakeInitEnv = "SANDBOX_TEST_FAKE_INIT"

func fakeInit(say string) int {
	fd, err := strconv.Atoi(os.Args[1])
	if err != nil {
		return 3
	}
	link := os.NewFile(uintptr(fd), "stage link")
	if _, _, err := wire.ReadFrame(link); err != nil {
		return 3
	}
	switch say {
	case "unknown":
		err = wire.WriteFrame(link, 99, nil)
	case "early-stop":
		payload, _ := wire.Marshal(stage.RunnerStopped{Signal: int(unix.SIGTSTP)})
		err = wire.WriteFrame(link, byte(stage.MsgRunnerStopped), payload)
	}
	if err != nil {
		return 3
	}
	// As an init that goes on would: the host side must end it.
	for {
		_ = unix.Pause()
	}
}

// jailEnv names the jail a re-executed test binary sets up before it
// launches in pidns mode as uid 65534.
const jailEnv = "SANDBOX_TEST_JAIL"

// jailResult is what the jailed launch learned about the error, from the
// error value itself: only this side of the pipe holds it.
type jailResult struct {
	Status  int
	Error   string
	Setup   bool // errors.As(err, *setuperr.SetupError)
	IsEPERM bool
	IsNOSPC bool
}

func jailedLaunch(jail string) int {
	fail := func(err error) int {
		os.Stderr.WriteString("jail: " + err.Error() + "\n")
		return 3
	}
	switch jail {
	case "userns":
		// Per user namespace: 0 here forbids new user namespaces below.
		if err := os.WriteFile("/proc/sys/user/max_user_namespaces", []byte("0\n"), 0); err != nil {
			return fail(err)
		}
	case "proc":
		// What a container runtime does: part of /proc overmounted, and
		// the kernel then refuses a fresh proc mount to an unprivileged
		// user namespace.
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return fail(err)
		}
		if err := unix.Mount("tmpfs", "/proc/sys", "tmpfs", unix.MS_RDONLY, ""); err != nil {
			return fail(err)
		}
	}
	if err := syscall.Setgroups(nil); err != nil {
		return fail(err)
	}
	if err := syscall.Setresgid(65534, 65534, 65534); err != nil {
		return fail(err)
	}
	if err := syscall.Setresuid(65534, 65534, 65534); err != nil {
		return fail(err)
	}
	// Dropping root made this process non-dumpable, so its children's
	// /proc files (uid_map) would stay root's until they exec; an exec
	// (as setpriv does) would reset that, this does it in place.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0); err != nil {
		return fail(err)
	}
	mode := ModePidns
	if jail == "protocol" {
		mode = ModeAuto // a broken protocol never falls back
	}
	var stderr bytes.Buffer
	status, err := Launch(Options{Plan: Plan{Mode: mode, Path: "/bin/true", Args: []string{"/bin/true"}, Grace: time.Second}, Stderr: &stderr})
	r := jailResult{Status: status}
	if err != nil {
		var setup *setuperr.SetupError
		r.Error, r.Setup = err.Error(), errors.As(err, &setup)
		r.IsEPERM, r.IsNOSPC = errors.Is(err, unix.EPERM), errors.Is(err, unix.ENOSPC)
	}
	if json.NewEncoder(os.Stdout).Encode(r) != nil {
		return 3
	}
	return 0
}

// The errno of a refused pidns step reaches Launch's caller as an errno,
// whether the kernel refused in this process (the clone) or in the init,
// whose failure crosses the stage protocol (the proc mount).
func TestRefusedPidnsStepKeepsItsErrno(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root to build the jail (CI=true: a missing feature is a failure)")
		}
		t.Skip("needs root to build the jail")
	}
	// uid 65534 must be able to execute the binary the stages re-execute:
	// a copy outside go test's private work directory.
	dir, err := os.MkdirTemp("", "sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	self, err := os.ReadFile("/proc/self/exe")
	if err == nil {
		err = os.WriteFile(dir+"/sandbox.test", self, 0o755)
	}
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		jail  string
		clone uintptr
		step  string
		check func(jailResult) bool
		say   string // what a fake init says (fakeInitEnv)
	}{
		{"userns", syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS, "clone(CLONE_NEWUSER", func(r jailResult) bool { return r.IsNOSPC && !r.IsEPERM }, ""},
		{"proc", syscall.CLONE_NEWNS, "mount proc on /proc", func(r jailResult) bool { return r.IsEPERM && !r.IsNOSPC }, ""},
		// A message the protocol does not have ends the launch with 125
		// naming it, in --mode auto too: never skipped, never a fallback.
		{"protocol", 0, "unknown message kind 99", func(r jailResult) bool { return true }, "unknown"},
		{"protocol", 0, "message RunnerStopped (pidns init → host side) out of order", func(r jailResult) bool { return true }, "early-stop"},
	} {
		t.Run(strings.TrimSuffix(tc.jail+"-"+tc.say, "-"), func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(dir+"/sandbox.test", "-test.run=^$")
			cmd.Env = append(os.Environ(), jailEnv+"="+tc.jail, fakeInitEnv+"="+tc.say)
			cmd.Dir = "/"
			cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: tc.clone, Pdeathsig: syscall.SIGKILL}
			if tc.clone&syscall.CLONE_NEWUSER != 0 {
				// The host's first 65536 ids, mapped to themselves.
				cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 65536}}
				cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 65536}}
				cmd.SysProcAttr.GidMappingsEnableSetgroups = true
			}
			cmd.WaitDelay = 5 * time.Second
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("jailed launch: %v\n%s", err, stderr.String())
			}
			var r jailResult
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatalf("jailed launch printed %q: %v", out, err)
			}
			if r.Status != 125 || !r.Setup || !strings.Contains(r.Error, tc.step) || !tc.check(r) {
				t.Errorf("jail %s: %+v", tc.jail, r)
			}
		})
	}
}
