package seccomp

import "testing"

func TestReleaseAtLeast(t *testing.T) {
	for _, c := range []struct {
		release string
		want    bool
	}{
		{"6.18.44-fc-v1272", true},
		{"5.14.0-427.el9.x86_64", true},
		{"5.13.19", false},
		{"5.10.0-28-amd64", false},
		{"4.19.0", false},
		{"garbage", true},
	} {
		if got := releaseAtLeast(c.release, 5, 14); got != c.want {
			t.Errorf("releaseAtLeast(%q, 5, 14) = %v, want %v", c.release, got, c.want)
		}
	}
}
