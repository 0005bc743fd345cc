package sandbox

// The index of the changes folders kept outside ChangesDir (--changes
// PATH): a symlink to each in $XDG_STATE_HOME/corral/elsewhere, made when
// the run begins. `corral changes list` lists them beside the default
// ones, and every policy run hides them as it hides the state folder: a
// later run, even one with --writable over PATH, must not reach what an
// earlier one changed nor the run.json apply trusts. A symlink each, not
// one file: concurrent runs add and remove their own entry without a
// lock, each with one system call.

import (
	"errors"
	"os"
	"path/filepath"
)

// StateDir is corral's state folder: $XDG_STATE_HOME/corral, or
// ~/.local/state/corral when it is unset.
func StateDir() string {
	if x := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "corral")
	}
	home := os.Getenv("HOME")
	if home == "" {
		home = "/"
	}
	return filepath.Join(home, ".local", "state", "corral")
}

// ChangesDir is where the changes folders go by default.
func ChangesDir() string { return filepath.Join(StateDir(), "changes") }

// runFile names a changes folder's record of its run (RunRecord): what
// apply trusts, and how the index tells a changes folder from any other.
const runFile = "run.json"

// IndexDir holds a symlink to each changes folder kept outside
// ChangesDir.
func IndexDir() string { return filepath.Join(StateDir(), "elsewhere") }

// indexFolder records folder (canonical, holding its run.json) in the
// index under name, unless it lies in ChangesDir, where list finds it
// anyway. It returns the link's path ("" for none).
func indexFolder(folder, name string) (string, error) {
	if c, ok := canonical(ChangesDir()); ok && filepath.Dir(folder) == c {
		return "", nil
	}
	if err := os.MkdirAll(IndexDir(), 0o700); err != nil {
		return "", err
	}
	link := filepath.Join(IndexDir(), name)
	return link, os.Symlink(folder, link)
}

// indexed is every changes folder the index names whose run.json is
// still there, canonical; an entry whose folder is gone is removed
// (a folder made later at that path is not a changes folder of corral's,
// and must not stay hidden from runs).
func indexed() []string {
	ents, err := os.ReadDir(IndexDir())
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		link := filepath.Join(IndexDir(), e.Name())
		target, err := os.Readlink(link)
		if err != nil || !filepath.IsAbs(target) {
			continue
		}
		if _, err := os.Lstat(filepath.Join(target, runFile)); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				if _, err := os.Lstat(target); errors.Is(err, os.ErrNotExist) {
					_ = os.Remove(link)
				}
			}
			continue
		}
		if c, ok := canonical(target); ok {
			out = appendNew(out, c)
		}
	}
	return out
}

// unindex removes the index's entries that name folder.
func unindex(folder string) {
	ents, err := os.ReadDir(IndexDir())
	if err != nil {
		return
	}
	for _, e := range ents {
		link := filepath.Join(IndexDir(), e.Name())
		if t, err := os.Readlink(link); err == nil && t == folder {
			_ = os.Remove(link)
		}
	}
}
