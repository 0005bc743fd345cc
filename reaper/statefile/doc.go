// Package statefile owns corral's optional state file: the fixed set of keys
// it may contain (Document) and the only code that writes it (Writer).
//
// The file sits in a folder the supervised runner can usually write to, so
// the writer treats that folder as hostile. The directory is opened once, when
// corral starts and before the runner exists; every later write goes through
// that handle, creating a fresh temp file beside the target (exclusive,
// no-follow, mode 0600) and renaming it over the target. A runner that plants
// a symlink at the target only gets its symlink replaced, and one that swaps
// the folder for a symlink cannot redirect the writes anywhere but the
// original folder. Readers never see a half-written document.
//
// The state file is observability, never control: a failure to write it must
// not change how the runner is supervised or what corral exits with. The
// writer therefore never fails loudly; it says so once on the warning stream
// and carries on.
package statefile
