package sandbox

// corral changes show|apply|discard|list (SPEC, "Copy-on-write
// workspace"): the user's side of an --overlay run's changes folder.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ChangesFolder is one kept changes folder.
type ChangesFolder struct {
	Path string
	Run  RunRecord
}

// OpenChanges reads the changes folder at path.
func OpenChanges(path string) (*ChangesFolder, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	// The folder itself, not a link to it (an index entry): discard
	// removes the folder, and the layer's paths are compared as written.
	if c, ok := canonical(abs); ok {
		abs = c
	}
	data, err := os.ReadFile(filepath.Join(abs, runFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", abs, errNotChanges)
		}
		return nil, err
	}
	c := &ChangesFolder{Path: abs}
	if err := json.Unmarshal(data, &c.Run); err != nil {
		return nil, fmt.Errorf("%s: run.json does not parse: %v", abs, err)
	}
	return c, nil
}

// Changes lists what the run changed beneath each DIR, in Run.Dirs'
// order, protected paths first.
func (c *ChangesFolder) Changes() ([][]Change, error) {
	out := make([][]Change, len(c.Run.Dirs))
	for i, d := range c.Run.Dirs {
		up := filepath.Join(layerDir(c.Path, i), "upper")
		if _, err := os.Stat(up); err != nil {
			continue
		}
		ch, err := readChanges(d, up)
		if err != nil {
			return nil, fmt.Errorf("read the changes of %s: %v", d, err)
		}
		markProtected(ch, gateFor(d, up, c.Run.Settings))
		out[i] = ch
	}
	return out, nil
}

// ChangesShow writes what the folder at path holds: per DIR, A/M/D and
// the path (the protected ones first, marked), then with !stat a unified
// diff of each text file (diff.go).
func ChangesShow(w io.Writer, path string, stat bool) error {
	c, err := OpenChanges(path)
	if err != nil {
		return err
	}
	all, err := c.Changes()
	if err != nil {
		return err
	}
	for i, d := range c.Run.Dirs {
		fmt.Fprintf(w, "overlay %s (run %s: %s)\n", d, c.Run.Start.Format("2006-01-02 15:04:05"), commandLine(c.Run.Command))
		for _, ch := range all[i] {
			mark := ""
			if ch.Protected {
				mark = "  (protected: apply needs --force)"
			}
			suffix := ""
			if ch.mode.IsDir() {
				suffix = "/"
			} else if ch.mode&os.ModeSymlink != 0 {
				if t, err := os.Readlink(ch.upper); err == nil {
					suffix = " -> " + t
				}
			}
			if ch.Kind == 'M' {
				if lo, err := os.Lstat(filepath.Join(d, ch.Path)); err == nil && lo.Mode() != ch.mode && lo.Mode().Type() == ch.mode.Type() {
					suffix += fmt.Sprintf(" (mode %04o -> %04o)", lo.Mode().Perm(), ch.mode.Perm())
				}
			}
			fmt.Fprintf(w, "%c %s%s%s\n", ch.Kind, ch.Path, suffix, mark)
		}
		if stat {
			continue
		}
		for _, ch := range all[i] {
			writeDiff(w, d, ch)
		}
	}
	return nil
}

// ChangesDiscard removes the changes folder at path.
func ChangesDiscard(path string) error {
	c, err := OpenChanges(path)
	if err != nil {
		return err
	}
	if err := removeTree(c.Path); err != nil {
		return err
	}
	unindex(c.Path)
	return nil
}

// ChangesList writes the kept folders, newest first: those under
// ChangesDir and those the index names (--changes elsewhere): the path,
// the start time, the DIRs and the command.
func ChangesList(w io.Writer) error {
	ents, err := os.ReadDir(ChangesDir())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	paths := indexed()
	for _, e := range ents {
		paths = append(paths, filepath.Join(ChangesDir(), e.Name()))
	}
	var kept []*ChangesFolder
	seen := map[string]bool{}
	for _, p := range paths {
		if c, err := OpenChanges(p); err == nil && !seen[c.Path] {
			seen[c.Path] = true
			kept = append(kept, c)
		}
	}
	sort.SliceStable(kept, func(i, j int) bool { return kept[i].Run.StartNs > kept[j].Run.StartNs })
	for _, c := range kept {
		fmt.Fprintf(w, "%s  %s  %s  %s\n", c.Path, c.Run.Start.Format("2006-01-02 15:04:05"), strings.Join(c.Run.Dirs, ","), commandLine(c.Run.Command))
	}
	return nil
}

// commandLine is argv on one line, each argument quoted where a shell
// would need it.
func commandLine(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shellPath(a)
	}
	return strings.Join(q, " ")
}
