package proc

import (
	"os"
	"strings"
)

// ReadStatus reads a status file (/proc/self/status, /proc/thread-self/status,
// /proc/PID/status) and returns its fields, name -> value with the
// surrounding blanks trimmed.
func ReadStatus(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseStatus(string(data)), nil
}

// ParseStatus splits the text of a status file into its fields. A line
// without a colon is skipped; a name given twice keeps its last value.
func ParseStatus(text string) map[string]string {
	fields := make(map[string]string, 64)
	for line := range strings.SplitSeq(text, "\n") {
		if name, value, ok := strings.Cut(line, ":"); ok {
			fields[name] = strings.TrimSpace(value)
		}
	}
	return fields
}
