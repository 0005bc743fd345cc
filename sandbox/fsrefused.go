package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/corral-sh/corral/sandbox/internal/egress"
	"github.com/corral-sh/corral/sandbox/internal/stage"
)

// Writes the engine's checker refused (a protected path, outside the
// writable paths, beneath --hide), in every mode (subreaper mode's
// checker makes the calls; the namespace modes' names what the mounts
// and Landlock refuse): named once per path on stderr, at most
// maxWritesNamed paths, then once that more were refused; each a line of
// the run's log; counted for the summary at the end (summary.go). SPEC,
// "Refusals are named".
const maxWritesNamed = 20

// maxGroups bounds the folders the summary counts by: past it, a refusal
// is counted in the total only. What corral keeps per runner action is
// capped (DESIGN.md, "Memory a runner can make corral hold").
const maxGroups = 256

// writesNamed are the refusals said and counted so far; one per run (held
// by the session every refusal reaches).
type writesNamed struct {
	sync.Mutex
	paths map[string]bool
	more  bool
	// total counts every refused write; groups counts them by the folder
	// a --writable would allow them with (or the file itself, summary.go).
	total  int
	groups map[group]int
	// mount: a sandbox that mounts was named (once a run).
	mount bool
}

// say names r on p's stderr the first time its path is refused, writes
// its log line, and counts it. hide are the run's --hide paths.
func (w *writesNamed) say(p *stage.Proc, log *egress.Log, hide []string, r stage.Refused) {
	path := escapePath(r.Path)
	log.FS(path, r.Call, r.Reason, p.Stderr)
	g := groupOf(r.Path, r.Reason, hide)
	w.Lock()
	if w.paths == nil {
		w.paths, w.groups = map[string]bool{}, map[group]int{}
	}
	w.total++
	if _, ok := w.groups[g]; ok || len(w.groups) < maxGroups {
		w.groups[g]++
	}
	say, more := false, false
	switch {
	case w.paths[r.Path]:
	case len(w.paths) < maxWritesNamed:
		w.paths[r.Path], say = true, true
	case !w.more:
		w.more, more = true, true
	}
	w.Unlock()
	if say {
		p.Warnf("sandbox: refused write to %s: %s", path, r.Reason)
	}
	if more {
		p.Warnf("sandbox: more writes refused than are named here (%d paths named)", maxWritesNamed)
	}
}

// mountTried names, once a run, a program that tried to mount (a nested
// sandbox: bubblewrap, codex's and Claude Code's own): Landlock refuses
// every mount under a filesystem rule, and the sandbox fails in words of
// its own ("Failed to make / slave", "setting up uid map").
func (w *writesNamed) mountTried(p *stage.Proc, r stage.Refused) {
	w.Lock()
	first := !w.mount
	w.mount = true
	w.Unlock()
	if first {
		p.Warnf("sandbox: %s tried to mount (a sandbox of its own, e.g. bubblewrap); mounts are refused under a filesystem rule; --net none or --allow-net alone lets it run",
			escapePath(r.Path))
	}
}

// escapePath keeps a path the runner chose from reaching a terminal or
// the log as control characters or invalid UTF-8.
func escapePath(p string) string {
	for _, r := range p {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			q := strconv.Quote(p)
			return q[1 : len(q)-1]
		}
	}
	if !utf8.ValidString(p) {
		q := strconv.Quote(p)
		return q[1 : len(q)-1]
	}
	return p
}

// group is where the summary counts a refused write: the narrowest
// folder that exists and that --writable would allow it with, the file
// itself where that folder is one corral never suggests, or the --hide
// path it lies beneath.
type group struct {
	path      string
	hide      bool
	protected bool // a protected path, by itself
}

// groupOf finds path's group on the host (what the runner saw is the
// same tree, less what it made).
func groupOf(path, reason string, hide []string) group {
	if strings.HasPrefix(reason, "a protected path") {
		// No --writable of a folder allows it: only one naming the
		// protected path itself (summary.go says so).
		return group{path: path, protected: true}
	}
	for _, h := range hide {
		if real, err := filepath.EvalSymlinks(h); err == nil {
			h = real // as the checker names the path
		}
		if h == "/" || path == h || strings.HasPrefix(path, strings.TrimSuffix(h, "/")+"/") {
			return group{path: h, hide: true}
		}
	}
	dir := filepath.Dir(path)
	for dir != "/" {
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			break
		}
		dir = filepath.Dir(dir)
	}
	if tooBroad(dir) {
		return group{path: path}
	}
	return group{path: dir}
}

// tooBroad: a folder whose whole --writable would give away far more
// than the write asked for (SPEC: never /, $HOME itself, /proc, /sys,
// /dev, /etc).
func tooBroad(dir string) bool {
	switch dir {
	case "/", "/etc", "/proc", "/sys", "/dev":
		return true
	}
	for _, d := range []string{"/proc/", "/sys/", "/dev/"} {
		if strings.HasPrefix(dir, d) {
			return true
		}
	}
	home := os.Getenv("HOME")
	return home != "" && filepath.Clean(home) == dir
}
