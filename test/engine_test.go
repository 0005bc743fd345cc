package test

// corral in real container engines (issue 20): podman rootful and rootless
// running an image built here offline, `podman kube play` of deploy/, and
// bubblewrap nesting. The other container tests simulate a jail; these run
// the real one, as an operator would before moving a fleet onto corral.
//
// One image per storage (rootful, and the rootless test user's): the static
// corral TestMain built, busybox-static with its applet links, and
// /app/runner, with deploy/Dockerfile's ENTRYPOINT. Every container, pod,
// volume and image a test creates carries a name it chose, and only those
// names are removed; the rootless user is created here and removed with
// everything it ran. No name is fixed (each holds a random run id), nor
// any host port, so a run never meets another's resources; what a run
// killed before its cleanups left, the next run removes (sweepStaleRuns).
//
// A subtest whose name ends in "-issue20-pN" or "-issue18" waits on that
// fix (issue 20's point N, or issue 18's network policy in subreaper mode)
// and fails until it lands.

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"gopkg.in/yaml.v3"
)

// Bounds of every podman invocation: they catch a hang, nothing else.
const (
	podmanTimeout = 60 * time.Second // one podman command (a run included)
	stopTimeout   = 30               // podman stop -t: far above any grace used here
)

// Paths inside the test image.
const (
	imageCorral = "/usr/local/bin/corral"
	imageRunner = "/app/runner"
	imagePath   = "/bin:/usr/local/bin"
)

// runnerScript is /app/runner: a service that says what it receives.
// With --listen :PORT it also serves one line on PORT from a child of its
// own, so the tree has more than the runner in it.
const runnerScript = `#!/bin/sh
trap 'echo "runner: got SIGTERM"; exit 0' TERM
trap 'echo "runner: got SIGHUP"' HUP
if [ "$1" = --listen ]; then
	nc -ll -p "${2#:}" -e /bin/echo "hello from the runner" &
fi
echo "runner: up: $*"
while :; do sleep 0.1 & wait $!; done
`

// engine is one podman storage: rootful (the host's root) or rootless (a
// test user with subordinate ids).
type engine struct {
	name     string
	rootless bool
	run      string // random id in every name this test creates
	dir      string // 0755, readable by the rootless user
	conf     string // containers.conf given by CONTAINERS_CONF
	image    string
	user     string // rootless only
	uid, gid int
	home     string
	xdg      string // XDG_RUNTIME_DIR
}

// podResult is how a podman command, or the container it ran, ended.
type podResult struct {
	code           int
	stdout, stderr string
}

func (r podResult) String() string {
	return fmt.Sprintf("exit status %d\n--- stdout:\n%s\n--- stderr:\n%s", r.code, r.stdout, r.stderr)
}

// requirePodman returns podman's path, or skips (fails under CI=true)
// naming what is missing.
func requirePodman(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		missingFeature(t, "the podman tests run as root (they create a rootless user)")
	}
	var missing []string
	for _, tool := range []string{"podman", "runc", "catatonit", "newuidmap", "newgidmap", "busybox", "useradd", "userdel"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		missingFeature(t, fmt.Sprintf("podman tests need %s (apt-get install podman runc uidmap busybox-static catatonit, as .ci/run does)", strings.Join(missing, ", ")))
	}
	path, _ := exec.LookPath("podman")
	return path
}

// staticBusybox returns the host's busybox when it is statically linked:
// the image has no C library.
func staticBusybox(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("busybox")
	if err != nil {
		missingFeature(t, "busybox-static is not installed")
	}
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			missingFeature(t, path+" is dynamically linked: install busybox-static")
		}
	}
	return path
}

// podman runs podman with args as the engine's user, bounded by
// podmanTimeout, and returns how podman itself ended.
func (pe *engine) podman(t *testing.T, args ...string) podResult {
	t.Helper()
	return pe.podmanStdin(t, nil, args...)
}

func (pe *engine) podmanStdin(t *testing.T, stdin []byte, args ...string) podResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), podmanTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "podman", args...)
	cmd.Dir = pe.dir
	cmd.WaitDelay = 2 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if pe.rootless {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(pe.uid), Gid: uint32(pe.gid), Groups: []uint32{}}
		cmd.Env = []string{
			"HOME=" + pe.home, "USER=" + pe.user, "LOGNAME=" + pe.user,
			"XDG_RUNTIME_DIR=" + pe.xdg, "PATH=" + testPath, "CONTAINERS_CONF=" + pe.conf,
		}
	} else {
		cmd.Env = append(baseEnviron(), "CONTAINERS_CONF="+pe.conf)
	}
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := podResult{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
	if ctx.Err() != nil {
		t.Fatalf("podman %s did not end within %v (killed it): %v", strings.Join(args, " "), podmanTimeout, res)
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("podman %s: %v", strings.Join(args, " "), err)
	}
	return res
}

// must runs podman and fails the test unless it succeeded.
func (pe *engine) must(t *testing.T, args ...string) string {
	t.Helper()
	res := pe.podman(t, args...)
	if res.code != 0 {
		t.Fatalf("podman %s: %v", strings.Join(args, " "), res)
	}
	return res.stdout
}

// netFlags is what every container of the engine gets: rootless podman
// here has no network but none (/dev/net/tun is 0600, so slirp4netns
// cannot open it).
func (pe *engine) netFlags() []string {
	if pe.rootless {
		return []string{"--network", "none"}
	}
	return nil
}

// container returns a new container name, removed (by that name) when the
// test ends.
func (pe *engine) container(t *testing.T, label string) string {
	name := fmt.Sprintf("corral-et-%s-%s-%s", pe.run, label, randomHex()[:6])
	t.Cleanup(func() { pe.podman(t, "rm", "--force", "--time", "0", "--volumes", "--ignore", name) })
	return name
}

