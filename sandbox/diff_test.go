package sandbox

import (
	"strings"
	"testing"
)

func TestUnifiedDiff(t *testing.T) {
	a := lines([]byte("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n"))
	b := lines([]byte("1\n2\nthree\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13"))
	var out strings.Builder
	unified(&out, a, b, 3)
	want := "@@ -1,6 +1,6 @@\n 1\n 2\n-3\n+three\n 4\n 5\n 6\n@@ -10,3 +10,4 @@\n 10\n 11\n 12\n+13\n\\ No newline at end of file\n"
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), want)
	}
}
