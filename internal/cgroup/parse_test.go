package cgroup

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-sh/corral/internal/container"
)

// This machine's hybrid layout, as /proc/self/mountinfo shows it.
const hybridMountinfo = `22 1 0:21 / / rw,relatime - ext4 /dev/vda rw
23 22 0:5 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`

const hybridCgroup = `9:name=systemd:/
8:pids:/
4:memory:/process_api/da66f46698a252f2e31cee7ee51e0452
1:cpu:/
0::/
`

func TestParseMountinfo(t *testing.T) {
	mounts, err := parseMountinfo([]byte(hybridMountinfo +
		`50 22 0:40 /with\040space /mnt/a\011tab\012nl\134bs ro,relatime shared:1 master:2 - cgroup2 cgroup2 rw,nsdelegate
51 22 0:41 / /mnt/b rw - cgroup2 none ro
52 22 0:42 / /mnt/c\342\200\250 rw - cgroup2 cgroup2 rw
53 22 0:43 / /mnt/nbsp` + "\u00a0" + `x rw - cgroup2 cgroup2 rw
54 22 0:44 / /mnt/d rw - tmpfs cgroup2 rw
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []mount{
		{root: "/", point: "/sys/fs/cgroup/unified", fstype: "cgroup2"},
		{root: "/with space", point: "/mnt/a\ttab\nnl\\bs", fstype: "cgroup2", readOnly: true},
		{root: "/", point: "/mnt/b", fstype: "cgroup2", readOnly: true},
		{root: "/", point: "/mnt/c\u2028", fstype: "cgroup2"},
		{root: "/", point: "/mnt/nbsp\u00a0x", fstype: "cgroup2"},
	}
	if len(mounts) != len(want) {
		t.Fatalf("got %d mounts, want %d: %+v", len(mounts), len(want), mounts)
	}
	for i := range want {
		if mounts[i] != want[i] {
			t.Errorf("mount %d = %+v, want %+v", i, mounts[i], want[i])
		}
	}
}

func TestParseMountinfoRejectsMalformed(t *testing.T) {
	for _, in := range []string{
		"41 31 0:38 / /sys/fs/cgroup/unified - cgroup2 cgroup2 rw", // "-" where the options go
		"41 31 0:38 / - cgroup2 cgroup2 rw",
		"41 31 0:38 / relative rw - cgroup2 cgroup2 rw",
		"41 31 0:38 relative / rw - cgroup2 cgroup2 rw",
		`41 31 0:38 / /a\04 rw - cgroup2 cgroup2 rw`, // escape cut short
		`41 31 0:38 / /a\ rw - cgroup2 cgroup2 rw`,
		`41 31 0:38 / /a\08x rw - cgroup2 cgroup2 rw`, // not octal
		`41 31 0:38 / /a\777 rw - cgroup2 cgroup2 rw`, // beyond a byte
		`41 31 0:38 / /a\000 rw - cgroup2 cgroup2 rw`, // NUL
		"41 31 0:38 /  /x rw - cgroup2 cgroup2 rw",    // two spaces: an empty field
		hybridMountinfo + "garbage - cgroup2 x\n",     // one bad cgroup2 line spoils the table
	} {
		if mounts, err := parseMountinfo([]byte(in)); err == nil {
			t.Errorf("parseMountinfo(%q) = %+v, want an error", in, mounts)
		} else if !errors.Is(err, errMalformed) {
			t.Errorf("parseMountinfo(%q) error %v does not wrap errMalformed", in, err)
		}
	}
	// Lines that cannot be a cgroup2 mount are not looked at.
	for _, in := range []string{
		"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime cgroup2 cgroup2 rw", // no "-"
		"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2",          // nothing after the fstype
		"garbage\n\n\x00",
	} {
		if mounts, err := parseMountinfo([]byte(in)); err != nil || len(mounts) != 0 {
			t.Errorf("parseMountinfo(%q) = %+v, %v; want nothing", in, mounts, err)
		}
	}
	// An escaped slash still makes an absolute path.
	if mounts, err := parseMountinfo([]byte(`41 31 0:38 / \057x rw - cgroup2 cgroup2 rw`)); err != nil || len(mounts) != 1 || mounts[0].point != "/x" {
		t.Errorf("an escaped slash: %+v, %v; want /x", mounts, err)
	}
}

func TestParseProcCgroup(t *testing.T) {
	for _, tt := range []struct {
		in, path string
		found    bool
	}{
		{hybridCgroup, "/", true},
		{"0::/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope\n", "/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope", true},
		{"0::/a:b:c\n", "/a:b:c", true}, // a colon in a name
		{"0::/sp ace/tab\tx\n", "/sp ace/tab\tx", true},
		{"0::/no-newline-at-end", "/no-newline-at-end", true},
		{"12:pids:/x\n11:name=systemd:/y\n", "", false}, // v1 only
		{"", "", false},
		{"1::/x\n", "", false}, // an id other than 0 is a v1 named hierarchy
	} {
		path, found, err := parseProcCgroup([]byte(tt.in))
		if err != nil || path != tt.path || found != tt.found {
			t.Errorf("parseProcCgroup(%q) = %q, %v, %v; want %q, %v", tt.in, path, found, err, tt.path, tt.found)
		}
	}
}

func TestParseProcCgroupRejectsMalformed(t *testing.T) {
	for _, in := range []string{
		"0::/a\n0::/b\n",      // a name with a newline forging a second v2 line
		"0::/evil\n0::/\n",    // …whichever comes first
		"0::/../../other\n",   // outside this cgroup namespace
		"0::/a/../b\n",        // not clean
		"0::/a//b\n",          //
		"0::/a/\n",            //
		"0::/./a\n",           //
		"0::relative\n",       //
		"0::\n",               // empty path
		"0::/a\x00b\n",        // NUL
		"garbage\n0::/\n",     // a line without ":"
		"8:pids\n0::/\n",      // a line with one ":"
		"0::/a (deleted)\n0:", // a torn second line
	} {
		path, found, err := parseProcCgroup([]byte(in))
		if err == nil {
			t.Errorf("parseProcCgroup(%q) = %q, %v; want an error", in, path, found)
		} else if !errors.Is(err, errMalformed) {
			t.Errorf("parseProcCgroup(%q) error %v does not wrap errMalformed", in, err)
		}
	}
}

func TestParseEvents(t *testing.T) {
	for _, tt := range []struct {
		in        string
		populated bool
	}{
		{"populated 1\nfrozen 0\n", true},
		{"populated 0\nfrozen 0\n", false},
		{"frozen 1\npopulated 0\n", false},
		{"populated 1", true},
		{"newkey 7\npopulated 0\nfrozen 0\n", false},
	} {
		got, err := parseEvents([]byte(tt.in))
		if err != nil || got != tt.populated {
			t.Errorf("parseEvents(%q) = %v, %v; want %v", tt.in, got, err, tt.populated)
		}
	}
	for _, in := range []string{"", "frozen 0\n", "populated\n", "populated 2\n", "populated  1\n", "populated 1\npopulated 0\n", "populated yes\n"} {
		if got, err := parseEvents([]byte(in)); !errors.Is(err, errMalformed) {
			t.Errorf("parseEvents(%q) = %v, %v; want errMalformed", in, got, err)
		}
	}
}

func TestLocate(t *testing.T) {
	for _, tt := range []struct {
		name                string
		mountinfo, cgroup   string
		mount, path, dir    string
		unavailable, reason string
	}{
		{name: "hybrid", mountinfo: hybridMountinfo, cgroup: hybridCgroup,
			mount: "/sys/fs/cgroup/unified", path: "/", dir: "/sys/fs/cgroup/unified"},
		{name: "pure v2, a user scope",
			mountinfo: "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n",
			cgroup:    "0::/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope\n",
			mount:     "/sys/fs/cgroup", path: "/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope",
			dir: "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope"},
		{name: "a container's bind mount of its own subtree",
			mountinfo: "700 600 0:26 /docker/abc /sys/fs/cgroup rw,nosuid - cgroup2 cgroup rw\n",
			cgroup:    "0::/docker/abc/inner\n",
			mount:     "/sys/fs/cgroup", path: "/docker/abc/inner", dir: "/sys/fs/cgroup/inner"},
		{name: "the bind mount is exactly the caller's cgroup",
			mountinfo: "700 600 0:26 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup rw\n",
			cgroup:    "0::/docker/abc\n",
			mount:     "/sys/fs/cgroup", path: "/docker/abc", dir: "/sys/fs/cgroup"},
		{name: "a read-only mount first, a writable one later",
			mountinfo: "1 0 0:26 / /ro ro - cgroup2 cgroup2 rw\n2 0 0:26 / /rw rw - cgroup2 cgroup2 rw\n",
			cgroup:    "0::/x\n", mount: "/rw", path: "/x", dir: "/rw/x"},
		{name: "a mount of another subtree is skipped",
			mountinfo: "1 0 0:26 /docker/other /a rw - cgroup2 cgroup2 rw\n2 0 0:26 / /b rw - cgroup2 cgroup2 rw\n",
			cgroup:    "0::/docker/abc\n", mount: "/b", path: "/docker/abc", dir: "/b/docker/abc"},
		{name: "a sibling whose name extends the mount's root is not inside it",
			mountinfo: "1 0 0:26 /docker/abc /a rw - cgroup2 cgroup2 rw\n",
			cgroup:    "0::/docker/abcdef\n", unavailable: "not visible under any cgroup2 mount"},
		{name: "read-only (a container)",
			mountinfo: "700 600 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup rw\n",
			cgroup:    "0::/\n", unavailable: "read-only"},
		{name: "read-only superblock",
			mountinfo: "700 600 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup ro\n",
			cgroup:    "0::/\n", unavailable: "read-only"},
		{name: "v1 only", mountinfo: "39 31 0:36 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n",
			cgroup: "8:pids:/\n", unavailable: "no cgroup v2 hierarchy"},
		{name: "v2 in /proc/self/cgroup but not mounted", mountinfo: "39 31 0:36 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n",
			cgroup: hybridCgroup, unavailable: "not mounted"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := locate([]byte(tt.mountinfo), []byte(tt.cgroup), container.Unknown)
			if tt.unavailable != "" {
				if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), tt.unavailable) {
					t.Fatalf("locate = %+v, %v; want ErrUnavailable saying %q", p, err, tt.unavailable)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *p != (Parent{Mount: tt.mount, Path: tt.path, Dir: tt.dir}) {
				t.Fatalf("locate = %+v, want {%s %s %s}", *p, tt.mount, tt.path, tt.dir)
			}
		})
	}
}

// Inside a container the engine's, not a mount command to run there, is
// the fix for a missing cgroup v2 (issue 20 point 5); outside, the mount.
func TestLocateHintFitsTheContainer(t *testing.T) {
	v1 := "39 31 0:36 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n"
	for _, cgroup := range []string{hybridCgroup, "8:pids:/\n"} {
		_, err := locate([]byte(v1), []byte(cgroup), container.Podman)
		if !errors.Is(err, ErrUnavailable) || strings.Contains(err.Error(), "mount -t cgroup2") || !strings.Contains(err.Error(), "podman container") {
			t.Errorf("inside podman, %q: %v", cgroup, err)
		}
		_, err = locate([]byte(v1), []byte(cgroup), container.Unknown)
		if !strings.Contains(fmt.Sprint(err), "mount -t cgroup2") {
			t.Errorf("no engine, %q: want the mount command: %v", cgroup, err)
		}
	}
}

// FuzzLocate feeds hostile mount tables and cgroup files to the parsers.
// Invariants: no panic; a malformed file is errMalformed; whatever locate
// accepts names a clean absolute directory at or below a cgroup2 mount
// point; and any path the kernel could print parses back to itself.
func FuzzLocate(f *testing.F) {
	f.Add([]byte(hybridMountinfo), []byte(hybridCgroup), "/a b")
	f.Add([]byte("700 600 0:26 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup rw\n"), []byte("0::/docker/abc/x\n"), "/x\ty")
	f.Add([]byte(`1 0 0:26 / /a\040b rw - cgroup2 cgroup2 rw`), []byte("0::/../x\n0::/\n"), `/\134`)
	f.Fuzz(func(t *testing.T, mountinfo, cgroup []byte, point string) {
		p, err := locate(mountinfo, cgroup, container.Unknown)
		switch {
		case err == nil:
			if !filepath.IsAbs(p.Dir) || filepath.Clean(p.Dir) != p.Dir {
				t.Fatalf("locate gave a directory that is not clean and absolute: %+v", p)
			}
			if p.Dir != p.Mount && !strings.HasPrefix(p.Dir, strings.TrimSuffix(p.Mount, "/")+"/") {
				t.Fatalf("locate gave a directory outside its mount: %+v", p)
			}
			if checkCgroupPath(p.Path) != nil {
				t.Fatalf("locate accepted a bad cgroup path: %+v", p)
			}
		case !errors.Is(err, ErrUnavailable) && !errors.Is(err, errMalformed):
			t.Fatalf("locate error %v is neither ErrUnavailable nor errMalformed", err)
		}
		_, _ = parseEvents(cgroup)

		if !strings.HasPrefix(point, "/") || strings.IndexByte(point, 0) >= 0 {
			return
		}
		line := fmt.Sprintf("1 0 0:1 / %s rw - cgroup2 cgroup2 rw\n", mangle(point))
		mounts, err := parseMountinfo([]byte(line))
		if err != nil || len(mounts) != 1 || mounts[0].point != point {
			t.Fatalf("mount point %q, mangled %q, parsed as %+v, %v", point, line, mounts, err)
		}
	})
}

// mangle escapes a path as the kernel's show_mountinfo does.
func mangle(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\\':
			fmt.Fprintf(&b, `\%03o`, c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