// hostDir returns a directory on the host for a bind mount, writable by
// whatever uid the container maps to.
func (pe *engine) hostDir(t *testing.T, label string) string {
	dir, err := os.MkdirTemp(pe.dir, label+"-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// exitCode is the container's exit status as the engine recorded it: not
// podman's own status, which is 125 for podman's errors too.
func (pe *engine) exitCode(t *testing.T, name string) int {
	t.Helper()
	out := strings.Fields(pe.must(t, "inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", name))
	if len(out) != 2 || out[0] != "exited" {
		t.Fatalf("container %s did not run to its end: state %q", name, out)
	}
	code, err := strconv.Atoi(out[1])
	if err != nil {
		t.Fatalf("container %s: exit code %q", name, out[1])
	}
	return code
}

// runContainer runs a container attached to its end and returns its exit
// status with what it wrote; flags go before the image, args after it.
func (pe *engine) runContainer(t *testing.T, label string, flags []string, args ...string) podResult {
	t.Helper()
	name := pe.container(t, label)
	cmd := append([]string{"run", "--name", name}, pe.netFlags()...)
	cmd = append(append(append(cmd, flags...), pe.image), args...)
	attached := pe.podman(t, cmd...)
	code := pe.exitCode(t, name)
	// What the container wrote, from its log: podman's attach stream can
	// lose the output of a container that exits at once.
	logs := pe.podman(t, "logs", name)
	if logs.code != 0 {
		t.Fatalf("podman logs %s: %v (podman run: %v)", name, logs, attached)
	}
	return podResult{code: code, stdout: logs.stdout, stderr: logs.stderr}
}

// corral runs corral with args as the container's entrypoint.
func (pe *engine) corral(t *testing.T, label string, flags []string, args ...string) podResult {
	t.Helper()
	return pe.runContainer(t, label, append([]string{"--entrypoint", imageCorral}, flags...), args...)
}

// detached starts a container in the background and returns its name.
func (pe *engine) detached(t *testing.T, label string, flags []string, args ...string) string {
	t.Helper()
	name := pe.container(t, label)
	cmd := append([]string{"run", "--detach", "--name", name}, pe.netFlags()...)
	cmd = append(append(append(cmd, flags...), pe.image), args...)
	pe.must(t, cmd...)
	return name
}

// logs is what the container wrote to stdout and stderr so far.
func (pe *engine) logs(t *testing.T, name string) string {
	t.Helper()
	res := pe.podman(t, "logs", name)
	return res.stdout + res.stderr
}

// waitLog waits (bounded) until the container's output contains want.
func (pe *engine) waitLog(t *testing.T, name, want string) {
	t.Helper()
	deadline := time.Now().Add(readyTimeout)
	for {
		out := pe.logs(t, name)
		if strings.Contains(out, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s did not write %q within %v:\n%s", name, want, readyTimeout, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop stops a container with a stop timeout far above corral's grace and
// fails the test if podman had to SIGKILL it: what it returns is corral's
// own exit status.
func (pe *engine) stop(t *testing.T, name string, timeout ...string) int {
	t.Helper()
	args := []string{"stop"}
	if len(timeout) == 0 {
		args = append(args, "--time", strconv.Itoa(stopTimeout))
	} else {
		args = append(args, timeout...)
	}
	res := pe.podman(t, append(args, name)...)
	if res.code != 0 {
		t.Fatalf("podman stop %s: %v", name, res)
	}
	if strings.Contains(res.stderr, "SIGKILL") {
		t.Errorf("podman had to SIGKILL %s: corral's own escalation did not end it in time: %s", name, res.stderr)
	}
	return pe.exitCode(t, name)
}

// imageTar builds the image's root filesystem as a tarball.
func imageTar(t *testing.T, path string) {
	t.Helper()
	busybox := staticBusybox(t)
	list, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		t.Fatalf("busybox --list: %v", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	add := func(h *tar.Header, body []byte) {
		h.Uname, h.Gname = "root", "root"
		h.ModTime = time.Unix(0, 0)
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if len(body) > 0 {
			if _, err := tw.Write(body); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, d := range []struct {
		name string
		mode int64
	}{{"bin", 0o755}, {"usr", 0o755}, {"usr/local", 0o755}, {"usr/local/bin", 0o755}, {"app", 0o755},
		{"etc", 0o755}, {"tmp", 0o1777}, {"run", 0o755}, {"proc", 0o555}, {"sys", 0o555}, {"dev", 0o755}} {
		add(&tar.Header{Name: d.name + "/", Typeflag: tar.TypeDir, Mode: d.mode}, nil)
	}
	file := func(name, from string) {
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		add(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o755}, data)
	}
	file("bin/busybox", busybox)
	for _, applet := range strings.Fields(string(list)) {
		if applet != "busybox" && !strings.Contains(applet, "/") {
			add(&tar.Header{Name: "bin/" + applet, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777}, nil)
		}
	}
	file(strings.TrimPrefix(imageCorral, "/"), corralBin)
	add(&tar.Header{Name: strings.TrimPrefix(imageRunner, "/"), Typeflag: tar.TypeReg, Mode: 0o755}, []byte(runnerScript))
	add(&tar.Header{Name: "etc/passwd", Typeflag: tar.TypeReg, Mode: 0o644},
		[]byte("root:x:0:0:root:/root:/bin/sh\nnonroot:x:65532:65532:nonroot:/home/nonroot:/bin/sh\n"))
	add(&tar.Header{Name: "etc/group", Typeflag: tar.TypeReg, Mode: 0o644}, []byte("root:x:0:\nnonroot:x:65532:\n"))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

// dockerfileEntrypoint is the ENTRYPOINT of deploy/Dockerfile's final
// stage, which the test image gets too.
func dockerfileEntrypoint(t *testing.T) []string {
	t.Helper()
	stages := parseDockerfile(t, string(deployFile(t, "Dockerfile")))
	entry, ok := stages[len(stages)-1].instruction("ENTRYPOINT")
	if !ok {
		t.Fatal("deploy/Dockerfile has no ENTRYPOINT")
	}
	var ep []string
	if err := json.Unmarshal([]byte(entry), &ep); err != nil || len(ep) == 0 || ep[0] != imageCorral {
		t.Fatalf("deploy/Dockerfile's ENTRYPOINT %s: want the exec form starting with %s", entry, imageCorral)
	}
	return ep
}

// writeContainersConf writes the containers.conf every podman call gets.
func writeContainersConf(t *testing.T, path string) {
	t.Helper()
	var nofile, nproc unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &nofile); err != nil {
		t.Fatal(err)
	}
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &nproc); err != nil {
		t.Fatal(err)
	}
	// podman's default rlimits for root (1048576 open files and
	// processes) exceed the hard limits a root without CAP_SYS_RESOURCE
	// may set, and runc then fails the container's start with EPERM. Open
	// files: the caller's hard limit. Processes: podman's own processes
	// may hold a lower hard limit than the test (conmon runs with 32768
	// on hosts where the shell has more), so a modest value any of them
	// can set.
	nprocMax := min(nproc.Max, 4096)
	conf := fmt.Sprintf(`# written by test/engine_test.go
[containers]
default_ulimits = ["nofile=%d:%d", "nproc=%d:%d"]

[engine]
# crun refuses a hybrid cgroup layout ("cgroups in hybrid mode not supported").
runtime = "runc"
`, nofile.Max, nofile.Max, nprocMax, nprocMax)
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
}

// setupEngine prepares one storage and registers its teardown.
func setupEngine(t *testing.T, rootless bool) *engine {
	t.Helper()
	pe := &engine{name: "rootful", rootless: rootless, run: randomHex()[:8]}
	if rootless {
		pe.name = "rootless"
	}
	dir, err := os.MkdirTemp(baseDir, "engine-"+pe.name+"-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pe.dir = dir
	pe.holdRunLock(t)
	pe.conf = filepath.Join(dir, "containers.conf")
	writeContainersConf(t, pe.conf)
	if !rootless {
		pe.sweepStaleRuns(t)
	}
	if rootless {
		pe.createUser(t)
	}
	pe.image = "localhost/corral-engine-test:" + pe.run
	tarball := filepath.Join(dir, "rootfs.tar")
	imageTar(t, tarball)
	ep, _ := json.Marshal(dockerfileEntrypoint(t))
	t.Cleanup(func() { pe.podman(t, "rmi", "--force", pe.image) })
	pe.must(t, "import", "--change", "ENTRYPOINT "+string(ep), "--change", "ENV PATH="+imagePath, tarball, pe.image)
	return pe
}

// runLockDir holds one lock file per engine of a live test process,
// named after the engine's run id and holding the process's baseDir. The
// process
// holds the file's flock until it exits, however it exits: a lock nobody
// holds is a run that died (SIGKILL, go test's -timeout panic) before its
// cleanups ran.
var runLockDir = filepath.Join(os.TempDir(), "corral-engine-test")

// holdRunLock takes the engine's run lock before the engine creates
// anything; the lock goes after everything else the test removes.
func (pe *engine) holdRunLock(t *testing.T) {
	t.Helper()
	if err := os.MkdirAll(runLockDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Locked under a temporary name, then renamed into place: a sweeper
	// never sees the lock file unheld.
	tmp := filepath.Join(runLockDir, "."+pe.run+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(baseDir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(runLockDir, pe.run+".lock")
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.Remove(path)
		os.Remove(pausePath(pe.run))
		f.Close()
	})
}

// pausePath marks a run that may make podman's pause image (kube play
// builds it when the storage has none): after a dead run so marked, the
// pause images are removed (not forced, so not while a pod uses one).
func pausePath(run string) string { return filepath.Join(runLockDir, run+".pause") }

// staleRun returns the baseDir of run when its lock file exists and no
// process holds it. A run without a lock file is not judged: it is a live
// one of older test code, or none of this test's.
func staleRun(run string) (dir string, stale bool) {
	f, err := os.Open(filepath.Join(runLockDir, run+".lock"))
	if err != nil {
		return "", false
	}
	defer f.Close()
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return "", false
	}
	data, _ := io.ReadAll(f)
	return string(data), true
}

// ownName finds the run id in the name of a container, pod, volume, user or
// image an engine of this test created.
var ownName = regexp.MustCompile(`^(?:corral-et-|localhost/corral-engine-test:)([0-9a-f]{8})(?:-|$)`)

// sweepStaleRuns removes what engines of dead test processes left behind,
// by the names they gave it: the rootful storage's containers, pods,
// volumes and images, and each rootless test user with everything it ran
// and stored. A live run, of this process or another, is left alone.
func (pe *engine) sweepStaleRuns(t *testing.T) {
	t.Helper()
	dirs := map[string]string{}
	stale := func(name string) bool {
		m := ownName.FindStringSubmatch(name)
		if m == nil || m[1] == pe.run {
			return false
		}
		if _, ok := dirs[m[1]]; ok {
			return true
		}
		dir, ok := staleRun(m[1])
		if ok {
			dirs[m[1]] = dir
		}
		return ok
	}
	for _, name := range strings.Fields(pe.must(t, "pod", "ls", "--format", "{{.Name}}")) {
		if stale(name) {
			pe.podman(t, "pod", "rm", "--force", "--ignore", "--time", "0", name)
		}
	}
	for _, name := range strings.Fields(pe.must(t, "ps", "--all", "--format", "{{.Names}}")) {
		if stale(name) {
			pe.podman(t, "rm", "--force", "--time", "0", "--volumes", "--ignore", name)
		}
	}
	for _, name := range strings.Fields(pe.must(t, "volume", "ls", "--format", "{{.Name}}")) {
		if stale(name) {
			pe.podman(t, "volume", "rm", "--force", name)
		}
	}
	for _, ref := range strings.Fields(pe.must(t, "images", "--format", "{{.Repository}}:{{.Tag}}")) {
		if stale(ref) {
			pe.podman(t, "rmi", "--force", ref)
		}
	}
	passwd, _ := os.ReadFile("/etc/passwd")
	for _, line := range strings.Split(string(passwd), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 7 || !stale(f[0]) {
			continue
		}
		uid, err1 := strconv.Atoi(f[2])
		gid, err2 := strconv.Atoi(f[3])
		if err1 != nil || err2 != nil {
			continue
		}
		old := &engine{name: "rootless", rootless: true, user: f[0], uid: uid, gid: gid, home: f[5],
			xdg: fmt.Sprintf("/run/user/%d", uid)}
		old.removeUser(t)
	}
	for run, dir := range dirs {
		t.Logf("removing what the dead test run %s left behind", run)
		if _, err := os.Stat(pausePath(run)); err == nil {
			for _, ref := range strings.Fields(pe.must(t, "images", "--format", "{{.Repository}}:{{.Tag}}")) {
				if strings.HasPrefix(ref, "localhost/podman-pause:") {
					pe.podman(t, "rmi", ref)
				}
			}
			os.Remove(pausePath(run))
		}
		if strings.HasPrefix(dir, filepath.Join(os.TempDir(), "corral-test-")) && !strings.Contains(dir, "..") {
			os.RemoveAll(dir)
		}
		os.Remove(filepath.Join(runLockDir, run+".lock"))
	}
}

// createUser creates the rootless test user with subordinate ids, and a
// runtime directory (there is no logind to make one). Its teardown ends
// the processes podman left running as that user (the rootless pause
// process that holds its user namespace), then removes the user, its
// subordinate ids and its files.
func (pe *engine) createUser(t *testing.T) {
	t.Helper()
	pe.user = "corral-et-" + pe.run
	pe.home = filepath.Join(pe.dir, "home")
	out, err := exec.Command("useradd", "--create-home", "--home-dir", pe.home, "--shell", "/bin/sh",
		"--user-group", pe.user).CombinedOutput()
	if err != nil {
		t.Fatalf("useradd %s: %v: %s", pe.user, err, out)
	}
	t.Cleanup(func() { pe.removeUser(t) })
	idOut, err := exec.Command("id", "-u", pe.user).Output()
	if err == nil {
		pe.uid, err = strconv.Atoi(strings.TrimSpace(string(idOut)))
	}
	if err != nil {
		t.Fatalf("id -u %s: %v", pe.user, err)
	}
	idOut, err = exec.Command("id", "-g", pe.user).Output()
	if err == nil {
		pe.gid, err = strconv.Atoi(strings.TrimSpace(string(idOut)))
	}
	if err != nil {
		t.Fatalf("id -g %s: %v", pe.user, err)
	}
	for _, f := range []string{"/etc/subuid", "/etc/subgid"} {
		data, _ := os.ReadFile(f)
		if !bytes.Contains(data, []byte("\n"+pe.user+":")) && !bytes.HasPrefix(data, []byte(pe.user+":")) {
			// useradd adds them where login.defs says SUB_UID_COUNT;
			// without that, rootless podman has one uid only.
			t.Fatalf("useradd gave %s no subordinate ids in %s: %q", pe.user, f, data)
		}
	}
	pe.xdg = fmt.Sprintf("/run/user/%d", pe.uid)
	// A directory left by an earlier user of this fresh uid belongs to
	// nobody now.
	os.RemoveAll(pe.xdg)
	if err := os.MkdirAll(pe.xdg, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(pe.xdg, pe.uid, pe.gid); err != nil {
		t.Fatal(err)
	}
}

func (pe *engine) removeUser(t *testing.T) {
	if pe.uid < 1000 || !strings.HasPrefix(pe.user, "corral-et-") {
		t.Errorf("not removing user %q (uid %d): not a rootless test user", pe.user, pe.uid)
		return
	}
	// Every process of this uid, or of its subordinate uids, was started
	// by the test through podman (the user did not exist before it).
	ours := subordinateUIDs(pe.user)
	ours = append(ours, [2]int{pe.uid, 1})
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := procsOfUIDs(ours)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("processes of the rootless test user %s survive:\n%s", pe.user, formatProcs(left))
			break
		}
		for _, p := range left {
			fd, err := unix.PidfdOpen(p.pid, 0)
			if err != nil {
				continue
			}
			if inRanges(uidOf(p.pid), ours) {
				unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			}
			unix.Close(fd)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if out, err := exec.Command("userdel", pe.user).CombinedOutput(); err != nil {
		t.Errorf("userdel %s: %v: %s", pe.user, err, out)
	}
	for _, f := range []string{"/etc/subuid", "/etc/subgid"} {
		if data, _ := os.ReadFile(f); bytes.Contains(data, []byte(pe.user+":")) {
			t.Errorf("userdel left %s's subordinate ids in %s", pe.user, f)
		}
	}
	os.RemoveAll(pe.xdg)
	os.RemoveAll(pe.home)
}

// uidOf is the real uid of pid, or -1.
func uidOf(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				if uid, err := strconv.Atoi(f[0]); err == nil {
					return uid
				}
			}
		}
	}
	return -1
}

// subordinateUIDs returns user's ranges in /etc/subuid, as (start, count).
func subordinateUIDs(user string) [][2]int {
	data, _ := os.ReadFile("/etc/subuid")
	var out [][2]int
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Split(line, ":")
		if len(f) != 3 || f[0] != user {
			continue
		}
		start, err1 := strconv.Atoi(f[1])
		count, err2 := strconv.Atoi(f[2])
		if err1 == nil && err2 == nil {
			out = append(out, [2]int{start, count})
		}
	}
	return out
}

func inRanges(uid int, ranges [][2]int) bool {
	for _, r := range ranges {
		if uid >= r[0] && uid < r[0]+r[1] {
			return true
		}
	}
	return false
}

// procsOfUIDs lists the live processes whose real uid is in ranges.
func procsOfUIDs(ranges [][2]int) []procInfo {
	entries, _ := os.ReadDir("/proc")
	var out []procInfo
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || !inRanges(uidOf(pid), ranges) {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		state := "?"
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) {
			state = string(stat[i+2])
		}
		if state == "Z" {
			continue
		}
		out = append(out, procInfo{pid: pid, state: state, cmdline: string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))})
	}
	return out
}

// podmanCases run in each storage, in parallel.
var podmanCases = []struct {
	name string
	fn   func(t *testing.T, pe *engine)
}{
	{"pid1-exit-status", testPodmanPID1ExitStatus},
	{"probe", testPodmanProbe},
	{"probe-speaks-podman-issue20-p5", testPodmanProbeSpeaksPodman},
	{"helpers-gone-pid1", func(t *testing.T, pe *engine) { testPodmanHelpersGone(t, pe, false) }},
	{"helpers-gone-init", func(t *testing.T, pe *engine) { testPodmanHelpersGone(t, pe, true) }},
	{"stop-143", testPodmanStop143},
	{"stop-grace-137", testPodmanStopGrace137},
	{"verbose-lines-issue20-p4", testPodmanVerboseLines},
	{"stop-dockerfile-grace", testPodmanStopDockerfileGrace},
	{"hup-forwarded", testPodmanHUP},
	{"pidns-refused", testPodmanPidnsRefused},
	{"pidns-sys-admin", func(t *testing.T, pe *engine) { testPodmanPidns(t, pe, "--cap-add", "SYS_ADMIN") }},
	{"pidns-unmask", func(t *testing.T, pe *engine) { testPodmanPidns(t, pe, "--security-opt", "unmask=ALL") }},
	{"net-none-issue18", testPodmanNetNone},
	{"allow-net-issue18", testPodmanAllowNet},
	{"net-none-unix-sockets", testPodmanUnixSockets},
	{"state-on-volume", testPodmanStateOnVolume},
	{"die-with-parent-init-issue20-p1", testPodmanDieWithParentInit},
	{"kube-play", testPodmanKubePlay},
}

func TestPodman(t *testing.T) {
	t.Parallel()
	requirePodman(t)
	for _, rootless := range []bool{false, true} {
		name := "rootful"
		if rootless {
			name = "rootless"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pe := setupEngine(t, rootless)
			for _, c := range podmanCases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.fn(t, pe)
				})
			}
		})
	}
}

