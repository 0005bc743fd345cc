package plan

// How each mode holds what Landlock cannot (docs/sandbox.md, "Metadata",
// "Protected paths beneath a writable one"): namespace modes with mounts
// the exec stage makes, subreaper mode with the checker.

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

// WithProtection sets the protected paths under a --writable rule,
// computed from f. Each mode holds them its own way: namespace modes
// bind what exists read-only in the runner's mount namespace (no cost per
// call; withMounts) and move aside what the run created at an absent
// protected name when it ends; subreaper mode, which has no mount
// namespace, hands every call that could write to the engine's checker
// (withCheckedWrites). A run without --writable has nothing to protect
// (under --read-only nothing is writable at all).
func (p Plan) WithProtection(f ProtectFacts) Plan {
	w := f.Writable
	if len(p.Privileges.Landlock.Writable) == 0 || len(w) == 0 {
		return p
	}
	p.Privileges.Protect = Protect(w, f)
	p.Privileges.Protect.Writable = w
	return p
}

// withCheckedWrites asks, where the protected paths cannot be mounts
// (subreaper mode), for the checker's write-intent calls: every open for
// writing, create, rename, link and unlink is made by the engine on what
// it resolved (Privileges.NotifyWrites). Each costs a round trip to the
// checker; namespace modes never pay it.
func (p Plan) withCheckedWrites() Plan {
	// Under --read-only every write is refused: checked too, so that
	// each is named.
	p.Privileges.NotifyWrites = !p.Privileges.Protect.Empty() || p.Privileges.Landlock.ReadOnly
	return p
}

// withFSReports asks, in a namespace mode under a filesystem rule, for
// the write-intent and metadata calls and a mounting sandbox's calls to
// go to the engine's checker, which names what the mounts and Landlock
// will refuse and lets each call run (SPEC, "Refusals are named"): Landlock
// refuses silently. Each such call costs a round trip to the checker; a
// read-only open, and any run without a filesystem rule, none.
func (p Plan) withFSReports() Plan {
	if !p.Privileges.MountRules() || fsReportsRemoved {
		return p
	}
	pv := &p.Privileges
	pv.NotifyWrites, pv.NotifyMetadata, pv.ReportFS, pv.NotifyMounts = true, true, true, true
	return p
}

// withMountNames asks, in subreaper mode under a filesystem rule, for a
// mounting sandbox's calls to go to the checker, which names the first.
func (p Plan) withMountNames() Plan {
	p.Privileges.NotifyMounts = p.Privileges.MountRules()
	return p
}

// WithoutFSReports is the plan where the kernel (or an outer seccomp
// profile) has no user notification: the namespace modes' naming of
// refused writes is observability, not enforcement (the mounts and
// Landlock hold), so the run goes on without it rather than fail where
// it ran before.
func (p Plan) WithoutFSReports() Plan {
	if !p.Privileges.ReportFS {
		return p
	}
	pv := &p.Privileges
	pv.NotifyWrites, pv.NotifyMetadata, pv.ReportFS, pv.NotifyMounts = false, false, false, false
	return p
}
