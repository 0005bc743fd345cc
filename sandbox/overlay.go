package sandbox

// The host side of --overlay (SPEC, "Copy-on-write workspace"): the
// changes folder made before the run, the layers counted after it. The
// exec stage mounts the layers (package runner, overlay.go).

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/corral-sh/corral/internal/proc"
	"github.com/corral-sh/corral/sandbox/internal/plan"
	"golang.org/x/sys/unix"
)

// RunRecord is the changes folder's run.json: what the run was, and the
// start time a later apply compares DIR's ctimes with (a change beneath
// is found by what changed after the run began, not by a walk at launch).
type RunRecord struct {
	Dirs    []string  `json:"dirs"`
	Command []string  `json:"command"`
	Start   time.Time `json:"start"`
	// StartNs is Start in nanoseconds since the epoch, as ctimes are.
	StartNs int64 `json:"start_ns"`
	// Settings are the settings files the run read: apply gates them as
	// protected paths where they lie beneath a DIR.
	Settings []string `json:"settings,omitempty"`
}

// layerDir is where DIR number i of a run keeps its layer.
func layerDir(folder string, i int) string {
	return filepath.Join(folder, "layers", fmt.Sprint(i))
}

// overlayRun is one run's changes folder, on the host side.
type overlayRun struct {
	folder string
	link   string // its entry in the index (changesindex.go); "": none
	rec    RunRecord
}

// hideState hides corral's state folder (the changes folders) from a run
// with a filesystem rule: a later run must not reach what an earlier one
// changed, nor the record apply trusts.
func hideState(run *plan.Plan, o *overlayRun) {
	l := &run.Privileges.Landlock
	if len(l.Writable) == 0 && !l.ReadOnly && len(l.Hide) == 0 && len(run.Overlay) == 0 {
		return
	}
	dir := StateDir()
	if c, ok := canonical(dir); ok {
		l.Hide = appendNew(l.Hide, c)
	}
	if o != nil && !beneathPath(o.folder, dir) {
		l.Hide = appendNew(l.Hide, o.folder)
	}
	for _, f := range indexed() {
		if !beneathPath(f, dir) {
			l.Hide = appendNew(l.Hide, f)
		}
	}
}

// prepareOverlay makes the changes folder and the layers of run's
// --overlay DIRs and asks the exec stage to mount them; nil without
// --overlay. settings are the settings files read for the run.
func prepareOverlay(run *plan.Plan, settings []string) (*overlayRun, error) {
	if len(run.Overlay) == 0 {
		return nil, nil
	}
	if run.Mode == ModeAuto || run.Mode == "" {
		run.Mode = ModePidns // only a namespace mode can mount the layer
	}
	table, err := readMountTable()
	if err != nil {
		return nil, &SetupError{Step: "--overlay: read the mount table", Err: err}
	}
	var dirs []string
	for _, d := range run.Overlay {
		c, ok := canonical(d)
		if !ok {
			return nil, &SetupError{Step: "--overlay " + d, Err: errors.New("no such folder"), Hint: "give an existing folder"}
		}
		if fi, err := os.Stat(c); err != nil || !fi.IsDir() {
			return nil, &SetupError{Step: "--overlay " + d, Err: errors.New("not a folder"), Hint: "give a folder"}
		}
		for _, e := range table {
			if e.MountPoint != c && strings.HasPrefix(e.MountPoint, c+"/") {
				return nil, &SetupError{Step: "--overlay " + d, Err: fmt.Errorf("another mount lies beneath it: %s", e.MountPoint),
					Hint: "overlayfs would not show it; give a folder without mounts beneath it, or --writable " + e.MountPoint + " beside an --overlay of the rest"}
			}
		}
		dirs = append(dirs, c)
	}
	// The run's name: the default folder's, and the index entry's of a
	// --changes folder. getrandom(2), not crypto/rand: that package links
	// the FIPS module's initialisers into every launch (TestNoHTTPStack).
	// A name only needs to be new; os.Mkdir below refuses one that is
	// not, and the nanoseconds stand in where getrandom is refused.
	var b [4]byte
	if _, err := unix.Getrandom(b[:], 0); err != nil {
		binary.NativeEndian.PutUint32(b[:], uint32(time.Now().UnixNano()))
	}
	name := time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
	folder := run.Changes
	if folder == "" {
		folder = filepath.Join(ChangesDir(), name)
		if err := os.MkdirAll(ChangesDir(), 0o700); err != nil {
			return nil, &SetupError{Step: "--overlay: make the changes folder", Err: err, Hint: "set --changes PATH to a folder corral may create"}
		}
	} else if abs, err := filepath.Abs(folder); err == nil {
		folder = abs
	}
	if err := os.Mkdir(folder, 0o700); err != nil {
		return nil, &SetupError{Step: "--changes " + folder, Err: err, Hint: "give a path that does not exist yet: corral makes the folder"}
	}
	if c, ok := canonical(folder); ok {
		folder = c
	}
	for _, d := range dirs {
		if beneathPath(folder, d) {
			os.Remove(folder)
			return nil, &SetupError{Step: "--changes " + folder, Err: errors.New("lies beneath --overlay " + d), Hint: "keep the changes outside the folder they change"}
		}
	}
	o := &overlayRun{folder: folder}
	now := time.Now()
	o.rec = RunRecord{Dirs: dirs, Command: run.Args, Start: now, StartNs: now.UnixNano()}
	for _, s := range settings {
		if c, ok := canonical(s); ok {
			o.rec.Settings = appendNew(o.rec.Settings, c)
		}
	}
	for i, d := range dirs {
		l := layerDir(folder, i)
		up, work := filepath.Join(l, "upper"), filepath.Join(l, "work")
		for _, p := range []string{up, work} {
			if err := os.MkdirAll(p, 0o700); err != nil {
				return nil, &SetupError{Step: "--overlay: make the layer " + p, Err: err}
			}
		}
		// The layer's top is what the runner sees at DIR: DIR's mode
		// and owner, not the folder corral made.
		if fi, err := os.Stat(d); err == nil {
			_ = os.Chmod(up, fi.Mode().Perm()|fi.Mode()&(os.ModeSticky|os.ModeSetgid))
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 {
				_ = os.Lchown(up, int(st.Uid), int(st.Gid))
			}
		}
		run.Privileges.Overlays = append(run.Privileges.Overlays, plan.OverlayMount{Dir: d, Upper: up, Work: work})
	}
	data, _ := json.MarshalIndent(o.rec, "", "  ")
	if err := os.WriteFile(filepath.Join(folder, runFile), append(data, '\n'), 0o600); err != nil {
		return nil, &SetupError{Step: "--overlay: record the run in " + folder, Err: err}
	}
	if o.link, err = indexFolder(folder, name); err != nil {
		_ = removeTree(folder)
		return nil, &SetupError{Step: "--changes " + folder + ": list it in " + IndexDir(), Err: err,
			Hint: "corral hides every changes folder from later runs by that list; set XDG_STATE_HOME to a folder corral may write"}
	}
	return o, nil
}