// The image's own ENTRYPOINT (deploy/Dockerfile's) makes corral PID 1 in
// front of the runner, and the container exits with the runner's status.
func testPodmanPID1ExitStatus(t *testing.T, pe *engine) {
	res := pe.runContainer(t, "pid1", nil, "/bin/sh", "-c", `echo "pid1=$(cat /proc/1/comm) runner=$$"; exit 5`)
	if res.code != 5 {
		t.Fatalf("want the runner's exit status 5: %v", res)
	}
	if !strings.Contains(res.stdout, "pid1=corral ") || strings.Contains(res.stdout, "runner=1\n") {
		t.Errorf("corral is not PID 1 in front of the runner: %q", res.stdout)
	}
}

// podmanProbe runs corral probe --json in a container.
func (pe *engine) probe(t *testing.T, label string, flags ...string) (probeReport, map[string]bool, map[string]string) {
	t.Helper()
	res := pe.corral(t, label, flags, "probe", "--json")
	return parseProbe(t, result{code: res.code, stdout: res.stdout, stderr: res.stderr})
}

// Under podman's defaults the user namespace is allowed (podman's seccomp
// profile lets it through) and the fresh /proc is what is refused, because
// podman masks parts of /proc: the probe says so, as root and as a
// non-root uid, and auto picks subreaper.
func testPodmanProbe(t *testing.T, pe *engine) {
	for _, user := range []string{"0", "65532"} {
		t.Run("uid"+user, func(t *testing.T) {
			r, available, detail := pe.probe(t, "probe-"+user, "--user", user+":"+user)
			if r.AutoMode != "subreaper" {
				t.Errorf("auto_mode %q, want subreaper: %q", r.AutoMode, r.Reason)
			}
			if !available["user namespaces"] || !available["subreaper"] || !available["pidfd"] {
				t.Errorf("want user namespaces, subreaper and pidfd available under podman: %v %v", available, detail)
			}
			if available["fresh /proc mount"] || !strings.Contains(detail["fresh /proc mount"], "overmounted") {
				t.Errorf("the fresh /proc mount must be refused because podman masks /proc: %q", detail["fresh /proc mount"])
			}
			if !strings.Contains(r.Reason, "/proc") || strings.Contains(r.Reason, "seccomp") {
				t.Errorf("auto_reason must name the masked /proc, not seccomp: %q", r.Reason)
			}
		})
	}
}

