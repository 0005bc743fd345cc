package test

import (
	"os"
	"strings"
	"testing"
)

// A write or a chmod through one of the runner's own descriptors,
// /proc/self/fd/N/NAME (Bun's mkdir -p: Claude Code made its temp folders
// so), is decided as one on NAME in the folder N is open on, in every mode:
// allowed beneath --writable, refused (and, where corral names refusals,
// named) outside. In subreaper mode the checker failed every such call
// with ELOOP.
func TestWriteThroughProcSelfFD(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		w, out := e.file("w"), e.file("out")
		for _, d := range []string{w, out} {
			if err := os.Mkdir(d, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(d, 0o777); err != nil {
				t.Fatal(err)
			}
		}
		script := `exec 3<"$1" 4<"$2"
mkdir /proc/self/fd/3/made && echo made
echo hi >/proc/self/fd/3/file && echo file
echo hi >/dev/fd/3/devfd && echo devfd
chmod 600 /proc/self/fd/3/file && echo chmod
mkdir /proc/self/fd/4/refused 2>/dev/null || echo refused-dir
echo hi 2>/dev/null >/proc/self/fd/4/refused-file || echo refused-file
`
		res := e.run(e.args(opts("", "1", "--writable", w), []string{"/bin/sh", "-c", script, "sh", w, out}))
		wantCode(t, res, 0)
		if got, want := strings.Fields(res.stdout), []string{"made", "file", "devfd", "chmod", "refused-dir", "refused-file"}; strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("stdout: want %v, got %v\n%v", want, got, res)
		}
		for _, name := range []string{"made", "file", "devfd"} {
			if _, err := os.Stat(w + "/" + name); err != nil {
				t.Errorf("%s was not written beneath --writable: %v", name, err)
			}
		}
		if st, err := os.Stat(w + "/file"); err == nil && st.Mode().Perm() != 0o600 {
			t.Errorf("chmod through the descriptor left mode %v", st.Mode().Perm())
		}
		for _, name := range []string{"refused", "refused-file"} {
			if _, err := os.Stat(out + "/" + name); err == nil {
				t.Errorf("%s was written outside --writable", name)
			}
			if !strings.Contains(res.stderr, "corral: sandbox: refused write to "+out+"/"+name+": not beneath a --writable path") {
				t.Errorf("stderr does not name the refused %s:\n%s", name, res.stderr)
			}
		}
	})
}
