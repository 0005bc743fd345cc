// Package stage is what crosses between corral's processes: the one
// message table (messages.go), the run's plan (plan.go), the link that
// carries both over a stage socket (link.go), and the contracts by which
// package sandbox hands one role's code to another's process (roles.go).
//
// It is the only package beneath sandbox/internal that every role imports,
// and it imports none of them: a role package (runner, pidinit, supervise,
// probe) talks to another only through what is declared here. See
// docs/ARCHITECTURE.md for the roles and the message flow.
package stage