// Issue 20 point 5: inside podman the hints use podman's words
// (`--security-opt unmask=ALL`), not Docker's, and do not ask for a
// cgroup2 mount that cannot be made from inside a container.
func testPodmanProbeSpeaksPodman(t *testing.T, pe *engine) {
	r, _, detail := pe.probe(t, "probe-words")
	fix := detail["fresh /proc mount"] + " " + r.Reason
	if !strings.Contains(fix, "podman") || !strings.Contains(fix, "unmask=ALL") {
		t.Errorf("inside podman the fix must name podman's option --security-opt unmask=ALL: %q", fix)
	}
	if strings.Contains(fix, "systempaths=unconfined") {
		t.Errorf("inside podman the fix names Docker's option: %q", fix)
	}
	if strings.Contains(detail["cgroup v2"], "mount -t cgroup2") {
		t.Errorf("inside a container the cgroup hint asks for a mount that cannot be made there: %q", detail["cgroup v2"])
	}
}

// helpersScript leaves two detached helpers behind, both up before the
// runner exits 3: A in a session of its own, catching SIGTERM and going on
// (it needs SIGKILL); B double-forked, exiting on SIGTERM. Each logs what
// it got to /out/log. The scripts' waits in the container are bounded at
// 15 s of sleeps, as readyTimeout bounds the host's: they catch a hang
// and assert nothing about timing.
const helpersScript = `echo "pid1=$(cat /proc/1/comm)"
setsid sh -c 'trap "echo A-term >> /out/log" TERM; echo A-up >> /out/log; while :; do sleep 0.05; done' &
( sh -c 'trap "echo B-term >> /out/log; exit 0" TERM; echo B-up >> /out/log; while :; do sleep 0.05; done' & )
i=0
while [ "$(grep -c up /out/log 2>/dev/null)" != 2 ] && [ $i -lt 750 ]; do sleep 0.02; i=$((i+1)); done
exit 3`

// Detached helpers that ignore SIGTERM are sent SIGTERM, then SIGKILLed by
// corral at the end of its grace, with corral as PID 1 and with corral
// under `podman run --init` (catatonit as PID 1): the state file on the
// bind mount says corral adopted, reaped and escalated.
func testPodmanHelpersGone(t *testing.T, pe *engine, init bool) {
	out := pe.hostDir(t, "helpers")
	flags := []string{"--volume", out + ":/out"}
	if init {
		flags = append(flags, "--init")
	}
	res := pe.corral(t, "helpers", flags, "-v", "--grace", "1", "--poll", "0.05", "--state", "/out/state.json", "--",
		"/bin/sh", "-c", helpersScript)
	if res.code != 3 {
		t.Fatalf("want the runner's status 3: %v", res)
	}
	// podman's --init is catatonit, bind-mounted as /run/podman-init.
	if asPID1 := strings.Contains(res.stdout, "pid1=corral\n"); asPID1 == init {
		t.Errorf("corral as PID 1: %v, want %v: %q", asPID1, !init, res.stdout)
	}
	log, _ := os.ReadFile(filepath.Join(out, "log"))
	for _, want := range []string{"A-up", "B-up", "A-term", "B-term"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("the helpers' log lacks %s (corral did not signal the adopted helpers): %q", want, log)
		}
	}
	doc := readState(t, filepath.Join(out, "state.json"))
	wantState(t, doc, map[string]any{"phase": "exited", "runner_exit_code": 3, "escalated": true,
		"active_children": 0, "adopted_children": 0, "termination_signal": nil})
	wantAtLeast(t, doc, map[string]int{"orphaned_children_total": 2, "reaped_orphans_total": 2})
	if !strings.Contains(res.stderr, "grace over: SIGKILL") {
		t.Errorf("-v does not show corral's own SIGKILL round: %q", res.stderr)
	}
}

// podman stop sends SIGTERM to corral, which forwards it: a runner that
// dies of it makes the container exit 143, without podman's SIGKILL.
func testPodmanStop143(t *testing.T, pe *engine) {
	name := pe.detached(t, "stop143", []string{"--entrypoint", imageCorral}, "-v", "--",
		"/bin/sh", "-c", "echo runner-ready; while :; do sleep 0.1; done")
	pe.waitLog(t, name, "runner-ready")
	if code := pe.stop(t, name); code != 143 {
		t.Errorf("want 143 (the runner died of SIGTERM), got %d:\n%s", code, pe.logs(t, name))
	}
}

// A runner that ignores SIGTERM is SIGKILLed by corral after --grace 2:
// 137, with podman's stop timeout far above, so podman never kills.
func testPodmanStopGrace137(t *testing.T, pe *engine) {
	name := pe.detached(t, "grace137", []string{"--entrypoint", imageCorral}, "-v", "--grace", "2", "--",
		"/bin/sh", "-c", `trap "" TERM; echo runner-ready; while :; do sleep 0.1; done`)
	pe.waitLog(t, name, "runner-ready")
	code := pe.stop(t, name)
	logs := pe.logs(t, name)
	if code != 137 {
		t.Fatalf("want 137 (corral's SIGKILL after its grace), got %d:\n%s", code, logs)
	}
	if !strings.Contains(logs, "grace over: SIGKILL") {
		t.Errorf("-v does not show corral's own escalation:\n%s", logs)
	}
}

