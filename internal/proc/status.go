package proc

import (
	"strings"
)

// ReadStatus reads a status file (/proc/self/status, /proc/thread-self/status,
// /proc/PID/status) and returns its fields, name -> value with the
// surrounding blanks trimmed. It makes three system calls (open, read,
// close; readFile): the runner's privilege read-back and the TIOCSTI
// filter's probe read it on every launch.
func ReadStatus(path string) (map[string]string, error) {
	data, err := readFile(path, make([]byte, 2048))
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
