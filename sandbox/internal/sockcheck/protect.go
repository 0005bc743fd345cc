package sockcheck

import (
	"path/filepath"
	"strings"
)

// WritePolicy is what the checker holds the runner's write-intent
// filesystem calls to (seccomp RunnerRules.NotifyWrites; fswrite.go):
// plain data from the run's plan, every path absolute and canonical, as
// the kernel names a resolved object (readlink of /proc/self/fd/N). The
// checker makes each such call itself, on what it resolved, on a thread
// no Landlock domain restricts: so it also refuses what the runner's
// Landlock policy would (outside Writable, beneath Hide) before it makes
// anything.
type WritePolicy struct {
	// Writable are the --writable paths: beneath them the runner may
	// create, write, rename and remove, protected paths aside.
	Writable []string
	// Protected are the protected paths (SPEC, "Protected paths beneath
	// a writable one"): each is read-only with everything beneath it, and
	// cannot be created, replaced, renamed, removed or linked.
	Protected []string
	// Patterns are protected paths named by a pattern (filepath.Match).
	Patterns []string
	// Pinned are the .git folders that existed at launch: they cannot be
	// renamed, removed or replaced; beneath them the protected paths
	// aside are writable (objects, refs, the index, logs).
	Pinned []string
	// Modules are the modules/ folders of those repositories: beneath
	// each, the hooks/ folder and the config file of every submodule's
	// repository (modules/NAME/hooks/, modules/NAME/config, nested) are
	// protected too, those made during the run included.
	Modules []string
	// Devices may be opened for writing wherever they are: the device
	// exceptions every filesystem rule keeps (/dev/null, /dev/tty, …);
	// a path ending in "/" covers what lies beneath it (/dev/pts/).
	Devices []string
}

// under reports whether path is dir or lies beneath it.
func under(path, dir string) bool {
	if dir == "/" {
		return strings.HasPrefix(path, "/")
	}
	return path == dir || (len(path) > len(dir) && path[:len(dir)] == dir && path[len(dir)] == '/')
}

// Protects reports whether path — canonical, absolute, as the kernel
// names a resolved object (/proc/self/fd/N) — is a protected path or lies
// beneath one, for this policy, and names it: the check every call that
// would change what lies at path asks (the metadata calls included). An
// explicit --writable beneath a protected path re-grants what lies
// beneath it.
func (p *WritePolicy) Protects(path string) (string, bool) {
	if p == nil {
		return "", false
	}
	for _, e := range p.Protected {
		if under(path, e) && !p.regranted(path, e) {
			return e, true
		}
	}
	for _, pat := range p.Patterns {
		if ok, _ := filepath.Match(pat, path); ok && !p.regranted(path, path) {
			return path, true
		}
	}
	for _, m := range p.Modules {
		if e, ok := moduleProtected(path, m); ok && !p.regranted(path, e) {
			return e, true
		}
	}
	return "", false
}

// regranted: a --writable path that is the protected path e or lies
// beneath it holds path.
func (p *WritePolicy) regranted(path, e string) bool {
	for _, w := range p.Writable {
		if under(w, e) && under(path, w) {
			return true
		}
	}
	return false
}

// moduleProtected reports whether path is a submodule repository's
// hooks/ (or beneath it) or config beneath the modules folder m, and
// names that protected path. A submodule's name may hold slashes, so
// any depth counts, but never inside a repository's refs, logs or
// objects (a branch named hooks is not one).
func moduleProtected(path, m string) (string, bool) {
	if !under(path, m) || path == m {
		return "", false
	}
	comps := strings.Split(path[len(m)+1:], "/")
	for i := 1; i < len(comps); i++ {
		switch comps[i-1] {
		case "refs", "logs", "objects", "lfs":
			return "", false
		}
		if comps[i] == "hooks" || (comps[i] == "config" && i == len(comps)-1) {
			return filepath.Join(m, strings.Join(comps[:i+1], "/")), true
		}
	}
	return "", false
}

// holds reports whether something protected lies strictly beneath dir,
// or dir is a pinned .git: renaming or replacing dir would take it
// along.
func (p *WritePolicy) holds(dir string) (string, bool) {
	for _, e := range p.Pinned {
		if under(e, dir) && !p.regranted(e, e) {
			return e, true
		}
	}
	for _, e := range p.Protected {
		if under(e, dir) && e != dir && !p.regranted(e, e) {
			return e, true
		}
	}
	for _, pat := range p.Patterns {
		if under(filepath.Dir(pat), dir) {
			return pat, true
		}
	}
	for _, m := range p.Modules {
		// A submodule's repository moved elsewhere keeps its hooks.
		if under(m, dir) || (under(dir, m) && dir != m) {
			return m, true
		}
	}
	return "", false
}

// writable reports whether the policy lets path be written (exact:
// path itself may be W, a writable file).
func (p *WritePolicy) writable(path string) bool {
	for _, w := range p.Writable {
		if under(path, w) {
			return true
		}
	}
	return false
}

// device reports whether path is a device every rule keeps writable.
func (p *WritePolicy) device(path string) bool {
	for _, d := range p.Devices {
		if path == d || (strings.HasSuffix(d, "/") && strings.HasPrefix(path, d)) {
			return true
		}
	}
	return false
}