// Issue 20 point 4: -v prints one summary line for the processes that
// joined the tree during the grace (each `sleep 0.1` of a runner ignoring
// SIGTERM is one), not one per fork; the cgroup line once after auto's
// fallback; and in pidns with a user namespace the mode before the
// runner's pid.
func testPodmanVerboseLines(t *testing.T, pe *engine) {
	res := pe.corral(t, "vlines", nil, "-v", "--grace", "1", "--", "/bin/sh", "-c",
		`trap "" TERM; (sleep 0.3; kill -TERM 1) & while :; do sleep 0.1; done`)
	if res.code != 137 {
		t.Fatalf("want 137: %v", res)
	}
	if n := strings.Count(res.stderr, "that joined the tree"); n > 1 {
		t.Errorf("-v prints %d lines for processes that joined the tree, want one summary:\n%s", n, res.stderr)
	}
	if n := strings.Count(res.stderr, "corral: cgroup:"); n > 1 {
		t.Errorf("-v prints the cgroup line %d times:\n%s", n, res.stderr)
	}
	pidns := pe.corral(t, "vorder", []string{"--security-opt", "unmask=ALL"}, "-v", "--", "/bin/true")
	wantModeBeforePid(t, pidns.stderr)
}

// wantModeBeforePid checks that -v names pidns before the runner's pid.
func wantModeBeforePid(t *testing.T, stderr string) {
	t.Helper()
	mode, started := strings.Index(stderr, "mode pidns"), strings.Index(stderr, "runner started as pid")
	if mode < 0 || started < 0 || started < mode {
		t.Errorf("-v does not say mode pidns before the runner's pid: %q", stderr)
	}
}

// The image's ENTRYPOINT (deploy/Dockerfile's) with podman's default stop
// timeout: corral's grace must end below it, so a runner that ignores
// SIGTERM is SIGKILLed by corral (137, the final state written), not by
// podman (issue 20 point 6).
func testPodmanStopDockerfileGrace(t *testing.T, pe *engine) {
	state := pe.hostDir(t, "dfgrace")
	name := pe.detached(t, "dfgrace", []string{"--env", "CORRAL_VERBOSE=1", "--env", "CORRAL_STATE_PATH=/out/state.json",
		"--volume", state + ":/out"},
		"/bin/sh", "-c", `trap "" TERM; echo runner-ready; while :; do sleep 0.1; done`)
	timeout := strings.TrimSpace(pe.must(t, "inspect", "--format", "{{.Config.StopTimeout}}", name))
	pe.waitLog(t, name, "runner-ready")
	if code := pe.stop(t, name, "--time", timeout); code != 137 {
		t.Errorf("want 137 from corral's own SIGKILL within podman's stop timeout %s s, got %d:\n%s", timeout, code, pe.logs(t, name))
	}
	doc := readState(t, filepath.Join(state, "state.json"))
	wantState(t, doc, map[string]any{"phase": "exited", "escalated": true, "termination_signal": 15, "runner_exit_code": 137})
}

// podman kill -s HUP reaches the runner, and the run goes on; podman stop
// then ends it through the runner's own SIGTERM handler.
func testPodmanHUP(t *testing.T, pe *engine) {
	name := pe.detached(t, "hup", []string{"--entrypoint", imageCorral}, "-v", "--", imageRunner)
	pe.waitLog(t, name, "runner: up")
	pe.must(t, "kill", "--signal", "HUP", name)
	pe.waitLog(t, name, "runner: got SIGHUP")
	if running := strings.TrimSpace(pe.must(t, "inspect", "--format", "{{.State.Running}}", name)); running != "true" {
		t.Fatalf("SIGHUP ended the run (running %s):\n%s", running, pe.logs(t, name))
	}
	if code := pe.stop(t, name); code != 0 {
		t.Errorf("want 0 (the runner exits 0 on SIGTERM), got %d:\n%s", code, pe.logs(t, name))
	}
	if logs := pe.logs(t, name); !strings.Contains(logs, "runner: got SIGTERM") {
		t.Errorf("the runner never got SIGTERM:\n%s", logs)
	}
}

// An explicit --mode pidns that podman's masked /proc cannot honour is a
// 125 naming the step and the cause, and the runner never starts.
func testPodmanPidnsRefused(t *testing.T, pe *engine) {
	res := pe.corral(t, "pidns", nil, "--mode", "pidns", "--", "/bin/sh", "-c", "echo started")
	if res.code != 125 {
		t.Fatalf("want 125: %v", res)
	}
	if strings.Contains(res.stdout, "started") {
		t.Error("the runner ran")
	}
	for _, want := range []string{"corral:", "mount proc", "EPERM", "overmounted"} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("the refusal lacks %q: %q", want, res.stderr)
		}
	}
}

// pidnsScript prints what the runner holds: its capability sets, its
// /proc's mounts, and whether /proc/sys takes a write.
const pidnsScript = `grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status
echo mountinfo-start
cat /proc/self/mountinfo
echo mountinfo-end
if echo x 2>/dev/null > /proc/sys/kernel/domainname; then echo procsys=writable; else echo procsys=refused; fi`

// With CAP_SYS_ADMIN, or with podman's /proc masks lifted, auto picks
// pidns; the runner still gets /proc/sys read-only and no capabilities.
func testPodmanPidns(t *testing.T, pe *engine, flags ...string) {
	r, _, _ := pe.probe(t, "pidns-probe", flags...)
	if r.AutoMode != "pidns" {
		t.Errorf("probe with %v: auto_mode %q, want pidns: %q", flags, r.AutoMode, r.Reason)
	}
	res := pe.corral(t, "pidns-run", flags, "-v", "--", "/bin/sh", "-c", pidnsScript)
	if res.code != 0 {
		t.Fatalf("%v", res)
	}
	if !strings.Contains(res.stderr, "mode pidns") {
		t.Errorf("-v does not say mode pidns: %q", res.stderr)
	}
	for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
		if !regexp.MustCompile(`(?m)^` + set + `:\s+0+$`).MatchString(res.stdout) {
			t.Errorf("the runner holds capabilities in %s: %q", set, res.stdout)
		}
	}
	if !regexp.MustCompile(`(?m)^NoNewPrivs:\s+1$`).MatchString(res.stdout) {
		t.Errorf("no_new_privs is not set for the runner: %q", res.stdout)
	}
	_, rest, _ := strings.Cut(res.stdout, "mountinfo-start\n")
	mountinfo, _, _ := strings.Cut(rest, "mountinfo-end")
	mounts := procMounts(t, mountinfo)
	if m, ok := mounts["/proc/sys"]; !ok || !readOnly(m) {
		t.Errorf("/proc/sys is not read-only for the runner (%+v, present %v)", m, ok)
	}
	if !strings.Contains(res.stdout, "procsys=refused") {
		t.Errorf("the runner could write /proc/sys: %q", res.stdout)
	}
}

// listenersScript is the entrypoint for the network cases: two one-line
// servers on the container's loopback (outside corral's policy: they are
// started before corral), then corral with the given options in front of
// the runner in $1.
const listenersScript = `nc -ll -p 8081 -e /bin/echo hello-8081 &
nc -ll -p 8082 -e /bin/echo hello-8082 &
i=0
until nc 127.0.0.1 8081 </dev/null >/dev/null 2>&1 && nc 127.0.0.1 8082 </dev/null >/dev/null 2>&1; do
	i=$((i+1)); [ $i -gt 750 ] && { echo "listeners never came up" >&2; exit 99; }
	sleep 0.02
done
runner=$1; shift
exec /usr/local/bin/corral "$@" -- /bin/sh -c "$runner"`

// netRun runs corral with opts in front of runner, beside the listeners.
func (pe *engine) netRun(t *testing.T, label, runner string, opts ...string) podResult {
	t.Helper()
	return pe.runContainer(t, label, []string{"--entrypoint", "/bin/sh"},
		append([]string{"-c", listenersScript, "sh", runner}, opts...)...)
}

// --net none works in the container's own mode (subreaper, podman's
// /proc being masked): every socket but AF_UNIX and AF_NETLINK is refused
// with EACCES, so the runner cannot reach the server next to it. Waits on
// issue 18 (network policy in subreaper mode) and issue 20 point 3 (auto
// no longer insists on pidns for it).
func testPodmanNetNone(t *testing.T, pe *engine) {
	const runner = `nc 127.0.0.1 8081 </dev/null; echo "nc=$?"`
	control := pe.netRun(t, "net-control", runner, "-v")
	if control.code != 0 || !strings.Contains(control.stdout, "hello-8081") {
		t.Fatalf("without --net none the runner must reach the server: %v", control)
	}
	res := pe.netRun(t, "net-none", runner, "-v", "--net", "none")
	if res.code != 0 {
		t.Fatalf("want the runner's status 0 (the container's own mode enforces --net none): %v", res)
	}
	if !strings.Contains(res.stderr, "mode subreaper") {
		t.Errorf("-v does not say mode subreaper: %q", res.stderr)
	}
	if strings.Contains(res.stdout, "hello-8081") || strings.Contains(res.stdout, "nc=0") {
		t.Errorf("the runner reached the network under --net none: %v", res)
	}
	if !strings.Contains(res.stdout+res.stderr, "Permission denied") {
		t.Errorf("want EACCES (Permission denied) for the runner's socket: %v", res)
	}
}

