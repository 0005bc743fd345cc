package main

// landlock-free: how many Landlock layers this process may still add,
// which says from inside whether it was started under a Landlock domain
// (the kernel stacks at most 16 layers, so 16 means none).
//
//	landlock-free                  print "landlock-free N" and exit 0 (N < 0:
//	                               Landlock is not available, with why on stderr)

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// maxLandlockLayers is the kernel's LANDLOCK_MAX_NUM_LAYERS.
const maxLandlockLayers = 16

func cmdLandlockFree(fs *flag.FlagSet) func(*common) error {
	return func(c *common) error {
		if err := c.setup(false); err != nil {
			return err
		}
		free := make(chan int, 1)
		go func() {
			// Layers belong to a thread: stacked on a locked one that dies
			// with this goroutine (it returns locked), so the rest of the
			// process stays as it was.
			runtime.LockOSThread()
			free <- stackLayers()
		}()
		fmt.Printf("landlock-free %d\n", <-free)
		return c.becomeReady()
	}
}

// stackLayers adds Landlock layers to the calling thread until the kernel
// refuses with E2BIG, and returns how many it took; -1 if it refused
// otherwise.
func stackLayers() int {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "landlock-free: no_new_privs: %v\n", err)
		return -1
	}
	attr := [1]uint64{unix.LANDLOCK_ACCESS_FS_EXECUTE} // handled_access_fs alone: the first ABI's struct
	for n := 0; n <= maxLandlockLayers; n++ {
		fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr[0])), unsafe.Sizeof(attr), 0)
		if errno != 0 {
			fmt.Fprintf(os.Stderr, "landlock-free: landlock_create_ruleset: %v\n", errno)
			return -1
		}
		_, _, errno = unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0)
		unix.Close(int(fd))
		if errors.Is(errno, unix.E2BIG) {
			return n
		}
		if errno != 0 {
			fmt.Fprintf(os.Stderr, "landlock-free: landlock_restrict_self: %v\n", errno)
			return -1
		}
	}
	fmt.Fprintf(os.Stderr, "landlock-free: the kernel took more than %d layers\n", maxLandlockLayers)
	return -1
}
