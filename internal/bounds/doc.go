// Package bounds owns how corral turns a configuration value into a number
// it can trust: a command-line flag, else the first set environment variable
// from a precedence list, else a default, always clamped into a closed range.
//
// The rules mirror _bounded_float of the Python supervisor corral replaces
// (whose HERMES_CLI_PROCESS_* variables it still reads, docs/usage.md),
// with one split that the supervisor did not need: a flag is typed by the person starting corral, so a
// malformed flag is reported (a usage error), while an environment value is
// often inherited from far away, so a malformed one quietly falls back to the
// default instead of refusing to start. Out-of-range values are clamped in
// both cases, never rejected.
//
// Policy (which variables, which bounds, which defaults) belongs to the
// caller; this package only knows how to apply it.
package bounds
