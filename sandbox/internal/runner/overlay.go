package runner

import (
	"errors"
	"os"
	"strings"

	"github.com/corral-sh/corral/internal/setuperr"
	"github.com/corral-sh/corral/sandbox/internal/plan"
	"golang.org/x/sys/unix"
)

// mountOverlays mounts each --overlay layer over its DIR in the runner's
// mount namespace (SPEC, "Copy-on-write workspace"), before the
// read-only remount and Landlock: DIR is then one of the writable paths,
// and every change the runner makes beneath it lands in the upper layer.
//
// In a user namespace overlayfs mounts only with userxattr (Linux 5.11),
// which keeps its whiteouts' and opaque directories' marks in user.*
// xattrs; as real root the trusted.* ones. redirect_dir and metacopy are
// off in both, so that the upper layer alone says what changed (a
// renamed lower directory is then EXDEV, and tools copy it instead).
func mountOverlays(ovs []plan.OverlayMount) error {
	userns := inUserNamespace()
	for _, o := range ovs {
		opts := "lowerdir=" + escapeOpt(o.Dir) + ",upperdir=" + escapeOpt(o.Upper) + ",workdir=" + escapeOpt(o.Work) + ",index=off"
		if userns {
			// userxattr turns redirect_dir and metacopy off itself (and
			// refuses redirect_dir=off beside it where the kernel's
			// default is to follow redirects).
			opts += ",userxattr"
		} else {
			opts += ",redirect_dir=off,metacopy=off"
		}
		// volatile: no syncfs of the upper layer's whole file system when
		// the layer is unmounted (the runner's mount namespace ending at
		// the teardown), which made corral's exit wait for every dirty
		// page of that file system, the host's other work included. The
		// layer is as durable as the same writes made to DIR directly:
		// written back as any file is. The work folder's mark that it
		// asks a later mount to refuse does not matter: the layer is
		// never mounted again, apply reads it as plain files. Linux 5.10;
		// a kernel without it mounts without.
		err := unix.Mount("overlay", o.Dir, "overlay", 0, opts+",volatile")
		if errors.Is(err, unix.EINVAL) {
			err = unix.Mount("overlay", o.Dir, "overlay", 0, opts)
		}
		if err != nil {
			return overlayError(o.Dir, err)
		}
	}
	return nil
}

// escapeOpt escapes the characters overlayfs splits its options at.
func escapeOpt(p string) string {
	r := strings.NewReplacer(`\`, `\\`, `,`, `\,`, `:`, `\:`)
	return r.Replace(p)
}

// inUserNamespace reports whether this process runs in a user namespace
// other than the initial one (whose map is the whole identity range).
func inUserNamespace() bool {
	data, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return true
	}
	f := strings.Fields(string(data))
	return !(len(f) == 3 && f[0] == "0" && f[1] == "0" && f[2] == "4294967295")
}

func overlayError(dir string, err error) *setuperr.SetupError {
	s := &setuperr.SetupError{Step: "--overlay " + dir + ": mount the copy-on-write layer", Err: err,
		Hint: "corral does not run the command without the layer it was asked for"}
	switch {
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOTSUP):
		s.Hint = "the file system of " + dir + " (or of the changes folder) cannot serve as an overlayfs layer (see dmesg); put DIR, or --changes, on another file system, or use --writable"
	case errors.Is(err, unix.ENODEV):
		s.Hint = "this kernel has no overlayfs (modprobe overlay)"
	case errors.Is(err, unix.EPERM):
		s.Hint = "overlayfs refused the mount here: in a user namespace it needs Linux 5.11 or later"
	}
	return s
}
