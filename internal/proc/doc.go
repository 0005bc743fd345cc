// Package proc reads the parts of /proc that the engine needs: a process's
// stat line, its direct children, and its descendants; and it signals a
// process only while it is still the process that was observed.
//
// It holds no policy: what to signal, and when, is the reaper's business.
package proc
