package proc

import "os"

// PID1 reports whether the calling process is PID 1 of its PID namespace:
// the kernel hands it every orphan of the namespace, it cannot be stopped
// from inside, and its parent is outside the namespace. The module's one
// such check.
func PID1() bool { return os.Getpid() == 1 }
