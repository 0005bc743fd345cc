//go:build !linux

// corral runs only on Linux: it is built on Linux namespaces, cgroups,
// pidfds, Landlock and seccomp. On any other system this file is the
// package's only one, and the build fails with the one message below
// rather than with every symbol the Linux files would have given.
package main

func main() { corral_needs_Linux() }
