package reaper_test

import (
	"fmt"
	"os"
	"time"

	"github.com/corral-sh/corral/reaper"
)

// A runner that leaves a detached helper behind and exits 3: the engine
// adopts the helper, tears it down, and returns once nothing is left,
// with the runner's status.
func Example() {
	res, err := reaper.Run(reaper.Config{
		Start: func() (int, error) {
			p, err := os.StartProcess("/bin/sh",
				[]string{"sh", "-c", "setsid sleep 60 >/dev/null 2>&1 & exit 3"},
				&os.ProcAttr{Files: []*os.File{os.Stdin, os.Stdout, os.Stderr}})
			if err != nil {
				return 0, err
			}
			pid := p.Pid
			// The engine is the only waiter: drop the handle, never Wait.
			p.Release()
			return pid, nil
		},
		Grace: 5 * time.Second, // SIGTERM, then SIGKILL after this long
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("exit code", res.ExitCode)
	// Output: exit code 3
}
