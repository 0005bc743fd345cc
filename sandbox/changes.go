package sandbox

// Reading a changes folder's layers (SPEC, "Copy-on-write workspace"):
// what the run modified, added and deleted beneath each DIR.

import (
	"errors"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/corral-sh/corral/sandbox/internal/plan"
	"github.com/corral-sh/corral/sandbox/internal/sockcheck"
	"golang.org/x/sys/unix"
)

// Change is one path a run changed beneath DIR.
type Change struct {
	Kind      byte   // 'A' added, 'M' modified, 'D' deleted
	Path      string // relative to DIR, slash-separated
	Protected bool   // one of SPEC's protected paths (gate.protects)
	upper     string // the layer's copy ("" for a deletion)
	mode      os.FileMode
}

// readChanges lists what upper holds against lower: a whiteout
// (character device 0:0) is a deletion, an opaque directory replaced
// what lower had there, a file lower has is a modification, else an
// addition; a directory lower has too is only listed when its mode
// changed (overlayfs copies a directory up to hold a change beneath).
func readChanges(lower, upper string) ([]Change, error) {
	var out []Change
	// lowerDir: lower has rel as a folder. Beneath one it has not (a
	// folder the run made), nothing is in lower: no lookup there (a tree
	// the run untarred is most of what a big layer holds).
	var walk func(rel string, lowerDir bool) error
	walk = func(rel string, lowerDir bool) error {
		ents, err := os.ReadDir(filepath.Join(upper, rel))
		if err != nil {
			return err
		}
		for _, e := range ents {
			r := path.Join(rel, e.Name())
			up := filepath.Join(upper, r)
			fi, err := os.Lstat(up)
			if err != nil {
				return err
			}
			var lo os.FileInfo
			loErr := os.ErrNotExist
			if lowerDir {
				lo, loErr = os.Lstat(filepath.Join(lower, r))
			}
			inLower := loErr == nil
			if isWhiteout(fi) {
				if inLower {
					out = append(out, Change{Kind: 'D', Path: r, mode: lo.Mode()})
				}
				continue
			}
			if fi.IsDir() {
				switch {
				case !inLower || !lo.IsDir():
					out = append(out, Change{Kind: kindOf(inLower), Path: r, upper: up, mode: fi.Mode()})
				case fi.Mode() != lo.Mode():
					out = append(out, Change{Kind: 'M', Path: r, upper: up, mode: fi.Mode()})
				}
				if inLower && lo.IsDir() && isOpaque(up) {
					// Replaced whole: what lower has there and upper not is gone.
					if err := deletedBeneath(filepath.Join(lower, r), r, up, &out); err != nil {
						return err
					}
				}
				if err := walk(r, inLower && lo.IsDir()); err != nil {
					return err
				}
				continue
			}
			out = append(out, Change{Kind: kindOf(inLower), Path: r, upper: up, mode: fi.Mode()})
		}
		return nil
	}
	if err := walk("", true); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// gate is the protected-path list of a DIR (SPEC, "Protected paths
// beneath a writable one"), asked of each change apply would make: the
// list a --writable DIR run is held to (plan.Protect, from the facts
// protect.go gathers: the repository DIR lies in, its core.hooksPath,
// $HOME, the settings files the run read), decided as the checker
// decides (sockcheck.WritePolicy.Protects), so that the two cannot drift.
// The facts are DIR's as apply finds it: a hooks folder named since the
// run began is gated too.
type gate struct {
	dir string
	pol *sockcheck.WritePolicy
}

func gateFor(dir, upper string, settings []string) gate {
	var run plan.Plan
	run.Privileges.Landlock.Writable = []string{dir}
	f := protectFacts(run, settings)
	if r, ok := runRepo(dir, upper); ok {
		f.Repos = append(f.Repos, r)
	}
	pr := plan.Protect(f.Writable, f)
	return gate{dir: dir, pol: &sockcheck.WritePolicy{
		Writable: f.Writable, Protected: pr.Paths, Patterns: pr.Patterns, Pinned: pr.Pinned, Modules: pr.Modules,
	}}
}

// runRepo is the repository the run made at DIR's top (git init, a
// clone), as apply would write it: DIR has no .git and the layer has
// one. Its hooks and config are gated like those of a repository DIR
// had, since apply is what puts them where the user's git runs them.
func runRepo(dir, upper string) (plan.RepoFacts, bool) {
	if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
		return plan.RepoFacts{}, false
	}
	if fi, err := os.Lstat(filepath.Join(upper, ".git")); err != nil || !fi.IsDir() {
		return plan.RepoFacts{}, false
	}
	r, ok := repoOf(upper)
	if !ok || r.Top != upper {
		return plan.RepoFacts{}, false
	}
	// The layer's paths as DIR's.
	moved := func(p string) string {
		if rest, ok := strings.CutPrefix(p, upper); ok && (rest == "" || rest[0] == '/') {
			return dir + rest
		}
		return p
	}
	r.Top, r.GitDir, r.CommonDir, r.HooksPath = dir, moved(r.GitDir), moved(r.CommonDir), moved(r.HooksPath)
	return r, true
}

// protects reports whether the change at rel (beneath DIR) touches a
// protected path: one of them or beneath one, or a pinned .git itself
// (removed, replaced, its mode changed).
func (g gate) protects(rel string) bool {
	p := filepath.Join(g.dir, rel)
	if _, ok := g.pol.Protects(p); ok {
		return true
	}
	for _, pin := range g.pol.Pinned {
		if p == pin {
			return true
		}
	}
	return false
}

// markProtected marks the changes the gate protects and puts them first,
// keeping the order of the rest.
func markProtected(ch []Change, g gate) {
	for i := range ch {
		ch[i].Protected = g.protects(ch[i].Path)
	}
	sort.SliceStable(ch, func(i, j int) bool { return ch[i].Protected && !ch[j].Protected })
}

func kindOf(inLower bool) byte {
	if inLower {
		return 'M'
	}
	return 'A'
}

// deletedBeneath lists as deleted what the lower folder lo (rel) holds
// and the opaque upper folder up does not.
func deletedBeneath(lo, rel, up string, out *[]Change) error {
	ents, err := os.ReadDir(lo)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if _, err := os.Lstat(filepath.Join(up, e.Name())); err == nil {
			continue
		}
		*out = append(*out, Change{Kind: 'D', Path: path.Join(rel, e.Name())})
	}
	return nil
}

func isWhiteout(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && fi.Mode()&os.ModeCharDevice != 0 && st.Rdev == 0
}

// isOpaque reports overlayfs's opaque mark: trusted.overlay.opaque as
// real root, user.overlay.opaque with userxattr.
func isOpaque(p string) bool {
	for _, name := range []string{"trusted.overlay.opaque", "user.overlay.opaque"} {
		var b [8]byte
		n, err := unix.Lgetxattr(p, name, b[:])
		if err == nil && n > 0 && b[0] == 'y' {
			return true
		}
	}
	return false
}

var errNotChanges = errors.New("not a changes folder of corral's (no run.json)")
