package test

// Metadata under the filesystem rules in subreaper mode (issue 33, finding
// 1; SPEC, Sandbox policy: "metadata included"): Landlock has no right
// for chmod, chown, xattrs or times, so there the socket checker holds
// them. The namespace modes hold them with read-only mounts (tested
// with them).

import (
	"testing"

	"golang.org/x/sys/unix"
)

// fileMeta is what the runner must not have changed about a file.
type fileMeta struct {
	mode  uint32
	uid   uint32
	gid   uint32
	mtime unix.Timespec
	ctime unix.Timespec
	xattr bool
}

func metaOf(t *testing.T, path string) fileMeta {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	_, err := unix.Getxattr(path, "user.corral-test", make([]byte, 16))
	return fileMeta{mode: st.Mode, uid: st.Uid, gid: st.Gid, mtime: st.Mtim, ctime: st.Ctim, xattr: err == nil}
}

func TestCheckerMetadataSubreaper(t *testing.T) {
	t.Parallel()
	m := modes[0]
	if m.name != "subreaper" {
		t.Fatalf("modes[0] is %s, not subreaper", m.name)
	}
	requireLandlock(t, 1)
	e := newEnv(t, m)
	dirs := e.mkdirs("w", "ro", "hid", "ctl")
	w, ro, hid, ctl := dirs[0], dirs[1], dirs[2], dirs[3]
	for _, d := range dirs {
		e.writeFile(d+"/f", "x\n", 0o644)
	}
	e.writeFile(ro+"/rootprog", "#!/bin/sh\n", 0o755)
	e.writeFile(hid+"/secret", "key\n", 0o600)
	ops := func(p string) []string {
		return []string{"chmod:666:" + p, "fchmod-ro:666:" + p, "chown:" + p, "setxattr:" + p, "touch:" + p, "utimes:" + p}
	}
	want := func(p string, res []string) map[string][]string {
		out := map[string][]string{}
		for _, op := range ops(p) {
			out[op] = res
		}
		return out
	}

	// Without a policy, the runner's uid may change each of these: the
	// policy is what stops them below.
	res := e.run(e.args(nil, e.helper(append([]string{"checker-try"}, ops(ctl+"/f")...)...)))
	wantCode(t, res, 0)
	wantTried(t, res, want(ctl+"/f", ok))

	before := map[string]fileMeta{}
	for _, p := range []string{ro + "/f", ro + "/rootprog", hid + "/secret"} {
		before[p] = metaOf(t, p)
	}

	// --writable W --hide HID: outside W refused (EROFS, as a read-only
	// mount says), beneath HID refused (EACCES), beneath W allowed, a
	// chmod +x included.
	tries := append(append(ops(ro+"/f"), ops(hid+"/secret")...), "chmod:755:"+w+"/f")
	tries = append(tries, ops(w + "/f")[1:]...)
	res = e.run(e.args([]string{"--writable", w, "--hide", hid}, e.helper(append([]string{"checker-try"}, tries...)...)))
	wantCode(t, res, 0)
	wantTried(t, res, want(ro+"/f", []string{"EROFS"}))
	wantTried(t, res, want(hid+"/secret", []string{"EACCES"}))
	wantTried(t, res, map[string][]string{"chmod:755:" + w + "/f": ok})
	for _, op := range ops(w + "/f")[1:] {
		wantTried(t, res, map[string][]string{op: ok})
	}
	if got := metaOf(t, w+"/f"); got.mode&0o777 != 0o666 || !got.xattr {
		t.Errorf("beneath --writable: mode %o, xattr %v; want 0666 (fchmod after chmod +x) and the xattr set", got.mode&0o777, got.xattr)
	}

	// --read-only, and the setuid case: a uid-0 runner must not make a
	// root-owned program setuid.
	tries = append(ops(ro+"/f"), "chmod:4755:"+ro+"/rootprog")
	res = e.run(e.args([]string{"--read-only"}, e.helper(append([]string{"checker-try"}, tries...)...)))
	wantCode(t, res, 0)
	wantTried(t, res, want(ro+"/f", []string{"EROFS"}))
	wantTried(t, res, map[string][]string{"chmod:4755:" + ro + "/rootprog": {"EROFS"}})

	// The inode flags (chattr, file_setattr): the checker does not make
	// these calls for the runner, so under a filesystem rule they fail
	// (EPERM) wherever they aim, beneath --writable too; without one they
	// are the runner's to make.
	attrs := func(p string) []string { return []string{"chattr:" + p, "file-setattr:" + p} }
	res = e.run(e.args(nil, e.helper(append([]string{"checker-try"}, attrs(ctl+"/f")...)...)))
	wantCode(t, res, 0)
	wantTried(t, res, map[string][]string{"chattr:" + ctl + "/f": ok, "file-setattr:" + ctl + "/f": ok})
	tries = append(append(attrs(ro+"/f"), attrs(w+"/f")...), attrs(ro+"/rootprog")...)
	res = e.run(e.args([]string{"--writable", w}, e.helper(append([]string{"checker-try"}, tries...)...)))
	wantCode(t, res, 0)
	for _, op := range tries {
		wantTried(t, res, map[string][]string{op: {"EPERM"}})
	}
	if flags := inodeFlags(t, ro+"/rootprog"); flags&0x40 != 0 {
		t.Errorf("%s got the no-dump flag under the policy (flags %#x)", ro+"/rootprog", flags)
	}

	for p, was := range before {
		if now := metaOf(t, p); now != was {
			t.Errorf("%s changed under the policy: %+v, was %+v", p, now, was)
		}
	}
	e.assertGone()
}

// inodeFlags are a file's FS_IOC_GETFLAGS flags.
func inodeFlags(t *testing.T, path string) uint32 {
	t.Helper()
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
	if err != nil {
		t.Fatal(err)
	}
	return flags
}