// grantWritable makes each DIR one of the run's writable paths (after the
// protected paths were computed: an overlay's changes are gated by
// changes apply, not by mounts).
func (o *overlayRun) grantWritable(run *plan.Plan) {
	if o == nil {
		return
	}
	// --read-only elsewhere: the DIRs are then the only writable paths,
	// which is what a --writable policy is (Landlock takes one or the
	// other).
	run.Privileges.Landlock.ReadOnly = false
	for _, d := range o.rec.Dirs {
		run.Privileges.Landlock.Writable = appendNew(run.Privileges.Landlock.Writable, d)
	}
}

// finish counts each layer's changes and says where they are, or removes
// the folder of a run that changed nothing.
func (o *overlayRun) finish(w io.Writer) {
	if o == nil {
		return
	}
	var lines []string
	total := 0
	for i, d := range o.rec.Dirs {
		ch, err := readChanges(d, filepath.Join(layerDir(o.folder, i), "upper"))
		if err != nil {
			lines = append(lines, fmt.Sprintf("corral: overlay %s: the changes could not be read (%v); see: %s", d, err, o.folder))
			total++
			continue
		}
		total += len(ch)
		if len(ch) == 0 {
			continue
		}
		var m, a, del int
		for _, c := range ch {
			switch c.Kind {
			case 'M':
				m++
			case 'A':
				a++
			case 'D':
				del++
			}
		}
		lines = append(lines, fmt.Sprintf("corral: overlay %s: %d modified, %d added, %d deleted; see: corral changes show %s", d, m, a, del, shellPath(o.folder)))
	}
	if total == 0 {
		if err := removeTree(o.folder); err != nil {
			fmt.Fprintf(w, "corral: overlay: the run changed nothing, but its folder %s could not be removed: %v\n", o.folder, err)
			return
		}
		if o.link != "" {
			_ = os.Remove(o.link)
		}
		return
	}
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

// removeTree removes path and everything beneath it, making folders
// searchable and writable first: overlayfs leaves its work folder mode
// 000, and a volatile layer's work/incompat/volatile beneath it too.
func removeTree(path string) error {
	if err := os.RemoveAll(path); err == nil {
		return nil
	}
	opened(path)
	return os.RemoveAll(path)
}

// opened makes the folder p and every folder beneath it its owner's to
// list, enter and change, never following a symlink (Lstat, and d_type).
func opened(p string) {
	if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
		return
	}
	_ = os.Chmod(p, 0o700)
	ents, _ := os.ReadDir(p)
	for _, e := range ents {
		if e.IsDir() {
			opened(filepath.Join(p, e.Name()))
		}
	}
}

func beneathPath(path, dir string) bool {
	return path == dir || dir == "/" || strings.HasPrefix(path, dir+"/")
}

// readMountTable is this process's mount table.
func readMountTable() ([]proc.MountEntry, error) {
	return proc.ReadMountTable("/proc/self/mountinfo")
}

// shellPath is p as a shell reads it: bare when it can be.
func shellPath(p string) string {
	if strings.Trim(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:@") == "" {
		return p
	}
	return strconv.Quote(p)
}