// unixSocketsScript serves a Unix socket in the container outside
// corral's tree (as a host's daemon would be: a docker.sock, a session
// bus), then runs corral --net none in front of netprobe (bind-mounted at
// /np), which connects to it and to a socket it binds itself.
const unixSocketsScript = `mkdir -p /tmp/own
/np unix-listen /tmp/host.sock /tmp/ready &
i=0; while [ ! -e /tmp/ready ] && [ $i -lt 1500 ]; do sleep 0.01; i=$((i+1)); done
/usr/local/bin/corral --net none -- /np unix /tmp/host.sock unix-self /tmp/own/own.sock
echo "corral=$?"`

// --net none under podman's default seccomp profile (SPEC.md Network
// policy, Unix sockets): the Unix socket served outside corral's tree is
// refused with EACCES and the one the runner's tree binds works; or,
// where the profile refuses what the checker needs (user notification,
// pidfd_getfd, process_vm_readv), corral fails closed with 125 naming
// what is missing and the runner never starts. Exactly those two
// outcomes; the log says which happened.
func testPodmanUnixSockets(t *testing.T, pe *engine) {
	res := pe.runContainer(t, "unix-sockets", []string{"--entrypoint", "/bin/sh", "-v", netprobeBin + ":/np:ro"}, "-c", unixSocketsScript)
	if res.code != 0 {
		t.Fatalf("want the script's status 0: %v", res)
	}
	switch {
	case strings.Contains(res.stdout, "corral=0"):
		steps := probeLines(res.stdout)
		wantStep(t, steps, "unix /tmp/host.sock", "error: connect: EACCES", "a Unix socket outside corral's tree, under podman's seccomp profile")
		wantStep(t, steps, "unix-self /tmp/own/own.sock", "ok", "a Unix socket the runner's tree bound, under podman's seccomp profile")
		t.Logf("%s: under podman's default seccomp profile corral ran the runner with the socket checker (outcome: checked)", pe.name)
	case strings.Contains(res.stdout, "corral=125"):
		missing := regexp.MustCompile(`not available here: ((seccomp user notification|pidfd_getfd|process_vm_readv)[^\n]*)`).FindStringSubmatch(res.stderr)
		if missing == nil {
			t.Fatalf("corral exited 125 without naming what the checker lacks (user notification, pidfd_getfd, process_vm_readv): %v", res)
		}
		if strings.Contains(res.stdout, "unix /tmp/host.sock=") {
			t.Errorf("corral exited 125 but the runner ran: %v", res)
		}
		t.Logf("%s: podman's default seccomp profile refuses what the socket checker needs (outcome: 125): %s", pe.name, missing[1])
	default:
		t.Fatalf("want corral to run the checked runner (0) or to fail closed (125): %v", res)
	}
}

// allowNetRunner asks corral's proxy (HTTP_PROXY, with the run's
// credentials: USER:PASS@HOST:PORT) for CONNECT to 8081 (allowed) and 8082
// (not), then tries 8081 directly, around the proxy.
const allowNetRunner = `hp=${HTTP_PROXY#http://}; hp=${hp%/}
cred=${hp%@*}; hp=${hp##*@}
auth=$(printf %s "$cred" | base64 | tr -d '\n')
echo "proxy=$hp"
for port in 8081 8082; do
	echo "== via proxy to $port"
	(printf 'CONNECT 127.0.0.1:%s HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nProxy-Authorization: Basic %s\r\n\r\n' $port $port "$auth"; sleep 1) | nc -w 5 "${hp%:*}" "${hp##*:}"
done
echo "== direct to 8081"
nc 127.0.0.1 8081 </dev/null 2>&1; echo "direct=$?"
echo "== direct to 8082"
nc 127.0.0.1 8082 </dev/null 2>&1; echo "direct=$?"`

// --allow-net in the container's own mode: the runner reaches an allowed
// destination through corral's proxy, is refused (403) another, reaches
// the allowed address directly too (an IP entry: the checker connects the
// runner's own socket, issue 34), and cannot go around the policy to
// another (seccomp + Landlock refuse the direct connect). Waits on issue
// 18 and issue 20 point 3.
func testPodmanAllowNet(t *testing.T, pe *engine) {
	res := pe.netRun(t, "allow-net", allowNetRunner, "-v", "--allow-net", "127.0.0.1:8081")
	if res.code != 0 {
		t.Fatalf("want the runner's status 0: %v", res)
	}
	if !strings.Contains(res.stderr, "mode subreaper") {
		t.Errorf("-v does not say mode subreaper: %q", res.stderr)
	}
	_, via8081, _ := strings.Cut(res.stdout, "== via proxy to 8081")
	via8081, via8082, _ := strings.Cut(via8081, "== via proxy to 8082")
	via8082, direct, _ := strings.Cut(via8082, "== direct to 8081")
	direct, direct8082, _ := strings.Cut(direct, "== direct to 8082")
	if !strings.Contains(via8081, " 200") || !strings.Contains(via8081, "hello-8081") {
		t.Errorf("the allowed destination was not reached through the proxy: %q (all: %v)", via8081, res)
	}
	if !strings.Contains(via8082, " 403") || strings.Contains(via8082, "hello-8082") {
		t.Errorf("the destination not allowed was not refused with 403: %q (all: %v)", via8082, res)
	}
	if !strings.Contains(direct, "hello-8081") {
		t.Errorf("the allowed address was not reached directly (an IP entry): %q", direct)
	}
	if strings.Contains(direct8082, "hello-8082") || !strings.Contains(direct8082, "Permission denied") {
		t.Errorf("the runner went around the policy, or was not refused with EACCES: %q", direct8082)
	}
	if !strings.Contains(res.stderr, "corral: network: denied 127.0.0.1:8082") {
		t.Errorf("stderr does not name the refused destination: %q", res.stderr)
	}
}

// The state file on a named volume is readable from the host once the
// container is gone, owned by the uid the container's root maps to.
func testPodmanStateOnVolume(t *testing.T, pe *engine) {
	vol := fmt.Sprintf("corral-et-%s-state", pe.run)
	t.Cleanup(func() { pe.podman(t, "volume", "rm", "--force", vol) })
	pe.must(t, "volume", "create", vol)
	res := pe.corral(t, "state", []string{"--volume", vol + ":/state"}, "--state", "/state/state.json", "--",
		"/bin/sh", "-c", "(sleep 1000 &); exit 4")
	if res.code != 4 {
		t.Fatalf("want 4: %v", res)
	}
	mountpoint := strings.TrimSpace(pe.must(t, "volume", "inspect", "--format", "{{.Mountpoint}}", vol))
	path := filepath.Join(mountpoint, "state.json")
	doc := readState(t, path)
	wantState(t, doc, map[string]any{"phase": "exited", "runner_exit_code": 4, "active_children": 0})
	wantAtLeast(t, doc, map[string]int{"reaped_orphans_total": 1})
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	owner := int(fi.Sys().(*syscall.Stat_t).Uid)
	if want := pe.uid; owner != want || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file on the host: owner %d mode %v, want owner %d (the container's root) mode 0600", owner, fi.Mode().Perm(), want)
	}
}

// Issue 20 point 1: under `podman run --init` corral's parent is catatonit,
// a live PID 1: --die-with-parent watches it and the runner runs normally.
func testPodmanDieWithParentInit(t *testing.T, pe *engine) {
	res := pe.corral(t, "dwp", []string{"--init"}, "-v", "--die-with-parent", "--", "/bin/sh", "-c", "sleep 1; echo hi; exit 5")
	if res.code != 5 || !strings.Contains(res.stdout, "hi") {
		t.Errorf("want the runner to run and exit 5: %v", res)
	}
}

