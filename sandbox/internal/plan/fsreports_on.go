//go:build !corral_nofsreports

package plan

// fsReportsRemoved is true only in a build made to measure what naming
// refused writes costs in namespace modes (fsreports_off.go).
const fsReportsRemoved = false
