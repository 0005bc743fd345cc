package pidinit

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A Docker container's table, as runc leaves it: proc at /proc, then its
// masks (/dev/null binds from the container's /dev, a tmpfs over
// directories) and read-only binds of parts of proc onto themselves.
const dockerMountinfo = `540 463 0:52 / / rw,relatime master:208 - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/A:/var/lib/docker/overlay2/l/B,upperdir=/u,workdir=/w
541 540 0:55 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw,hidepid=invisible,subset=pid
542 540 0:56 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755,inode64
466 541 0:56 /null /proc/kcore rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755,inode64
467 541 0:56 /null /proc/keys rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755,inode64
469 541 0:61 / /proc/acpi ro,relatime - tmpfs tmpfs ro,inode64
470 541 0:55 /bus /proc/bus ro,nosuid,nodev,noexec,relatime - proc proc rw,hidepid=invisible,subset=pid
471 541 0:55 /sys /proc/sys ro,nosuid,nodev,noexec,relatime - proc proc rw,hidepid=invisible,subset=pid
472 541 0:55 /sysrq-trigger /proc/sysrq-trigger ro,nosuid,nodev,noexec,relatime - proc proc rw,hidepid=invisible,subset=pid
`

func mustPlan(t *testing.T, table string, uid0, keepGID bool) procPlan {
	t.Helper()
	entries, err := parseMountinfo(table)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	plan, err := planProc(entries, uid0, keepGID)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	return plan
}

// stepsText renders a plan's steps compactly for comparison.
func stepsText(p procPlan) string {
	var out []string
	for _, s := range p.Steps {
		switch s.Kind {
		case stepMask:
			out = append(out, "mask "+s.Path)
		default:
			out = append(out, "bind-"+rwName(s.ReadOnly)+" "+s.Path)
		}
	}
	return strings.Join(out, "; ")
}

func TestPlanProcKeepsDockersRestrictions(t *testing.T) {
	plan := mustPlan(t, dockerMountinfo, false, true)
	if plan.Data != "hidepid=invisible,subset=pid" {
		t.Errorf("proc options: want the caller's hidepid and subset, got %q", plan.Data)
	}
	if plan.Flags&unix.MS_RDONLY != 0 {
		t.Errorf("the caller's /proc is rw: the new one must be too")
	}
	want := "mask kcore; mask keys; mask acpi; bind-read-only bus; bind-read-only sys; bind-read-only sysrq-trigger"
	if got := stepsText(plan); got != want {
		t.Errorf("steps:\n got %s\nwant %s", got, want)
	}
	for _, s := range plan.Steps {
		if s.Kind == stepBind && s.Flags&(unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC) != unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC {
			t.Errorf("%s: nosuid,nodev,noexec of the caller's bind are lost: %#x", s.Path, s.Flags)
		}
	}
}

func TestPlanProcForAUID0Runner(t *testing.T) {
	host := "22 27 0:21 / /proc rw,relatime - proc proc rw\n27 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
	plan := mustPlan(t, host, true, true)
	got := stepsText(plan)
	for _, want := range []string{"bind-read-only sys", "bind-read-only sysrq-trigger", "bind-read-only irq", "mask kcore", "mask keys", "mask timer_list"} {
		if !strings.Contains(got, want) {
			t.Errorf("a uid-0 runner's plan lacks %q: %s", want, got)
		}
	}
	if plan := mustPlan(t, host, false, true); len(plan.Steps) != 0 || plan.Data != "" {
		t.Errorf("a plain host /proc and a non-root runner need nothing beneath: %+v", plan)
	}
	// A caller's read-write bind beneath /proc/sys must not give a uid-0
	// runner write access back.
	rw := host + "30 22 0:21 /sys/net /proc/sys/net rw,nosuid - proc proc rw\n"
	for _, s := range mustPlan(t, rw, true, true).Steps {
		if s.Path == "sys/net" && !s.ReadOnly {
			t.Errorf("sys/net stays writable for a uid-0 runner")
		}
	}
	for _, s := range mustPlan(t, rw, false, true).Steps {
		if s.Path == "sys/net" && s.ReadOnly {
			t.Errorf("sys/net: the caller's bind is read-write, keep it so for a non-root runner")
		}
	}
}

