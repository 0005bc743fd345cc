package test

// The man page, docs/corral.1, is written by hand (issue 32): these tests
// keep it in step with what `corral --help` offers, and check that
// `make install` installs it where man(1) looks.

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const manPage = "../docs/corral.1"

// helpOptions returns every option `corral --help` names: each --long
// name, and each -x short one that starts an option line.
func helpOptions(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command(corralBin, "--help").Output()
	if err != nil {
		t.Fatalf("corral --help: %v", err)
	}
	var opts []string
	for _, m := range regexp.MustCompile(`--[a-z][a-z-]*[a-z]`).FindAllString(string(out), -1) {
		opts = append(opts, m)
	}
	for _, m := range regexp.MustCompile(`(?m)^\s+(-[a-zA-Z]),`).FindAllStringSubmatch(string(out), -1) {
		opts = append(opts, m[1])
	}
	slices.Sort(opts)
	opts = slices.Compact(opts)
	if len(opts) < 20 || !slices.Contains(opts, "--mode") || !slices.Contains(opts, "-v") {
		t.Fatalf("corral --help names too few options, or the parse is wrong: %q", opts)
	}
	return opts
}

// manEntries returns the options the man page documents as entries: those
// named in the tag line of a .TP paragraph, with roff's \- read as -.
func manEntries(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(manPage)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.ReplaceAll(string(data), `\-`, "-"), "\n")
	option := regexp.MustCompile(`(?:^|[\s"(\[|])(--?[a-zA-Z][a-zA-Z-]*)`)
	entries := map[string]bool{}
	for i := 0; i+1 < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != ".TP" {
			continue
		}
		for _, m := range option.FindAllStringSubmatch(lines[i+1], -1) {
			entries[m[1]] = true
		}
	}
	return entries
}

// Every option --help offers has an entry of its own in the man page. A new
// option added to --help without its entry fails here.
func TestManPageHasEveryHelpOption(t *testing.T) {
	entries := manEntries(t)
	for _, opt := range helpOptions(t) {
		if !entries[opt] {
			t.Errorf("%s: no entry (a .TP paragraph) for %s, which corral --help offers", manPage, opt)
		}
	}
	// The subcommands, too.
	data, err := os.ReadFile(manPage)
	if err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"corral probe", "corral spec", "corral version"} {
		if !strings.Contains(string(data), ".B "+sub) && !strings.Contains(string(data), `.BR "`+sub+`"`) {
			t.Errorf("%s: no entry for %q", manPage, sub)
		}
	}
	for _, section := range []string{"NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "MODES", "EXIT STATUS", "SIGNALS", "ENVIRONMENT", "FILES", "EXAMPLES", "SEE ALSO"} {
		if !strings.Contains(string(data), "\n.SH "+section+"\n") {
			t.Errorf("%s: no .SH %s", manPage, section)
		}
	}
}

// `make install` into a DESTDIR puts the binary and the man page where
// PREFIX says, with the modes a package would give them.
func TestMakeInstallInstallsManPage(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("make: %v (CI=true: a missing program is a failure)", err)
		}
		t.Skipf("make: %v", err)
	}
	dest := t.TempDir()
	// BIN points the build at the temporary folder, so the test leaves the
	// worktree's bin/ as it was.
	cmd := exec.Command("make", "install", "DESTDIR="+dest, "PREFIX=/usr", "BIN="+filepath.Join(dest, "build", "corral"))
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install DESTDIR=%s: %v\n%s", dest, err, out)
	}
	want, err := os.ReadFile(manPage)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{
		{"usr/share/man/man1/corral.1", 0o644},
		{"usr/bin/corral", 0o755},
	} {
		fi, err := os.Stat(filepath.Join(dest, f.path))
		if err != nil {
			t.Errorf("make install did not install %s: %v", f.path, err)
			continue
		}
		if fi.Mode().Perm() != f.mode {
			t.Errorf("%s: mode %v, want %v", f.path, fi.Mode().Perm(), f.mode)
		}
	}
	got, err := os.ReadFile(filepath.Join(dest, "usr/share/man/man1/corral.1"))
	if err == nil && !bytes.Equal(got, want) {
		t.Errorf("the installed man page differs from %s", manPage)
	}
}
