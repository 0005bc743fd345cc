package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// launcher is one row of every table.
type launcher struct {
	name    string // row label
	path    string // the launcher binary; "" runs the runner directly
	uid     int    // 0: as root; nobody: as uid 65534
	corral  string // corral's --mode, "" for the others
	ns      bool   // the kernel tears down a PID namespace when it ends
	args    []string
	missing string // why the row cannot run ("not installed", "unavailable: ...")

	// only names the one workload a reference or option row belongs to
	// ("launch", "reap", "idle"); "" for the rows of every workload.
	only string

	// An option row is corral with one opt-in beside its plain row (base),
	// in the launch workload only: what that option costs when used.
	option     string   // its name in the tables, e.g. "--net none"
	optionArgs []string // inserted before "--"
	base       *launcher
	// unsupported says why an option row was not measured: this corral
	// build does not know the option (usage error, 2) or refuses it here
	// (setup error, 125).
	unsupported string
}

// opts are corral's options for one run; peers have none.
type opts struct {
	grace string // --grace, "" for the default
	state string // --state path, "" for none
	poll  string // --poll, with state
}

// argv is the launcher's command line around runner.
func (l *launcher) argv(o opts, runner []string) []string {
	if l.path == "" {
		return runner
	}
	a := append([]string{l.path}, l.args...)
	if l.corral != "" {
		a = append(a, l.optionArgs...)
		if o.grace != "" {
			a = append(a, "--grace", o.grace)
		}
		if o.state != "" {
			a = append(a, "--state", o.state)
			if o.poll != "" {
				a = append(a, "--poll", o.poll)
			}
		}
		a = append(a, "--")
	}
	return append(a, runner...)
}

func (l *launcher) isCorral() bool { return l.corral != "" }

func (b *bench) defineLaunchers() []*launcher {
	ls := []*launcher{
		{name: "direct (no launcher)"},
		{name: "tini -s", path: "tini", args: []string{"-s", "--"}},
		{name: "dumb-init", path: "dumb-init"},
		{name: "catatonit", path: "catatonit", args: []string{"--"}},
		{name: "bwrap (uid 65534)", path: "bwrap", uid: nobody, ns: true,
			args: []string{"--unshare-user", "--unshare-pid", "--dev-bind", "/", "/", "--proc", "/proc"}},
		{name: "unshare (uid 65534)", path: "unshare", uid: nobody, ns: true,
			args: []string{"--user", "--map-root-user", "--pid", "--fork", "--mount-proc"}},
		// What any Go launcher pays before doing anything: a static Go
		// program that forks, execs and waits for its argument, nothing
		// else (the runner's "launch" command).
		{name: "minimal Go launcher (reference)", path: b.runner, args: []string{"launch"}, only: "launch"},
		// What any Go reaper pays per orphan: a static Go program, child
		// subreaper, blocked in wait4(-1) (the runner's "reaper" command).
		{name: "minimal Go reaper (reference)", path: b.runner, args: []string{"reaper"}, only: "reap"},
		// What any Go program pays to wake at --state's default --poll
		// (0.5 s) and do nothing: a time.Ticker beside a goroutine
		// blocked in wait4 (the runner's "ticker" command).
		{name: "minimal Go ticker, 2 per s (reference)", path: b.runner, args: []string{"ticker"}, only: "idle"},
	}
	if !b.peers {
		ls = ls[:1]
	}
	corrals := []struct{ name, path string }{{"corral", b.corral}}
	for _, v := range variants {
		corrals = append(corrals, struct{ name, path string }{"corral " + v.name, v.path})
	}
	want := func(mode string) bool {
		if b.modes == "" {
			return true
		}
		for _, m := range strings.Split(b.modes, ",") {
			if strings.TrimSpace(m) == mode {
				return true
			}
		}
		return false
	}
	for _, c := range corrals {
		if want("subreaper") {
			ls = append(ls, &launcher{name: c.name + " subreaper (root)", path: c.path, corral: "subreaper", args: []string{"--mode", "subreaper"}})
		}
		if want("pidns") {
			ls = append(ls, &launcher{name: c.name + " pidns (root)", path: c.path, corral: "pidns", ns: true, args: []string{"--mode", "pidns"}})
		}
		if want("pidns-rootless") {
			ls = append(ls, &launcher{name: c.name + " pidns (uid 65534)", path: c.path, corral: "pidns", ns: true, uid: nobody, args: []string{"--mode", "pidns"}})
		}
	}
	ls = append(ls, b.optionRows(ls)...)
	for _, l := range ls {
		if l.path != "" && !filepath.IsAbs(l.path) {
			p, err := exec.LookPath(l.path)
			if err != nil || slices.Contains(strings.Split(b.pretendMissing, ","), l.path) {
				l.missing = "not installed"
				b.problem("%s is not installed: install the package %q (Debian/Ubuntu: apt-get install %s), or run with -peers=false to measure corral alone",
					l.path, peerPackages[l.path], peerPackages[l.path])
				continue
			}
			l.path = p
		}
		if l.uid != 0 && os.Geteuid() != 0 {
			l.missing = "skipped: needs the benchmark to run as root to switch to uid 65534"
		}
	}
	return ls
}