// kubeManifest is the Deployment kube play gets: a copy of
// deploy/deployment.yaml under names of this run, so that no two runs
// (nor a dead run's leftovers) meet on a pod, volume or image name, and
// listening on a port free at run time instead of the manifest's 8080.
// Its Deployment is named after the run (its pods take that name), its
// emptyDir volume too, and its image is the test's. Rootless, the copy
// also lacks what rootless podman on cgroup v1 cannot do (resource limits
// need a cgroup it cannot create; ports need a network, and rootless runs
// here have none).
type kubeManifest struct {
	path   string // the copy kube play and kube down get
	name   string // the Deployment's: every pod of it starts with name + "-"
	volume string // the emptyDir holding corral's state, or ""
	port   int    // the runner's --listen port, and the containerPort
	spec   deployment
}

func (pe *engine) kubeManifest(t *testing.T) kubeManifest {
	t.Helper()
	km := kubeManifest{name: fmt.Sprintf("corral-et-%s-kube", pe.run), port: freePort(t, "")}
	var doc map[string]any
	if err := yaml.Unmarshal(deployFile(t, "deployment.yaml"), &doc); err != nil {
		t.Fatal(err)
	}
	doc["metadata"].(map[string]any)["name"] = km.name
	spec := doc["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	renamed := map[string]string{}
	for _, v := range spec["volumes"].([]any) {
		v := v.(map[string]any)
		if _, ok := v["emptyDir"]; ok {
			old := v["name"].(string)
			km.volume = km.name + "-" + old
			renamed[old] = km.volume
			v["name"] = km.volume
		}
	}
	for _, c := range spec["containers"].([]any) {
		c := c.(map[string]any)
		c["image"] = pe.image
		for _, m := range c["volumeMounts"].([]any) {
			m := m.(map[string]any)
			if n, ok := renamed[m["name"].(string)]; ok {
				m["name"] = n
			}
		}
		// The runner's --listen :PORT, and the containerPort (and
		// hostPort, if the manifest had one) that names it.
		args := c["args"].([]any)
		listen := ""
		for i := range args[:len(args)-1] {
			if args[i] == "--listen" {
				listen = strings.TrimPrefix(args[i+1].(string), ":")
				args[i+1] = fmt.Sprintf(":%d", km.port)
			}
		}
		if listen == "" {
			t.Fatalf("deploy/deployment.yaml: the runner's args %q have no --listen", args)
		}
		ports, _ := c["ports"].([]any)
		for _, p := range ports {
			p := p.(map[string]any)
			for _, key := range []string{"containerPort", "hostPort"} {
				if fmt.Sprint(p[key]) == listen {
					p[key] = km.port
				}
			}
		}
		if pe.rootless {
			delete(c, "resources")
			delete(c, "ports")
		}
	}
	data, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &km.spec); err != nil {
		t.Fatal(err)
	}
	km.path = filepath.Join(pe.dir, "deployment-"+pe.name+".yaml")
	if err := os.WriteFile(km.path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return km
}

// removeKube removes what kube play of km made, whatever state it is in
// (kube down, then each pod and volume by the names km gave them).
func (pe *engine) removeKube(t *testing.T, km kubeManifest) {
	t.Helper()
	pe.podman(t, "kube", "down", km.path)
	for _, name := range strings.Fields(pe.podman(t, "pod", "ls", "--format", "{{.Name}}").stdout) {
		if strings.HasPrefix(name, km.name+"-") {
			pe.podman(t, "pod", "rm", "--force", "--ignore", "--time", "0", name)
		}
	}
	if km.volume != "" {
		pe.podman(t, "volume", "rm", "--force", km.volume)
	}
}

// kube play of deploy/ runs corral as PID 1 of the pod's container in front
// of the runner; pod stop reaches the runner as SIGTERM through corral,
// whose grace ends below podman's stop timeout; the state file on the
// emptyDir says how it ended; kube down leaves nothing.
func testPodmanKubePlay(t *testing.T, pe *engine) {
	km := pe.kubeManifest(t)
	c := km.spec.Spec.Template.Spec.Containers[0]
	// kube play builds podman's pause image for the pod's infra container
	// when the storage has none: the test removes it only if it made it.
	pauseImages := func() []string {
		var out []string
		for _, ref := range strings.Fields(pe.must(t, "images", "--format", "{{.Repository}}:{{.Tag}}")) {
			if strings.HasPrefix(ref, "localhost/podman-pause:") {
				out = append(out, ref)
			}
		}
		return out
	}
	pauseBefore := pauseImages()
	if len(pauseBefore) == 0 && !pe.rootless {
		// If this process dies before its cleanup, the next run removes
		// the pause image kube play is about to make.
		if err := os.WriteFile(pausePath(pe.run), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	volumesBefore := strings.Fields(pe.must(t, "volume", "ls", "--quiet"))
	t.Cleanup(func() {
		for _, ref := range pauseImages() {
			if !slices.Contains(pauseBefore, ref) {
				pe.podman(t, "rmi", ref)
			}
		}
	})
	// Registered before kube play: a play that fails half-way, or a step
	// after it that fails, leaves nothing either.
	t.Cleanup(func() { pe.removeKube(t, km) })

	play := []string{"kube", "play"}
	if pe.rootless {
		play = append(play, "--network", "none")
	}
	out := pe.must(t, append(play, km.path)...)
	podID := ""
	if _, rest, ok := strings.Cut(out, "Pod:\n"); ok {
		podID, _, _ = strings.Cut(rest, "\n")
	}
	if podID == "" {
		t.Fatalf("kube play named no pod: %q", out)
	}
	var name string
	for _, n := range strings.Fields(pe.must(t, "pod", "inspect", "--format", "{{range .Containers}}{{.Name}} {{end}}", podID)) {
		if strings.HasSuffix(n, "-"+c.Name) {
			name = n
		}
	}
	if name == "" {
		t.Fatalf("pod %s has no container %s", podID, c.Name)
	}
	if os.Getenv("CORRAL_TEST_KUBE_FAIL") == "after-play" {
		// For proving the cleanup: fail (or hang, for a SIGKILL from
		// outside) with the pod and its volume in place.
		t.Fatalf("CORRAL_TEST_KUBE_FAIL=after-play: failing with pod %s up", podID)
	}
	if os.Getenv("CORRAL_TEST_KUBE_FAIL") == "hang-after-play" {
		t.Logf("CORRAL_TEST_KUBE_FAIL=hang-after-play: pod %s up, waiting to be killed", podID)
		select {}
	}
	pe.waitLog(t, name, "runner: up: "+strings.Join(c.Args[1:], " "))

	// corral is PID 1 of the container, as the manifest's uid, and says
	// why it runs the subreaper mode.
	probe := pe.podman(t, "exec", name, imageCorral, "probe", "--json")
	r, _, _ := parseProbe(t, result{code: probe.code, stdout: probe.stdout, stderr: probe.stderr})
	if r.AutoMode != "subreaper" || !strings.Contains(r.Reason, "/proc") {
		t.Errorf("probe in the pod: auto_mode %q reason %q, want subreaper because of the masked /proc", r.AutoMode, r.Reason)
	}
	if r.UID != 65532 {
		t.Errorf("probe in the pod runs as uid %d, want the manifest's 65532", r.UID)
	}
	if comm := pe.must(t, "exec", name, "cat", "/proc/1/comm"); strings.TrimSpace(comm) != "corral" {
		t.Errorf("PID 1 of the pod's container is %q, not corral", comm)
	}
	if got := pe.podman(t, "exec", name, "nc", "127.0.0.1", strconv.Itoa(km.port)); !strings.Contains(got.stdout, "hello from the runner") {
		t.Errorf("the runner's listener on %d does not answer: %v", km.port, got)
	}
	// corral's grace ends below the stop timeout podman gives the
	// container (kube play ignores terminationGracePeriodSeconds).
	timeout, err := strconv.Atoi(strings.TrimSpace(pe.must(t, "inspect", "--format", "{{.Config.StopTimeout}}", name)))
	if err != nil {
		t.Fatal(err)
	}
	grace := 10.0
	if i := slices.Index(c.Command, "--grace"); i >= 0 {
		grace, _ = strconv.ParseFloat(c.Command[i+1], 64)
	}
	if grace >= float64(timeout) {
		t.Errorf("the manifest's --grace %v is not below podman's stop timeout %d s: podman's SIGKILL races corral's", grace, timeout)
	}

	stop := pe.podman(t, "pod", "stop", podID)
	if stop.code != 0 || strings.Contains(stop.stderr, "SIGKILL") {
		t.Errorf("pod stop: %v", stop)
	}
	logs := pe.logs(t, name)
	if !strings.Contains(logs, "runner: got SIGTERM") || !strings.Contains(logs, "corral: received SIGTERM") {
		t.Errorf("pod stop did not reach the runner as SIGTERM through corral:\n%s", logs)
	}
	if code := pe.exitCode(t, name); code != 0 {
		t.Errorf("want the runner's status 0, got %d:\n%s", code, logs)
	}
	if km.volume != "" {
		mountpoint := strings.TrimSpace(pe.must(t, "volume", "inspect", "--format", "{{.Mountpoint}}", km.volume))
		var statePath string
		if i := slices.Index(c.Command, "--state"); i >= 0 {
			statePath = c.Command[i+1]
		}
		doc := readState(t, filepath.Join(mountpoint, filepath.Base(statePath)))
		wantState(t, doc, map[string]any{"phase": "exited", "termination_signal": 15, "runner_exit_code": 0, "active_children": 0})
	}

	pe.must(t, "kube", "down", km.path)
	if pe.podman(t, "pod", "exists", podID).code == 0 {
		t.Errorf("kube down left pod %s", podID)
	}
	if pe.podman(t, "container", "exists", name).code == 0 {
		t.Errorf("kube down left container %s", name)
	}
	if left := pe.must(t, "ps", "--all", "--quiet", "--filter", "pod="+podID); strings.TrimSpace(left) != "" {
		t.Errorf("kube down left the pod's containers: %q", left)
	}
	for _, v := range strings.Fields(pe.must(t, "volume", "ls", "--quiet")) {
		// Other cases of this test, and other runs, make volumes of
		// their own meanwhile: theirs start with corral-et- too.
		if !slices.Contains(volumesBefore, v) && (!strings.HasPrefix(v, "corral-et-") || strings.HasPrefix(v, km.name)) {
			t.Errorf("kube down left volume %s", v)
		}
	}
}

// bwrapMode runs the bubblewrap cases as an unprivileged user.
var bwrapMode = mode{name: "bwrap", flag: "auto", rootless: true}

// bwrap runs bwrap with args as uid 65534, through the test's env.
func (e *env) bwrap(t *testing.T, args ...string) result {
	t.Helper()
	cmd := e.command(nil)
	cmd.Path = lookTool("bwrap")
	cmd.Args = append([]string{"bwrap"}, args...)
	return e.startCmd(cmd).wait(corralTimeout)
}

// bwrapRight is the usual order: / read-only, then a fresh /dev and /proc
// over it, and the test's directory writable.
func (e *env) bwrapRight() []string {
	return []string{"--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--bind", e.dir, e.dir, "--"}
}

// bwrapWrong mounts /proc first and then binds / read-only over it: the
// runner's /proc is the host's, read-only.
var bwrapWrong = []string{"--unshare-all", "--dev", "/dev", "--proc", "/proc", "--ro-bind", "/", "/", "--"}

func requireBwrap(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		missingFeature(t, "bubblewrap is not installed (apt-get install bubblewrap, as .ci/run does)")
	}
}

// corral nested in bubblewrap as an unprivileged user: with the usual
// mount order the probe and a run give pidns, the runner's exit status
// comes back, and a detached helper that ignores SIGTERM is gone.
func TestBubblewrapNesting(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	t.Run("probe", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, bwrapMode)
		r, _, _ := parseProbe(t, e.bwrap(t, append(e.bwrapRight(), corralBin, "probe", "--json")...))
		if r.AutoMode != "pidns" {
			t.Errorf("auto_mode %q, want pidns inside bwrap: %q", r.AutoMode, r.Reason)
		}
	})
	t.Run("run", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, bwrapMode)
		state := e.file("state.json")
		res := e.bwrap(t, append(e.bwrapRight(), append([]string{corralBin, "-v", "--grace", "0.5", "--poll", "0.05",
			"--state", state, "--"}, e.helper("spawn", "-setsid", "-code", "7", "--", "sleep", "-ignore-term")...)...)...)
		wantCode(t, res, 7)
		if !strings.Contains(res.stderr, "mode pidns") {
			t.Errorf("-v does not say mode pidns: %q", res.stderr)
		}
		doc := readState(t, state)
		wantState(t, doc, map[string]any{"phase": "exited", "runner_exit_code": 7, "escalated": true})
		e.assertGone()
	})
	// Issue 20 point 4: -v names the mode before the runner's pid.
	t.Run("verbose-order-issue20-p4", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, bwrapMode)
		res := e.bwrap(t, append(e.bwrapRight(), corralBin, "-v", "--", "/bin/true")...)
		wantCode(t, res, 0)
		wantModeBeforePid(t, res.stderr)
	})
	// Issue 20 point 1: bwrap's init is a live PID-1 parent. The runner
	// outlasts corral's first look at its parent, which a runner that
	// exits at once may win.
	t.Run("die-with-parent-issue20-p1", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, bwrapMode)
		res := e.bwrap(t, append(e.bwrapRight(), corralBin, "-v", "--die-with-parent", "--", "/bin/sh", "-c", "sleep 1; echo hi; exit 7")...)
		wantCode(t, res, 7)
		if !strings.Contains(res.stdout, "hi") {
			t.Errorf("the runner did not run: %v", res)
		}
	})
}

