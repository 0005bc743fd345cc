package proc

import (
	"fmt"
	"strings"
)

// UnescapeMountField undoes the kernel's mangling of a path or name in
// /proc/PID/mountinfo: a space, tab, newline or backslash is written as a
// backslash and three octal digits (fs/proc_namespace.c, mangle()).
// A truncated or non-octal escape, or one beyond a byte, is an error.
func UnescapeMountField(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+4 > len(s) {
			return "", fmt.Errorf("mountinfo field %q ends inside an escape", s)
		}
		v := 0
		for _, c := range s[i+1 : i+4] {
			if c < '0' || c > '7' {
				return "", fmt.Errorf("mountinfo field %q has a bad escape %q", s, s[i:i+4])
			}
			v = v*8 + int(c-'0')
		}
		if v > 0xff {
			return "", fmt.Errorf("mountinfo field %q has an escape beyond a byte", s)
		}
		b.WriteByte(byte(v))
		i += 3
	}
	return b.String(), nil
}
