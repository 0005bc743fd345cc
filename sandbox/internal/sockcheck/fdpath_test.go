package sockcheck

import "testing"

func TestProcFDThrough(t *testing.T) {
	for _, c := range []struct {
		path string
		n    int
		rest string
		ok   bool
	}{
		{"/proc/self/fd/3/f", 3, "f", true},
		{"/proc/thread-self/fd/12/a/b", 12, "a/b", true},
		{"/dev/fd/4/", 4, ".", true},
		{"/dev/fd/4//", 4, ".", true},
		{"/proc/self/fd/3", -1, "", false},    // the descriptor itself: procFD's
		{"/proc/self/fd/03/f", -1, "", false}, // not a name /proc has
		{"/proc/self/fd/-1/f", -1, "", false},
		{"/proc/self/fd/x/f", -1, "", false},
		{"/proc/1/fd/3/f", -1, "", false},
		{"/tmp/f", -1, "", false},
	} {
		n, rest, ok := procFDThrough(c.path)
		if n != c.n || rest != c.rest || ok != c.ok {
			t.Errorf("procFDThrough(%q) = %d, %q, %v; want %d, %q, %v", c.path, n, rest, ok, c.n, c.rest, c.ok)
		}
	}
}
