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
	"golang.org/x/sys/unix"
)

// Change is one path a run changed beneath DIR.
type Change struct {
	Kind      byte   // 'A' added, 'M' modified, 'D' deleted
	Path      string // relative to DIR, slash-separated
	Protected bool   // one of SPEC's protected paths (plan.TopNames, plan.RepoNames)
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
	var walk func(rel string) error
	walk = func(rel string) error {
		ents, err := os.ReadDir(filepath.Join(upper, rel))
		if err != nil {
			return err
		}
		names := map[string]bool{}
		for _, e := range ents {
			names[e.Name()] = true
			r := path.Join(rel, e.Name())
			up := filepath.Join(upper, r)
			fi, err := os.Lstat(up)
			if err != nil {
				return err
			}
			lo, loErr := os.Lstat(filepath.Join(lower, r))
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
				if err := walk(r); err != nil {
					return err
				}
				continue
			}
			out = append(out, Change{Kind: kindOf(inLower), Path: r, upper: up, mode: fi.Mode()})
		}
		return nil
	}
	if err := walk(""); err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Protected = protectedRel(out[i].Path)
	}
	// Protected paths first, then by path.
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Protected != out[j].Protected {
			return out[i].Protected
		}
		return out[i].Path < out[j].Path
	})
	return out, nil
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

// protectedRel reports whether rel (beneath DIR) is one of SPEC's
// protected paths at DIR's top or in DIR's .git.
func protectedRel(rel string) bool {
	for _, n := range plan.TopNames {
		folder := strings.HasSuffix(n, "/")
		n = strings.TrimSuffix(n, "/")
		if ok, _ := path.Match(n, rel); ok {
			return true
		}
		if folder && strings.HasPrefix(rel, n+"/") {
			return true
		}
	}
	if rel == ".git" {
		return true
	}
	if g, ok := strings.CutPrefix(rel, ".git/"); ok {
		for _, n := range []string{"hooks", "config", "modules/*/hooks", "modules/*/config"} {
			parts := strings.Count(n, "/") + 1
			segs := strings.SplitN(g, "/", parts+1)
			if len(segs) < parts {
				continue
			}
			if ok, _ := path.Match(n, strings.Join(segs[:parts], "/")); ok {
				return true
			}
		}
	}
	return false
}

var errNotChanges = errors.New("not a changes folder of corral's (no run.json)")
