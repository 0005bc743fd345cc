package statefile

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var wantKeys = []string{
	"active_children",
	"adopted_children",
	"escalated",
	"orphaned_children_total",
	"phase",
	"reaped_children_total",
	"reaped_orphans_total",
	"runner_exit_code",
	"termination_signal",
	"updated_at",
}

func intp(v int) *int { return &v }

// write opens a Writer on path, writes doc once and closes it, failing the
// test on any error or warning.
func write(t *testing.T, path string, doc Document) {
	t.Helper()
	var warn bytes.Buffer
	w := Open(path, &warn)
	if err := w.Write(doc); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if warn.Len() != 0 {
		t.Fatalf("unexpected warning %q", warn.String())
	}
}

// onlyEntries fails unless dir holds exactly the given names: no temp file
// may be left behind.
func onlyEntries(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if strings.Join(got, " ") != strings.Join(names, " ") {
		t.Fatalf("%s holds %q, want %q", dir, got, names)
	}
}

// topLevelKeys returns the object's keys in the order they appear.
func topLevelKeys(t *testing.T, data []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %q", data)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func TestDocumentKeysOrderAndNulls(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	write(t, path, Document{Phase: "running", ActiveChildren: 1})
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte(`{"active_children":1,"adopted_children":0,"escalated":false,"orphaned_children_total":0,"phase":"running","reaped_children_total":0,"reaped_orphans_total":0,"runner_exit_code":null,"termination_signal":null,"updated_at":"`)) {
		t.Fatalf("unexpected bytes %q", data)
	}
	if !bytes.HasSuffix(data, []byte("\"}\n")) || bytes.Count(data, []byte("\n")) != 1 {
		t.Fatalf("want one line ending in a newline, got %q", data)
	}
	if got := topLevelKeys(t, data); strings.Join(got, ",") != strings.Join(wantKeys, ",") {
		t.Fatalf("keys %q, want %q", got, wantKeys)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if len(m) != len(wantKeys) {
		t.Fatalf("decoded %d keys, want %d: %v", len(m), len(wantKeys), m)
	}
	for _, k := range []string{"runner_exit_code", "termination_signal"} {
		if v, ok := m[k]; !ok || v != nil {
			t.Fatalf("%s = %v (present %v), want null", k, v, ok)
		}
	}
}

func TestDocumentValues(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	in := Document{
		ActiveChildren: 2, AdoptedChildren: 1, Escalated: true,
		OrphanedChildrenTotal: 3, Phase: "exited", ReapedChildrenTotal: 4,
		ReapedOrphansTotal: 3, RunnerExitCode: intp(137), TerminationSignal: intp(15),
		UpdatedAt: "caller value is overwritten",
	}
	write(t, path, in)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out Document
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if out.RunnerExitCode == nil || *out.RunnerExitCode != 137 || out.TerminationSignal == nil || *out.TerminationSignal != 15 {
		t.Fatalf("pointers lost: %s", data)
	}
	if out.UpdatedAt == in.UpdatedAt {
		t.Fatal("Write kept the caller's updated_at")
	}
	out.RunnerExitCode, out.TerminationSignal, out.UpdatedAt = nil, nil, ""
	in.RunnerExitCode, in.TerminationSignal, in.UpdatedAt = nil, nil, ""
	if out != in {
		t.Fatalf("round trip: got %+v, want %+v", out, in)
	}
}

