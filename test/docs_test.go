package test

// The user-facing docs (issue 32): README.md is a front page of at most 400
// lines, the reference lives in docs/, one page per subject, and every link
// between them resolves — to a file that exists and, with a #fragment, to
// a heading in it. No binary is needed.

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// docPages returns README.md and every markdown page beneath docs/ and
// test/bench/, as paths relative to the repository's root.
func docPages(t *testing.T) []string {
	t.Helper()
	pages := []string{"README.md", "test/bench/README.md"}
	more, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range more {
		pages = append(pages, strings.TrimPrefix(p, "../"))
	}
	return pages
}

// stripCode removes fenced blocks and inline code spans, where brackets and
// parentheses are text, not links.
func stripCode(s string) string {
	var b strings.Builder
	fenced := false
	for _, line := range strings.SplitAfter(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			b.WriteString("\n")
			continue
		}
		if fenced {
			b.WriteString("\n")
			continue
		}
		b.WriteString(regexp.MustCompile("`[^`]*`").ReplaceAllString(line, "code"))
	}
	return b.String()
}

// anchors returns the fragment GitHub gives each heading of a markdown
// page: lower case, punctuation dropped, spaces as hyphens, a repeated one
// numbered -1, -2, ….
func anchors(text string) map[string]bool {
	got := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			seen[a]++
			a += "-" + string(rune('0'+n))
		} else {
			seen[a] = 1
		}
		got[a] = true
	}
	return got
}

var mdLink = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)

// Every relative link of the docs resolves to a file, and a #fragment to a
// heading of that file (or of the page itself).
func TestDocsLinksResolve(t *testing.T) {
	for _, page := range docPages(t) {
		data, err := os.ReadFile(filepath.Join("..", page))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(stripCode(string(data)), -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(link, "#")
			target := page
			if file != "" {
				target = filepath.Join(filepath.Dir(page), file)
			}
			fi, err := os.Stat(filepath.Join("..", target))
			if err != nil {
				t.Errorf("%s: link %q: %v", page, link, err)
				continue
			}
			if frag == "" {
				continue
			}
			if fi.IsDir() || !strings.HasSuffix(target, ".md") {
				t.Errorf("%s: link %q: a fragment into something that is not a markdown page", page, link)
				continue
			}
			body, err := os.ReadFile(filepath.Join("..", target))
			if err != nil {
				t.Fatal(err)
			}
			if !anchors(string(body))[frag] {
				t.Errorf("%s: link %q: %s has no heading with the anchor #%s", page, link, target, frag)
			}
		}
	}
}

// README.md stays a front page, and every reference page is linked from
// it, so that none is found only by browsing the folder.
func TestReadmeIsFrontPage(t *testing.T) {
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n > 400 {
		t.Errorf("README.md has %d lines; it is a front page of at most 400, the reference belongs in docs/", n)
	}
	linked := map[string]bool{}
	for _, m := range mdLink.FindAllStringSubmatch(stripCode(string(data)), -1) {
		file, _, _ := strings.Cut(m[1], "#")
		linked[filepath.Clean(file)] = true
	}
	pages, err := filepath.Glob("../docs/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		rel := strings.TrimPrefix(p, "../")
		if !linked[rel] {
			t.Errorf("README.md does not link %s", rel)
		}
	}
}
