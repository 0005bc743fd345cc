// Package test holds corral's integration tests: they build the real corral
// binary and the helper program under test/helper once, then drive corral as
// a user would, in every mode (see modes in main_test.go), and prove from the
// host's /proc that nothing a test started survives it.
//
// Run them as root (they also run corral as uid 65534): go test ./test/.
// With CI=true a mode the kernel cannot provide fails instead of skipping.
package test
