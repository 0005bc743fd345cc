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