// Issue 20 point 2: where writing uid_map fails because /proc is not
// what corral needs — read-only, or another PID namespace's — the probe
// names that cause (and its fix), not "user namespaces are refused", and no
// sentence is cut off.
func TestProbeNamesAnUnusableProc(t *testing.T) {
	t.Parallel()
	cause := regexp.MustCompile(`(?i)/proc\b[^;]*(read-only|pid namespace)|read-only /proc\b`)
	check := func(t *testing.T, res result) {
		t.Helper()
		r, available, detail := parseProbe(t, res)
		if available["user namespaces"] {
			t.Fatalf("user namespaces available: the case did not happen: %v", res)
		}
		d := detail["user namespaces"]
		if strings.Contains(d, "are refused") || strings.HasSuffix(strings.TrimSpace(d), " may") {
			t.Errorf("the probe blames refused user namespaces (or stops mid-sentence): %q", d)
		}
		if !cause.MatchString(d) {
			t.Errorf("the probe does not name the /proc it found (%v): %q", cause, d)
		}
		if r.AutoMode != "pidns" && !cause.MatchString(r.Reason) {
			t.Errorf("auto_reason does not name the /proc it found (%v): %q", cause, r.Reason)
		}
	}
	// bwrap with /proc mounted before / is bound read-only over it: the
	// runner's /proc is the outer one, read-only.
	t.Run("bwrap-readonly-proc-issue20-p2", func(t *testing.T) {
		t.Parallel()
		requireBwrap(t)
		e := newEnv(t, bwrapMode)
		check(t, e.bwrap(t, append(bwrapWrong, corralBin, "probe", "--json")...))
	})
	// A run there: auto falls back to subreaper with that cause under -v,
	// and an explicit --mode pidns is a 125 naming it, not an errno of a
	// clone that the /proc, not the kernel, made fail.
	t.Run("bwrap-readonly-proc-run-issue20-p2", func(t *testing.T) {
		t.Parallel()
		requireBwrap(t)
		e := newEnv(t, bwrapMode)
		res := e.bwrap(t, append(bwrapWrong, corralBin, "-v", "--", "/bin/sh", "-c", "exit 4")...)
		wantCode(t, res, 4)
		const fix = "--proc /proc after --ro-bind / /"
		if !strings.Contains(res.stderr, "mode subreaper") || !cause.MatchString(res.stderr) || !strings.Contains(res.stderr, fix) {
			t.Errorf("-v does not name the /proc auto fell back for, and its fix: %q", res.stderr)
		}
		res = e.bwrap(t, append(bwrapWrong, corralBin, "--mode", "pidns", "--", "/bin/true")...)
		wantCode(t, res, 125)
		if !cause.MatchString(res.stderr) || !strings.Contains(res.stderr, fix) || strings.Contains(res.stderr, "are refused") {
			t.Errorf("--mode pidns: 125 does not name the /proc and its fix: %q", res.stderr)
		}
	})
	// unshare --pid --fork without --mount-proc: /proc is the outer PID
	// namespace's.
	t.Run("unshare-foreign-proc-issue20-p2", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, bwrapMode)
		cmd := e.command(nil)
		cmd.Path = lookTool("unshare")
		cmd.Args = []string{"unshare", "--user", "--map-root-user", "--pid", "--fork", "--", corralBin, "probe", "--json"}
		check(t, e.startCmd(cmd).wait(corralTimeout))
	})
}
