package sandbox

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Every re-executed stage gets stdin, stdout and stderr, then these two:
const (
	reportFD = 3 // write end: bytes mean "setup failed, here is why"; EOF means done
	specFD   = 4 // read end: the stage's JSON spec (a pipe, not argv, so ps stays readable)
)

// spawnStage starts the corral binary as the stage named arg0 with spec
// as its input, and returns its pid and the read end of its report pipe.
// The caller does not wait for it here: whoever owns wait4 reaps it.
func spawnStage(arg0 string, spec any, attr syscall.ProcAttr) (int, *os.File, error) {
	data, err := json.Marshal(spec)
	if err != nil {
		return 0, nil, err
	}
	report, reportW, err := os.Pipe()
	if err != nil {
		return 0, nil, fmt.Errorf("report pipe: %w", err)
	}
	specR, specW, err := os.Pipe()
	if err != nil {
		report.Close()
		reportW.Close()
		return 0, nil, fmt.Errorf("spec pipe: %w", err)
	}
	attr.Files = []uintptr{0, 1, 2, reportW.Fd(), specR.Fd()}
	// /proc/self/exe names the running binary even if its path was
	// replaced or removed since corral started.
	pid, err := syscall.ForkExec("/proc/self/exe", []string{arg0}, &attr)
	reportW.Close()
	specR.Close()
	if err != nil {
		specW.Close()
		report.Close()
		return 0, nil, err
	}
	// A spec larger than the pipe buffer would block until the child reads
	// it; the child reads it first thing, but do not make our progress
	// depend on that.
	go func() {
		_, _ = specW.Write(data)
		specW.Close()
	}()
	return pid, report, nil
}

// readStageSpec is the child side: it marks the report pipe close-on-exec
// (so a successful execve reads as EOF) and decodes the spec.
func readStageSpec(v any) (*os.File, error) {
	unix.CloseOnExec(reportFD)
	report := os.NewFile(reportFD, "report")
	spec := os.NewFile(specFD, "spec")
	defer spec.Close()
	data, err := io.ReadAll(spec)
	if err != nil {
		return report, fmt.Errorf("read stage spec: %w", err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return report, fmt.Errorf("decode stage spec: %w", err)
	}
	return report, nil
}

// isStage reports whether this process was started as the stage arg0.
func isStage(arg0 string) bool { return len(os.Args) == 1 && os.Args[0] == arg0 }