// peerPackages name the Debian/Ubuntu package of each peer, for the
// message that fails the benchmark when one is missing.
var peerPackages = map[string]string{
	"tini": "tini", "dumb-init": "dumb-init", "catatonit": "catatonit", "bwrap": "bubblewrap",
	"unshare": "util-linux", "strace": "strace",
}

// launchOptions are the opt-ins the launch workload measures against the
// plain run of each corral mode (issue 19: each opt-in costs only when
// used). Paths under the benchmark's directory are filled in by
// optionRows.
var launchOptions = []struct {
	key, name string
	args      func(b *bench, l *launcher) []string
}{
	{"net-none", "--net none", func(*bench, *launcher) []string { return []string{"--net", "none"} }},
	// A documentation address (RFC 5737): the run never connects to it.
	{"allow-net", "--allow-net", func(*bench, *launcher) []string { return []string{"--allow-net", "192.0.2.1:443"} }},
	{"writable", "--writable DIR", func(b *bench, _ *launcher) []string { return []string{"--writable", b.writableDir} }},
	{"timeout", "--timeout 60", func(*bench, *launcher) []string { return []string{"--timeout", "60"} }},
	{"state", "--state FILE", func(b *bench, l *launcher) []string {
		name := strings.NewReplacer(" ", "-", "(", "", ")", "").Replace(l.name)
		return []string{"--state", filepath.Join(b.stateDir, "launch-"+name+".json")}
	}},
}

// optionRows are one row per launch option and plain corral row.
func (b *bench) optionRows(ls []*launcher) []*launcher {
	var out []*launcher
	for _, opt := range launchOptions {
		if !b.wantOption(opt.key) {
			continue
		}
		for _, l := range ls {
			if !l.isCorral() || l.option != "" {
				continue
			}
			r := *l
			r.name = l.name + " " + opt.name
			r.option, r.base, r.only = opt.name, l, "launch"
			r.optionArgs = opt.args(b, l)
			out = append(out, &r)
		}
	}
	return out
}

func (b *bench) wantOption(key string) bool {
	for _, o := range strings.Split(b.options, ",") {
		if strings.TrimSpace(o) == key {
			return true
		}
	}
	return false
}

// probe runs every launcher once with /bin/true; one that fails is shown
// as unavailable, with the reason. A corral mode that cannot run is a
// problem under CI=true (as in the test suite), a note elsewhere.
func (b *bench) probe() {
	for _, l := range b.launchers {
		if l.missing != "" {
			continue
		}
		info, out, err := b.capture(l.argv(opts{}, []string{"/bin/true"}), l.uid, 30*time.Second)
		if err == nil && info.status.Exited() && info.status.ExitStatus() == 0 {
			continue
		}
		reason := strings.TrimSpace(out)
		if i := strings.IndexByte(reason, '\n'); i >= 0 {
			reason = reason[:i]
		}
		if err != nil {
			reason = err.Error()
		}
		if l.option != "" && err == nil && info.status.Exited() && (info.status.ExitStatus() == 2 || info.status.ExitStatus() == 125) {
			// Not yet in this build (a usage error), or refused in this
			// mode or on this machine (a setup error): reported in the
			// table, never measured, not a failure. Anything else an
			// option does (a crash, another status) is.
			l.unsupported = fmt.Sprintf("%s (status %d)", reason, info.status.ExitStatus())
			l.missing = "unsupported: " + l.unsupported
			continue
		}
		l.missing = fmt.Sprintf("unavailable: %s (status %v)", reason, describeStatus(info.status))
		switch {
		case l.isCorral() && (b.ci || !strings.Contains(reason, "namespace")):
			b.problem("%s cannot run /bin/true: %s", l.name, l.missing)
		case !l.isCorral() && l.path != "" && l.path != b.runner:
			// A peer that is installed but cannot run here (bwrap without
			// unprivileged user namespaces) leaves its ratio unmeasured.
			b.problem("peer %s cannot run /bin/true here: %s", l.name, l.missing)
		}
	}
}

// available are the launchers that run on this machine, without the
// launch-only references.
func (b *bench) available() []*launcher {
	var out []*launcher
	for _, l := range b.launchers {
		if l.missing == "" && l.only == "" {
			out = append(out, l)
		}
	}
	return out
}

// rows are the launchers every table but launch's shows.
func (b *bench) rows() []*launcher {
	var out []*launcher
	for _, l := range b.launchers {
		if l.only == "" {
			out = append(out, l)
		}
	}
	return out
}

// refs are the reference rows of one workload.
func (b *bench) refs(workload string) []*launcher {
	var out []*launcher
	for _, l := range b.launchers {
		if l.only == workload && l.option == "" {
			out = append(out, l)
		}
	}
	return out
}

func (b *bench) find(name string) *launcher {
	for _, l := range b.launchers {
		if l.name == name {
			return l
		}
	}
	return nil
}

func describeStatus(ws interface {
	Exited() bool
	ExitStatus() int
	Signaled() bool
}) string {
	switch {
	case ws.Exited():
		return fmt.Sprintf("exit %d", ws.ExitStatus())
	case ws.Signaled():
		return "killed by a signal"
	}
	return "?"
}