func TestUpdatedAt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	before := time.Now().Truncate(time.Microsecond)
	write(t, path, Document{Phase: "starting"})
	after := time.Now()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out Document
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`).MatchString(out.UpdatedAt) {
		t.Fatalf("updated_at %q is not RFC 3339 UTC with microseconds", out.UpdatedAt)
	}
	ts, err := time.Parse(time.RFC3339, out.UpdatedAt)
	if err != nil {
		t.Fatal(err)
	}
	if ts.Before(before) || ts.After(after) {
		t.Fatalf("updated_at %v not within [%v, %v]", ts, before, after)
	}
}

func TestUpdatedAtPadsMicroseconds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	w := Open(path, nil)
	defer w.Close()
	w.now = func() time.Time { return time.Date(2026, 11, 29, 13, 0, 0, 0, time.FixedZone("CET", 3600)) }
	if err := w.Write(Document{}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if !bytes.Contains(data, []byte(`"updated_at":"2026-11-29T12:00:00.000000Z"`)) {
		t.Fatalf("got %s", data)
	}
}

func TestMode0600WhateverTheUmask(t *testing.T) {
	for _, mask := range []int{0, 0o022, 0o777} {
		dir := t.TempDir()
		path := filepath.Join(dir, "state.json")
		// A pre-existing, more open file must not keep its mode.
		if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		old := syscall.Umask(mask)
		var warn bytes.Buffer
		w := Open(path, &warn)
		err := w.Write(Document{Phase: "running"})
		w.Close()
		syscall.Umask(old)
		if err != nil {
			t.Fatalf("umask %#o: %v", mask, err)
		}
		st, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 {
			t.Fatalf("umask %#o: mode %v, want regular 0600", mask, st.Mode())
		}
		onlyEntries(t, dir, "state.json")
	}
}

func TestSymlinkAtTargetIsReplacedNotFollowed(t *testing.T) {
	dir, elsewhere := t.TempDir(), t.TempDir()
	victim := filepath.Join(elsewhere, "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "state.json")
	w := Open(path, nil)
	defer w.Close()
	// Planted after Open, as a runner would.
	if err := os.Symlink(victim, path); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(Document{Phase: "running"}); err != nil {
		t.Fatal(err)
	}
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Mode().IsRegular() {
		t.Fatalf("target is %v, want a regular file", st.Mode())
	}
	if got, _ := os.ReadFile(victim); string(got) != "precious" {
		t.Fatalf("symlink target changed to %q", got)
	}
	if st, _ := os.Stat(victim); st.Mode().Perm() != 0o644 {
		t.Fatalf("symlink target mode changed to %v", st.Mode())
	}
	onlyEntries(t, dir, "state.json")
	onlyEntries(t, elsewhere, "victim")
}

func TestDirectorySwappedForSymlinkAfterOpen(t *testing.T) {
	root, elsewhere := t.TempDir(), t.TempDir()
	orig := filepath.Join(root, "state")
	if err := os.Mkdir(orig, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(orig, "state.json")
	var warn bytes.Buffer
	w := Open(path, &warn)
	defer w.Close()
	if err := w.Write(Document{Phase: "starting"}); err != nil {
		t.Fatal(err)
	}

	moved := filepath.Join(root, "moved")
	if err := os.Rename(orig, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, orig); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(Document{Phase: "exited", RunnerExitCode: intp(0)}); err != nil {
		t.Fatal(err)
	}
	if warn.Len() != 0 {
		t.Fatalf("unexpected warning %q", warn.String())
	}
	data, err := os.ReadFile(filepath.Join(moved, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(`"phase":"exited"`)) {
		t.Fatalf("original folder holds %s, want the second write", data)
	}
	onlyEntries(t, elsewhere)
	onlyEntries(t, moved, "state.json")
}

func TestUnwritablePathWarnsOnce(t *testing.T) {
	var warn bytes.Buffer
	w := Open("/proc/not-writable/state", &warn)
	defer w.Close()
	if warn.Len() != 0 {
		t.Fatalf("Open warned before any Write: %q", warn.String())
	}
	for i := range 5 {
		if err := w.Write(Document{Phase: "running"}); err == nil {
			t.Fatalf("write %d succeeded", i)
		}
	}
	got := warn.String()
	if strings.Count(got, "process state unavailable") != 1 || strings.Count(got, "\n") != 1 ||
		!strings.HasPrefix(got, "corral: process state unavailable: ") {
		t.Fatalf("want exactly one warning line, got %q", got)
	}
}

func TestFailedWriteRemovesTempAndWarnsOnce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	// A non-empty directory at the target makes the rename fail after the
	// temp file was written.
	if err := os.MkdirAll(filepath.Join(path, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	var warn bytes.Buffer
	w := Open(path, &warn)
	defer w.Close()
	for range 3 {
		if err := w.Write(Document{}); err == nil {
			t.Fatal("write over a directory succeeded")
		}
	}
	if n := strings.Count(warn.String(), "\n"); n != 1 {
		t.Fatalf("want one warning line, got %q", warn.String())
	}
	onlyEntries(t, dir, "state.json")

	// Recovery does not re-arm the warning, and a later different failure
	// stays silent too.
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(Document{Phase: "running"}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := w.Write(Document{}); err == nil {
		t.Fatal("write after Close succeeded")
	}
	if n := strings.Count(warn.String(), "\n"); n != 1 {
		t.Fatalf("want still one warning line, got %q", warn.String())
	}
	onlyEntries(t, dir, "state.json")
}

func TestWriteAfterCloseWarns(t *testing.T) {
	var warn bytes.Buffer
	w := Open(filepath.Join(t.TempDir(), "state.json"), &warn)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := w.Write(Document{}); err == nil {
		t.Fatal("write after Close succeeded")
	}
	if !strings.HasPrefix(warn.String(), warnPrefix) {
		t.Fatalf("got %q", warn.String())
	}
}

func TestTakenTempNamesAreSkipped(t *testing.T) {
	dir, elsewhere := t.TempDir(), t.TempDir()
	victim := filepath.Join(elsewhere, "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A runner that predicts the next temp names plants symlinks there; a
	// stale leftover from a crashed corral with the same pid looks the same.
	next := tempCounter.Load()
	var planted []string
	for i := uint64(1); i <= 3; i++ {
		name := tempName("state.json", os.Getpid(), next+i)
		if err := os.Symlink(victim, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		planted = append(planted, name)
	}
	write(t, filepath.Join(dir, "state.json"), Document{Phase: "running"})
	if got, _ := os.ReadFile(victim); string(got) != "precious" {
		t.Fatalf("write went through a planted temp name: victim now %q", got)
	}
	onlyEntries(t, dir, append(planted, "state.json")...)
}

func TestRelativePathResolvedAtOpen(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	t.Chdir(dir)
	w := Open("state.json", nil)
	defer w.Close()
	t.Chdir(other)
	if err := w.Write(Document{Phase: "running"}); err != nil {
		t.Fatal(err)
	}
	onlyEntries(t, dir, "state.json")
	onlyEntries(t, other)
}

func TestPathsThatNameNoFile(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{dir + "/", dir + "/.", dir + "/.."} {
		var warn bytes.Buffer
		w := Open(p, &warn)
		if err := w.Write(Document{}); err == nil {
			t.Errorf("%q: write succeeded", p)
		}
		w.Close()
		if !strings.HasPrefix(warn.String(), warnPrefix) {
			t.Errorf("%q: warning %q", p, warn.String())
		}
	}
	onlyEntries(t, dir)
}

func TestNoopWriters(t *testing.T) {
	var nilWriter *Writer
	var warn bytes.Buffer
	for name, w := range map[string]*Writer{"nil": nilWriter, "empty path": Open("", &warn)} {
		for range 2 {
			if err := w.Write(Document{Phase: "running"}); err != nil {
				t.Errorf("%s: Write: %v", name, err)
			}
		}
		if err := w.Close(); err != nil {
			t.Errorf("%s: Close: %v", name, err)
		}
	}
	if warn.Len() != 0 {
		t.Fatalf("no-op writer warned: %q", warn.String())
	}
}

func TestNilWarnStreamIsDiscarded(t *testing.T) {
	w := Open("/proc/not-writable/state", nil)
	if err := w.Write(Document{}); err == nil {
		t.Fatal("write succeeded")
	}
}

func TestDirectoryHandleIsCloseOnExec(t *testing.T) {
	w := Open(filepath.Join(t.TempDir(), "state.json"), nil)
	defer w.Close()
	flags, err := fcntlGetfd(w.dirfd)
	if err != nil {
		t.Fatal(err)
	}
	if flags&syscall.FD_CLOEXEC == 0 {
		t.Fatal("directory handle would leak into the runner")
	}
}

func TestTempNameFitsNameMax(t *testing.T) {
	if n := len(tempName(strings.Repeat("a", 255), 1<<22, ^uint64(0))); n > 255 {
		t.Fatalf("temp name is %d bytes", n)
	}
}
func fcntlGetfd(fd int) (int, error) { return unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0) }
