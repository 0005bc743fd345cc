// Package reaper is corral's engine: it starts the runner, is the single
// owner of wait4 for every process below it, keeps the adoption accounting,
// forwards signals, and tears the tree down with grace and escalation.
//
// With a JobControl (terminal mode) it also follows the runner's stops
// with WUNTRACED and continues the runner's process group (jobcontrol.go).
//
// It behaves the same as PID 1 of a PID namespace and as a child subreaper
// in the caller's namespaces; it knows nothing about how the runner's
// boundary was built (see package sandbox) nor about flags (see cmd/corral).
package reaper
