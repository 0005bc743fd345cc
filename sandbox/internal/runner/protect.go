package runner

// The protected paths beneath a writable one (SPEC, "Protected paths
// beneath a writable one") as mounts: what exists of the run's list
// (plan.Protection, computed once on the host side before launch, the
// same list subreaper mode's checker holds writes to). Only what exists
// when the runner starts can be a mount: a mount needs a file or folder
// to sit on, and making a placeholder would change the caller's folder.
// What the run creates at an absent protected name is the host side's to
// move aside when the run ends (sandbox, quarantine).

import (
	"os"
	"path/filepath"

	"github.com/corral-sh/corral/sandbox/internal/plan"
)

// Bounds on the walk of a repository's submodules: a runner's project is
// input, and the launch must not grow with it past these.
const (
	maxModuleDepth = 8
	maxModules     = 256
)

// protection is what protectedPaths found.
type protection struct {
	// paths are bound read-only: the protected files and folders that
	// exist.
	paths []string
	// pinned are bound onto themselves as they are: a repository's .git
	// folder, which then cannot be renamed, removed or replaced, while
	// its objects, refs, index and logs stay writable.
	pinned []string
}

// protectedPaths lists what exists of pr: its paths, what its patterns
// match, each submodule's hooks/ and config beneath its modules/
// folders, and its pinned .git folders.
func protectedPaths(pr plan.Protection) protection {
	var out protection
	add := func(p string) {
		// A symlink at a protected name is followed: what it leads to
		// is what the user's tools read. (The link itself can still be
		// replaced where its folder is writable.)
		if c, ok := canonical(p); ok {
			out.paths = appendNew(out.paths, c)
		}
	}
	for _, p := range pr.Paths {
		add(p)
	}
	for _, pat := range pr.Patterns {
		matches, _ := filepath.Glob(pat)
		for _, m := range matches {
			add(m)
		}
	}
	n := 0
	var walk func(dir string, depth int)
	walk = func(dir string, depth int) {
		if depth > maxModuleDepth || n >= maxModules {
			return
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range entries {
			if !e.IsDir() || n >= maxModules {
				continue
			}
			n++
			sub := filepath.Join(dir, e.Name())
			// A submodule's name may hold slashes: its repository is
			// the folder with a HEAD, wherever beneath modules/.
			if _, err := os.Lstat(filepath.Join(sub, "HEAD")); err == nil {
				add(filepath.Join(sub, "hooks"))
				add(filepath.Join(sub, "config"))
				add(filepath.Join(sub, "config.worktree"))
				walk(filepath.Join(sub, "modules"), depth+1)
				continue
			}
			walk(sub, depth+1)
		}
	}
	for _, m := range pr.Modules {
		walk(m, 0)
	}
	for _, p := range pr.Pinned {
		if c, ok := canonical(p); ok {
			out.pinned = appendNew(out.pinned, c)
		}
	}
	return out
}