func TestPlanProcHostileTables(t *testing.T) {
	for _, tc := range []struct {
		name     string
		table    string
		uid0     bool
		keepGID  bool
		wantErr  string
		data     string
		steps    string
		readOnly bool
	}{
		{
			name:  "prefix trap: /procfoo and /proc2 are not beneath /proc",
			table: "1 0 0:1 / / rw - ext4 r rw\n2 1 0:2 / /proc rw - proc proc rw\n3 1 0:3 / /procfoo rw - tmpfs t rw\n4 1 0:4 / /proc2 rw - tmpfs t rw\n",
		},
		{
			name:  "escaped spaces and newlines in a mount point",
			table: "1 0 0:1 / / rw - ext4 r rw\n2 1 0:2 / /proc rw - proc proc rw\n3 2 0:3 / /proc/my\\040dir\\012x rw - tmpfs t\\040x rw\n",
			steps: "mask my dir\nx",
		},
		{
			name:  "a path that climbs out of /proc is not beneath it",
			table: "1 0 0:1 / / rw - ext4 r rw\n2 1 0:2 / /proc rw - proc proc rw\n3 2 0:3 / /proc/../etc rw - tmpfs t rw\n",
		},
		{
			name:  "a mount on the covered, lower /proc shows nothing: only the top one counts",
			table: "1 0 0:1 / / rw - ext4 r rw\n2 1 0:2 / /proc rw - proc proc rw,hidepid=2\n3 2 0:3 / /proc/kcore rw - tmpfs t rw\n4 2 0:4 / /proc rw,nosuid - proc proc rw,hidepid=noaccess\n",
			data:  "hidepid=noaccess",
		},
		{
			name:    "the top /proc is not proc at all",
			table:   "1 0 0:1 / / rw - ext4 r rw\n2 1 0:2 / /proc rw - proc proc rw\n4 2 0:4 / /proc rw - tmpfs tmpfs rw\n",
			wantErr: "not proc",
		},
		{
			name:    "no /proc",
			table:   "1 0 0:1 / / rw - ext4 r rw\n",
			wantErr: "no /proc",
		},
		{
			name:     "read-only /proc, with gid kept only when it means the same",
			table:    "1 0 0:1 / / rw - ext4 r rw\n2 1 0:2 / /proc ro,nosuid - proc proc ro,gid=27,hidepid=ptraceable\n",
			keepGID:  true,
			data:     "gid=27,hidepid=ptraceable",
			readOnly: true,
		},
		{
			name:     "gid dropped in another user namespace: only hides more",
			table:    "1 0 0:1 / / rw - ext4 r rw\n2 1 0:2 / /proc ro - proc proc ro,gid=27,hidepid=ptraceable\n",
			data:     "hidepid=ptraceable",
			readOnly: true,
		},
		{
			name:  "a part of proc bound onto another proc path hides it",
			table: "1 0 0:1 / / rw - ext4 r rw\n2 1 0:2 / /proc rw - proc proc rw\n3 2 0:2 /sys/kernel /proc/keys ro - proc proc rw\n",
			steps: "mask keys",
		},
		{
			name:  "a whole other proc over a subdirectory hides it",
			table: "1 0 0:1 / / rw - ext4 r rw\n2 1 0:2 / /proc rw - proc proc rw\n3 2 0:9 / /proc/sys rw - proc proc rw\n",
			steps: "mask sys",
		},
		{
			name:  "parents before children, whatever the table's order; per-process paths skipped",
			table: "1 0 0:1 / / rw - ext4 r rw\n5 3 0:2 /sys/fs/binfmt_misc /proc/sys/fs/binfmt_misc rw - binfmt_misc b rw\n2 1 0:2 / /proc rw - proc proc rw\n3 2 0:2 /sys /proc/sys ro - proc proc rw\n6 2 0:7 /null /proc/1/environ rw - devtmpfs udev rw\n",
			steps: "bind-read-only sys; mask sys/fs/binfmt_misc",
		},
		{
			name:  "a parent cycle is not beneath /proc",
			table: "1 0 0:1 / / rw - ext4 r rw\n2 1 0:2 / /proc rw - proc proc rw\n7 8 0:3 / /proc/a rw - tmpfs t rw\n8 7 0:3 / /proc/b rw - tmpfs t rw\n",
		},
		{
			name:  "optional fields of any number",
			table: "1 0 0:1 / / rw shared:1 master:2 propagate_from:3 - ext4 r rw\n2 1 0:2 / /proc rw shared:12 - proc proc rw\n3 2 0:3 / /proc/kcore rw - devtmpfs udev rw\n",
			steps: "mask kcore",
		},
		{name: "no separator", table: "1 0 0:1 / / rw ext4 r rw\n", wantErr: "format"},
		{name: "too few fields after the separator", table: "1 0 0:1 / / rw - ext4 r\n", wantErr: "format"},
		{name: "a field with a space in it", table: "1 0 0:1 / / rw - ext4 r rw extra\n", wantErr: "format"},
		{name: "id not a number", table: "x 0 0:1 / / rw - ext4 r rw\n", wantErr: "mount id"},
		{name: "negative parent", table: "1 -4 0:1 / / rw - ext4 r rw\n", wantErr: "parent id"},
		{name: "relative mount point", table: "1 0 0:1 / proc rw - proc proc rw\n", wantErr: "not absolute"},
		{name: "truncated escape", table: "1 0 0:1 / /proc\\04 rw - proc proc rw\n", wantErr: "ends inside an escape"},
		{name: "bad escape", table: "1 0 0:1 / /proc\\999 rw - proc proc rw\n", wantErr: "bad escape"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entries, err := parseMountinfo(tc.table)
			var plan procPlan
			if err == nil {
				plan, err = planProc(entries, tc.uid0, tc.keepGID)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want an error containing %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if plan.Data != tc.data {
				t.Errorf("proc options: want %q, got %q", tc.data, plan.Data)
			}
			if got := stepsText(plan); got != tc.steps {
				t.Errorf("steps:\n got %q\nwant %q", got, tc.steps)
			}
			if ro := plan.Flags&unix.MS_RDONLY != 0; ro != tc.readOnly {
				t.Errorf("read-only proc: want %v, got %v", tc.readOnly, ro)
			}
		})
	}
}

func FuzzParseMountinfo(f *testing.F) {
	f.Add(dockerMountinfo)
	f.Add("22 27 0:21 / /proc rw,relatime - proc proc rw\n")
	f.Add("1 0 0:1 / /proc\\040x rw shared:1 - proc proc rw\n")
	f.Fuzz(func(t *testing.T, table string) {
		entries, err := parseMountinfo(table)
		if err != nil {
			return
		}
		plan, err := planProc(entries, true, true)
		if err != nil {
			return
		}
		// Whatever the table says, every step stays beneath /proc and
		// never names a per-process directory.
		for _, s := range plan.Steps {
			if s.Path == "" || strings.HasPrefix(s.Path, "/") || strings.Contains("/"+s.Path+"/", "/../") {
				t.Fatalf("step path %q escapes /proc", s.Path)
			}
			if first, _, _ := strings.Cut(s.Path, "/"); isNumber(first) {
				t.Fatalf("step on a per-process path %q", s.Path)
			}
		}
	})
}
