package plan

import (
	"fmt"
	"strings"

	"github.com/corral-sh/corral/internal/bounds"
	"github.com/moby/sys/capability"
)

// ParseCap accepts a capability name as in capabilities(7), with or
// without the CAP_ prefix, in any case: "NET_BIND_SERVICE",
// "cap_net_bind_service".
func ParseCap(name string) (int, error) {
	want := strings.ToLower(strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(name)), "CAP_"))
	last, err := capability.LastCap()
	if err != nil {
		return 0, fmt.Errorf("read the kernel's last capability: %w", err)
	}
	for _, c := range capability.ListKnown() {
		if c.String() == want {
			if c > last {
				return 0, fmt.Errorf("capability %s is not supported by this kernel", bounds.Quote(name))
			}
			return int(c), nil
		}
	}
	return 0, fmt.Errorf("unknown capability %s: see capabilities(7), e.g. NET_BIND_SERVICE", bounds.Quote(name))
}

// CapName is the capabilities(7) name of c, e.g. CAP_NET_BIND_SERVICE.
func CapName(c int) string {
	return "CAP_" + strings.ToUpper(capability.Cap(c).String())
}

// undoing are the capabilities that let the runner undo the sandbox or act
// on corral itself (SPEC.md, "Privileges of the runner"), each with what
// it would let the runner do. CAP_MKNOD is among them: Landlock grants the
// right to make block devices beneath a --writable path, and with
// CAP_MKNOD a device node of the disk there reads and writes every file
// past every rule. CAP_DAC_READ_SEARCH is not: Landlock checks a file
// opened by handle (open_by_handle_at) as any other.
var undoing = map[capability.Cap]string{
	capability.CAP_SYS_ADMIN:  "the runner could mount, enter a bind-mounted namespace file (setns) and load BPF programs, and so leave every boundary corral builds",
	capability.CAP_SYS_PTRACE: "the runner could trace corral's own processes (ptrace, process_vm_writev, pidfd_getfd) and take them over, so containment no longer holds",
	capability.CAP_SYS_MODULE: "the runner could load kernel modules: any code in the kernel",
	capability.CAP_BPF:        "the runner could load BPF programs and maps, which neither Landlock nor the socket filter confines",
	capability.CAP_NET_ADMIN:  "the runner could reconfigure the network it is in (interfaces, routes, firewall rules) and so undo the network policy",
	capability.CAP_SYS_RAWIO:  "the runner could reach memory and devices directly (/dev/mem, raw disk I/O, I/O ports), past every filesystem rule",
	capability.CAP_MKNOD:      "the runner could create a device node of a disk beneath a writable path and read and write every file through it, past every filesystem rule",
}

// CapCost says what keeping capability c would let the runner do against
// the sandbox or corral; "" for a capability that does not undo them.
func CapCost(c int) string { return undoing[capability.Cap(c)] }
