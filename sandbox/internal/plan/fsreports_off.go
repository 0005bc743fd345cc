//go:build corral_nofsreports

package plan

// fsReportsRemoved: this build never asks for the namespace modes' naming
// of refused writes (withFSReports), as on a kernel without user
// notification. It exists for one benchmark only (test/mounts_bench_test.go),
// which sets what the filesystem rules cost apart from what naming their
// refusals costs: "shown by removal". No release is built with the tag.
const fsReportsRemoved = true
