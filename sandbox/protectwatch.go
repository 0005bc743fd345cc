package sandbox

// What the run creates at an absent protected name, moved aside as it
// appears (namespace modes).
//
// A protected name that exists when the run starts is a read-only mount in
// the runner's view (runner/protect.go). One that does not exist cannot
// be: a mount needs a file to sit on, and a placeholder made in the
// caller's folder would be in the runner's view too (`git add -A` would
// commit it) and left behind by a corral that is killed. So the host side
// watches the folders those names would appear in (inotify: the parent of
// each, and the folders above it up to the writable path, so a folder
// renamed into place is seen too) and moves aside whatever appears at one
// of them, the moment it appears — while the run goes on, so a planted
// hook is not there for the user's own `git commit` in another terminal —
// and once more when the run ends (quarantine), which also covers an
// overflowed event queue. What is moved aside is named on stderr.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/corral-sh/corral/sandbox/internal/plan"
	"github.com/corral-sh/corral/sandbox/internal/stage"
	"golang.org/x/sys/unix"
)

// maxNamedAside caps the stderr lines of moved-aside names: each is named
// once, and a runner that recreates one in a loop gets a count at the
// end, not a flood.
const maxNamedAside = 20

// absentProtected are the protected paths beneath a writable one that do
// not exist when the run starts, and the matches of each pattern that do.
type absentProtected struct {
	paths    []string            // protected names that did not exist
	patterns map[string][]string // pattern → what matched at the start
	writable []string            // the writable paths, canonical: how far up to watch

	mu    sync.Mutex // one sweep at a time: the watcher's, then the last
	named map[string]bool
	more  int // moved aside past maxNamedAside
}

func findAbsent(pr plan.Protection) *absentProtected {
	a := &absentProtected{patterns: map[string][]string{}, writable: pr.Writable, named: map[string]bool{}}
	for _, p := range pr.Paths {
		if _, err := os.Lstat(p); os.IsNotExist(err) {
			a.paths = append(a.paths, p)
		}
	}
	for _, pat := range pr.Patterns {
		m, _ := filepath.Glob(pat)
		a.patterns[pat] = m
	}
	return a
}

// sweep moves aside each protected name that did not exist at the start
// and exists now: renamed to NAME.corral-refused (a free name beside it),
// which no tool runs or reads (git runs hooks by their exact names;
// direnv reads .envrc; editors read settings.json, tasks.json). Nothing
// is deleted: the user can look at what the run tried to plant.
func (a *absentProtected) sweep(p *stage.Proc) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var created []string
	for _, path := range a.paths {
		if _, err := os.Lstat(path); err == nil {
			created = append(created, path)
		}
	}
	for pat, before := range a.patterns {
		now, _ := filepath.Glob(pat)
		for _, m := range now {
			if !slices.Contains(before, m) && !strings.Contains(filepath.Base(m), ".corral-refused") {
				created = append(created, m)
			}
		}
	}
	for _, path := range created {
		aside := path + ".corral-refused"
		for i := 2; ; i++ {
			if _, err := os.Lstat(aside); os.IsNotExist(err) {
				break
			}
			aside = fmt.Sprintf("%s.corral-refused-%d", path, i)
		}
		// RENAME_NOREPLACE: a name that appeared meanwhile is never
		// overwritten.
		err := unix.Renameat2(unix.AT_FDCWD, path, unix.AT_FDCWD, aside, unix.RENAME_NOREPLACE)
		if err == unix.ENOENT {
			continue // gone again already
		}
		// Each path is named once (a runner that recreates it in a
		// loop gets one line, and the count at the end), at most
		// maxNamedAside of them.
		if a.named[path] || len(a.named) >= maxNamedAside {
			a.more++
			continue
		}
		a.named[path] = true
		if err != nil {
			p.Warnf("sandbox: the run created the protected path %s, and it could not be moved aside: %v; remove it before you use the folder", escapePath(path), err)
			continue
		}
		p.Warnf("sandbox: refused write to %s: a protected path the run created; moved aside to %s", escapePath(path), escapePath(aside))
	}
}

// quarantine is the last sweep, once the runner's tree is gone (nothing
// of it can race this).
func quarantine(p *stage.Proc, a *absentProtected) {
	a.sweep(p)
	if a.more > 0 {
		p.Warnf("sandbox: protected paths the run created were moved aside %d more times (NAME.corral-refused-N)", a.more)
	}
}

// watchDirs are the folders to watch: the parent of each absent name, and
// every folder above it up to its writable path, those that exist.
func (a *absentProtected) watchDirs() []string {
	var dirs []string
	add := func(name string) {
		for d := filepath.Dir(name); ; d = filepath.Dir(d) {
			if !a.beneathWritable(d) {
				return
			}
			dirs = appendNew(dirs, d)
			if d == "/" {
				return
			}
		}
	}
	for _, p := range a.paths {
		add(p)
	}
	for pat := range a.patterns {
		add(unescapeGlob(pat))
	}
	return dirs
}

func (a *absentProtected) beneathWritable(d string) bool {
	for _, w := range a.writable {
		if d == w || w == "/" || strings.HasPrefix(d, w+"/") {
			return true
		}
	}
	return false
}

// unescapeGlob undoes plan's escaping of a literal path inside a pattern.
func unescapeGlob(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' && i+1 < len(p) {
			i++
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// absentWatch sweeps whenever a watched folder gains an entry.
type absentWatch struct {
	fd, wake int
	done     chan struct{}
}

// watchAbsent starts the watch; nil when there is nothing to watch or
// inotify is unavailable (then the last sweep alone holds, as before).
func watchAbsent(p *stage.Proc, a *absentProtected) *absentWatch {
	if len(a.paths) == 0 && len(a.patterns) == 0 {
		return nil
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		p.Logf("sandbox: no inotify (%v): what the run creates at an absent protected name is moved aside when it ends", err)
		return nil
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(fd)
		return nil
	}
	w := &absentWatch{fd: fd, wake: wake, done: make(chan struct{})}
	w.addWatches(a)
	go w.loop(p, a)
	return w
}

// addWatches (re)adds a watch on each folder that exists now: one made
// or renamed into place since the last time gets its own.
func (w *absentWatch) addWatches(a *absentProtected) {
	for _, d := range a.watchDirs() {
		// IN_DONT_FOLLOW|IN_ONLYDIR: a symlink planted at a folder's
		// name is not followed out of the project.
		unix.InotifyAddWatch(w.fd, d, unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_ONLYDIR|unix.IN_DONT_FOLLOW)
	}
}

func (w *absentWatch) loop(p *stage.Proc, a *absentProtected) {
	defer close(w.done)
	buf := make([]byte, 64<<10)
	fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}, {Fd: int32(w.wake), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		if fds[0].Revents == 0 {
			continue
		}
		// Which entry appeared does not matter (nor an overflow): every
		// batch of events is one sweep of all the names.
		for {
			if _, err := unix.Read(w.fd, buf); err != nil {
				break
			}
		}
		w.addWatches(a)
		a.sweep(p)
	}
}

// stop ends the watch and waits for its loop.
func (w *absentWatch) stop() {
	if w == nil {
		return
	}
	unix.Write(w.wake, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	<-w.done
	unix.Close(w.fd)
	unix.Close(w.wake)
}
