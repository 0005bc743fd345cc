package plan

// MountRules reports whether a namespace mode holds the filesystem rules
// with mounts too (package runner, mounts.go): Landlock has no right for
// metadata (chmod, chown, xattrs, times) and cannot carve a protected path
// out of a writable one, while a read-only mount refuses every change
// with EROFS, at no cost per call. Only a filesystem rule asks for it: a
// run without one has nothing new.
func (p Privileges) MountRules() bool {
	l := p.Landlock
	return len(l.Writable) > 0 || l.ReadOnly || len(l.Hide) > 0
}

// withMounts asks the exec stage of a namespace mode for the mounts.
func (p Plan) withMounts() Plan {
	p.Privileges.Mounts = p.Privileges.MountRules()
	return p
}
