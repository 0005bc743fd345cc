// Package reaper is corral's engine: it starts the runner, is the single
// owner of wait4 for every process below it, keeps the adoption accounting,
// forwards signals, and tears the tree down with grace and escalation.
//
// It behaves the same as PID 1 of a PID namespace and as a child subreaper
// in the caller's namespaces; it knows nothing about how the runner's
// boundary was built (see package sandbox) nor about flags (see cmd/corral).
package reaper
