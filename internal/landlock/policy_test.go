package landlock

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestCheck(t *testing.T) {
	root := tree(t, "dir/", "file", "link -> dir", "dangling -> nowhere")
	missing := filepath.Join(root, "missing")
	for _, c := range []struct {
		name  string
		p     Policy
		field string
		is    error
	}{
		{"writable missing", Policy{Writable: []string{root, missing}}, "writable", fs.ErrNotExist},
		{"hide missing", Policy{Hide: []string{missing}}, "hide", fs.ErrNotExist},
		{"hide dangling symlink", Policy{Hide: []string{filepath.Join(root, "dangling")}}, "hide", fs.ErrNotExist},
		{"writable beneath a file", Policy{Writable: []string{filepath.Join(root, "file", "x")}}, "writable", unix.ENOTDIR},
		{"empty path", Policy{Writable: []string{""}}, "writable", nil},
		{"read-only with writable", Policy{ReadOnly: true, Writable: []string{root}}, "read-only", nil},
		{"hide /", Policy{Hide: []string{"/"}}, "hide", nil},
		{"hide / by another name", Policy{Hide: []string{"/.."}}, "hide", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Check(c.p)
			var pe *PolicyError
			if !errors.As(err, &pe) || pe.Field != c.field {
				t.Fatalf("Check: %v, want a *PolicyError for %s", err, c.field)
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("Check: %v, want it to wrap %v", err, c.is)
			}
		})
	}
	for _, p := range []Policy{
		{},
		{IsolateIPC: true},
		{ReadOnly: true},
		{Writable: []string{root, filepath.Join(root, "link")}},
		{Writable: []string{filepath.Join(root, "file")}},
		{Writable: []string{root}, Hide: []string{filepath.Join(root, "link"), filepath.Join(root, "file")}},
	} {
		if err := Check(p); err != nil {
			t.Errorf("Check(%+v): %v", p, err)
		}
	}
}

func TestResolve(t *testing.T) {
	root := tree(t, "dir/sub/", "link -> dir")
	t.Chdir(root)
	r, err := resolve(Policy{Writable: []string{"dir", "./link", "dir/sub/.."}, Hide: []string{"link/sub"}})
	if err != nil {
		t.Fatal(err)
	}
	real, err := filepath.EvalSymlinks(root) // TMPDIR may itself be a symlink
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(real, "dir")
	if !slices.Equal(r.writable, []string{dir}) {
		t.Errorf("writable %q, want [%s]: relative, through a symlink, with .., deduplicated", r.writable, dir)
	}
	if !slices.Equal(r.hide, []string{filepath.Join(dir, "sub")}) {
		t.Errorf("hide %q", r.hide)
	}
}

