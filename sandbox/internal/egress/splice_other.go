//go:build !linux

package egress

import "net"

// spliceStream is Linux's; elsewhere every stream is copied through a
// buffer.
func spliceStream(dst, src net.Conn, fallback func(dst, src net.Conn) (int64, error)) (int64, error, bool) {
	return 0, nil, false
}

func spliceStreamN(dst, src net.Conn, limit int64, fallback func(dst, src net.Conn) (int64, error)) (int64, error, bool) {
	return 0, nil, false
}
