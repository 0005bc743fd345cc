package proc

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// readFile reads a small /proc file with open, read and close only, into
// buf (grown if needed). os.ReadFile would also fstat it and try to put it
// in the runtime's poller (fcntl twice, epoll_ctl), tripling the system
// calls of a tree walk, and allocate a buffer per call.
func readFile(path string, buf []byte) ([]byte, error) {
	var fd int
	var err error
	for {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	n := 0
	for {
		if n == len(buf) {
			buf = append(buf[:n], make([]byte, len(buf)+512)...)
			buf = buf[:cap(buf)]
		}
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if m == 0 {
			return buf[:n], nil
		}
		n += m
	}
}

// readDirNames lists a /proc directory with getdents only.
func readDirNames(dir string) ([]string, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	var buf [4096]byte
	var names []string
	for {
		n, err := unix.ReadDirent(fd, buf[:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "readdirent", Path: dir, Err: err}
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

// statPath and childrenPath build the paths without fmt.
func statPath(pid int) string { return "/proc/" + strconv.Itoa(pid) + "/stat" }

func childrenPath(pid, tid int) string {
	return "/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(tid) + "/children"
}
