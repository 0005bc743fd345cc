package sandbox

// The diffs of corral changes show: corral's own line diff, not git
// diff --no-index, whose output follows the user's git configuration
// (diff.external, textconv drivers, colour) and which would run the
// commands that configuration names on files a sandboxed run wrote.

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// maxDiffLines bounds the quadratic line matcher: a bigger file is only
// said to differ.
const maxDiffLines = 5000

func writeDiff(w io.Writer, dir string, ch Change) {
	if ch.mode.IsDir() || (ch.Kind != 'D' && !ch.mode.IsRegular()) {
		return
	}
	var old, new []byte
	if ch.Kind != 'A' {
		b, err := os.ReadFile(filepath.Join(dir, ch.Path))
		if err != nil && ch.Kind == 'M' {
			return
		}
		if fi, err := os.Lstat(filepath.Join(dir, ch.Path)); err != nil || !fi.Mode().IsRegular() {
			return
		}
		old = b
	}
	if ch.Kind != 'D' {
		b, err := os.ReadFile(ch.upper)
		if err != nil {
			return
		}
		new = b
	}
	a, b := "a/"+ch.Path, "b/"+ch.Path
	if ch.Kind == 'A' {
		a = "/dev/null"
	}
	if ch.Kind == 'D' {
		b = "/dev/null"
	}
	if isBinary(old) || isBinary(new) {
		fmt.Fprintf(w, "Binary files %s and %s differ\n", a, b)
		return
	}
	ol, nl := lines(old), lines(new)
	if len(ol) > maxDiffLines || len(nl) > maxDiffLines {
		fmt.Fprintf(w, "Files %s and %s differ (too long to diff here)\n", a, b)
		return
	}
	if bytes.Equal(old, new) {
		return
	}
	fmt.Fprintf(w, "--- %s\n+++ %s\n", a, b)
	unified(w, ol, nl, 3)
}

func isBinary(b []byte) bool {
	n := min(len(b), 8000)
	return bytes.IndexByte(b[:n], 0) >= 0
}

// lines splits b into lines, each with its newline; a last line without
// one is marked as diff marks it.
func lines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	s := strings.SplitAfter(string(b), "\n")
	if s[len(s)-1] == "" {
		s = s[:len(s)-1]
	}
	return s
}

type edit struct {
	op   byte // ' ', '-', '+'
	line string
}

// unified writes the diff of a and b as unified hunks with ctx lines of
// context, from a longest-common-subsequence table.
func unified(w io.Writer, a, b []string, ctx int) {
	n, m := len(a), len(b)
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var es []edit
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			es = append(es, edit{' ', a[i]})
			i++
			j++
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
			es = append(es, edit{'-', a[i]})
			i++
		default:
			es = append(es, edit{'+', b[j]})
			j++
		}
	}
	// Hunks: runs of edits with up to 2*ctx unchanged lines between.
	for k := 0; k < len(es); {
		if es[k].op == ' ' {
			k++
			continue
		}
		start := max(0, k-ctx)
		end := k
		for end < len(es) {
			if es[end].op != ' ' {
				end++
				continue
			}
			run := end
			for run < len(es) && es[run].op == ' ' {
				run++
			}
			if run == len(es) || run-end > 2*ctx {
				end = min(len(es), end+ctx)
				break
			}
			end = run
		}
		ai, bi := 0, 0
		for _, e := range es[:start] {
			if e.op != '+' {
				ai++
			}
			if e.op != '-' {
				bi++
			}
		}
		ac, bc := 0, 0
		for _, e := range es[start:end] {
			if e.op != '+' {
				ac++
			}
			if e.op != '-' {
				bc++
			}
		}
		fmt.Fprintf(w, "@@ -%s +%s @@\n", hunkRange(ai, ac), hunkRange(bi, bc))
		for _, e := range es[start:end] {
			l := e.line
			fmt.Fprintf(w, "%c%s", e.op, l)
			if !strings.HasSuffix(l, "\n") {
				fmt.Fprint(w, "\n\\ No newline at end of file\n")
			}
		}
		k = end
	}
}

func hunkRange(start, count int) string {
	if count == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if count == 1 {
		return fmt.Sprint(start + 1)
	}
	return fmt.Sprintf("%d,%d", start+1, count)
}