// The plan hides by splitting: checked as properties over a real tree
// rather than as one expected list, since "/" and the temporary directory's
// ancestors hold whatever this machine holds.
func TestPlanSplitsAroundHiddenPaths(t *testing.T) {
	root := tree(t,
		"a/h/file", "a/b/h2/file", "a/b/keep/", "a/b/file", "a/file", "a/link -> h", "a/fifo-dir/",
		"w/file", "w/hw/file", "w/sub/")
	if err := unix.Mkfifo(filepath.Join(root, "a", "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, _ = filepath.EvalSymlinks(root)
	hides := []string{filepath.Join(root, "a", "h"), filepath.Join(root, "a", "b", "h2"), filepath.Join(root, "w", "hw")}
	w := filepath.Join(root, "w")
	r, err := resolve(Policy{Writable: []string{w}, Hide: hides})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := r.plan()
	if err != nil {
		t.Fatal(err)
	}
	rights := map[string]uint64{}
	for _, ru := range pl.rules {
		if _, dup := rights[ru.path]; dup {
			t.Errorf("two rules for %s: rules on one path should be merged", ru.path)
		}
		rights[ru.path] = ru.rights
		for _, h := range hides {
			if beneath(ru.path, h) {
				t.Errorf("rule on %s, beneath hidden %s", ru.path, h)
			}
			if beneath(h, ru.path) {
				t.Errorf("rule on %s, an ancestor of hidden %s", ru.path, h)
			}
		}
		if fi, err := os.Lstat(ru.path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			t.Errorf("rule on the symlink %s", ru.path)
		}
	}
	for _, d := range pl.split {
		if _, ok := rights[d]; ok {
			t.Errorf("split directory %s has a rule of its own", d)
		}
		entries, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			p := filepath.Join(d, e.Name())
			if e.Type()&fs.ModeSymlink != 0 || slices.Contains(hides, p) || slices.Contains(pl.split, p) {
				continue
			}
			if rights[p]&readRights != readRights {
				t.Errorf("%s, an entry of split %s, lacks the read rights: %#x", p, d, rights[p])
			}
		}
	}
	for _, want := range []string{"/", root, filepath.Join(root, "a"), filepath.Join(root, "a", "b"), w} {
		if !slices.Contains(pl.split, want) {
			t.Errorf("split %q lacks %s", pl.split, want)
		}
	}
	for _, p := range []string{filepath.Join(w, "file"), filepath.Join(w, "sub")} {
		if rights[p]&writeRights != writeRights {
			t.Errorf("%s beside a hidden path in the writable one lacks the write rights: %#x", p, rights[p])
		}
	}
	if rights[filepath.Join(root, "a", "file")]&writeRights != 0 {
		t.Errorf("a file outside the writable path got write rights")
	}
	if rights["/dev/null"] != devRW {
		t.Errorf("/dev/null rights %#x, want %#x", rights["/dev/null"], devRW)
	}
}

func TestPlanWithoutHide(t *testing.T) {
	w := tree(t, "file")
	r, err := resolve(Policy{Writable: []string{w}})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := r.plan()
	if err != nil {
		t.Fatal(err)
	}
	if len(pl.split) != 0 {
		t.Errorf("split %q without hidden paths", pl.split)
	}
	if pl.rules[0].path != "/" || pl.rules[0].rights != readRights {
		t.Errorf("first rule %+v, want read rights on /", pl.rules[0])
	}
	if len(pl.rules) > 2+len(devices) {
		t.Errorf("%d rules for one writable path: %+v", len(pl.rules), pl.rules)
	}
}

func TestRulesetPerABI(t *testing.T) {
	writable := Policy{Writable: []string{"/tmp"}}
	for abi := 1; abi <= knownABI+1; abi++ {
		attr, rep, err := ruleset(writable, abi)
		if err != nil {
			t.Fatalf("ABI %d: %v", abi, err)
		}
		want := uint64(1<<13 - 1)
		for bit, from := range map[uint64]int{fsRefer: 2, fsTruncate: 3, fsIoctlDev: 5} {
			if abi >= from {
				want |= bit
			}
		}
		if attr.handledFS != want || attr.handledNet != 0 || attr.scoped != 0 {
			t.Errorf("ABI %d: attr %+v, want handled_access_fs %#x alone", abi, attr, want)
		}
		joined := strings.Join(rep.NotEnforced, "; ")
		if got := strings.Contains(joined, "truncat"); got != (abi < 3) {
			t.Errorf("ABI %d: NotEnforced %q (truncation)", abi, rep.NotEnforced)
		}
		if got := strings.Contains(joined, "ioctl"); got != (abi < 5) {
			t.Errorf("ABI %d: NotEnforced %q (ioctl)", abi, rep.NotEnforced)
		}
		if got := len(rep.Notes) > 0; got != (abi < 2) {
			t.Errorf("ABI %d: Notes %q", abi, rep.Notes)
		}
		if (rep.Warning() == "") != (len(rep.NotEnforced) == 0) {
			t.Errorf("ABI %d: Warning %q for %q", abi, rep.Warning(), rep.NotEnforced)
		}

		attr, rep, err = ruleset(Policy{IsolateIPC: true}, abi)
		var ae *ABIError
		if abi < 6 {
			if !errors.As(err, &ae) || ae.Need != 6 || ae.Have != abi || !strings.Contains(err.Error(), "Linux 6.12") {
				t.Errorf("ABI %d: IsolateIPC: %v, want an *ABIError naming ABI 6", abi, err)
			}
			continue
		}
		if err != nil || attr.scoped != ipcScopes || attr.handledFS != 0 || len(rep.FS) != 0 {
			t.Errorf("ABI %d: IsolateIPC alone: %+v %+v %v", abi, attr, rep, err)
		}
	}
	_, rep, _ := ruleset(Policy{Hide: []string{"/x"}}, knownABI)
	if !strings.Contains(rep.Warning(), "Unix sockets beneath hidden paths") {
		t.Errorf("hide at ABI %d: warning %q", knownABI, rep.Warning())
	}
}

func TestRulesetAttrSize(t *testing.T) {
	for _, c := range []struct {
		attr rulesetAttr
		want uintptr
	}{
		{rulesetAttr{handledFS: 1}, 8},
		{rulesetAttr{handledFS: 1, handledNet: 1}, 16},
		{rulesetAttr{scoped: 1}, 24},
	} {
		if got := c.attr.size(); got != c.want {
			t.Errorf("%+v: size %d, want %d", c.attr, got, c.want)
		}
	}
}

func TestDescribe(t *testing.T) {
	requireLandlock(t, 1)
	info, err := Describe()
	if err != nil {
		t.Fatal(err)
	}
	abi, _ := ABI()
	if info.ABI != abi || len(info.FS) < 13 {
		t.Fatalf("Describe: %+v (ABI %d)", info, abi)
	}
	s := info.String()
	if !strings.Contains(s, "write_file") || (abi >= 6) != strings.Contains(s, "signal") || (abi >= 5) != strings.Contains(s, "ioctl_dev") {
		t.Errorf("Describe at ABI %d: %s", abi, s)
	}
	if s := describe(knownABI + 3).String(); !strings.Contains(s, "newer than corral knows") {
		t.Errorf("an ABI newer than known: %s", s)
	}
}

// BenchmarkPlan measures the listing a hidden path costs at start: every
// directory from / down to it is read.
func BenchmarkPlan(b *testing.B) {
	root := b.TempDir()
	hidden := filepath.Join(root, "home", "user", ".ssh")
	if err := os.MkdirAll(hidden, 0o755); err != nil {
		b.Fatal(err)
	}
	for i := range 50 {
		if err := os.WriteFile(filepath.Join(root, "home", "user", strings.Repeat("f", i+1)), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		name string
		p    Policy
	}{
		{"writable", Policy{Writable: []string{root}}},
		{"hide", Policy{Writable: []string{root}, Hide: []string{hidden}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r, err := resolve(bc.p)
			if err != nil {
				b.Fatal(err)
			}
			var rules int
			for b.Loop() {
				pl, err := r.plan()
				if err != nil {
					b.Fatal(err)
				}
				rules = len(pl.rules)
			}
			b.ReportMetric(float64(rules), "rules")
		})
	}
}
