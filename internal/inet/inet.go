// Package inet turns the kernel's socket addresses into netip's, for every
// process role that asks a socket where it is bound or connected (the
// engine's checker, the pidns init's relay).
package inet

import (
	"net/netip"

	"golang.org/x/sys/unix"
)

// AddrPort is sa's address and port; the zero AddrPort for anything but
// an IPv4 or IPv6 address.
func AddrPort(sa unix.Sockaddr) netip.AddrPort {
	switch s := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(s.Addr), uint16(s.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(s.Addr), uint16(s.Port))
	}
	return netip.AddrPort{}
}

// Sockname is the address socket fd is bound to.
func Sockname(fd int) (netip.AddrPort, error) {
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return netip.AddrPort{}, err
	}
	ap := AddrPort(sa)
	if !ap.IsValid() {
		return netip.AddrPort{}, unix.EAFNOSUPPORT
	}
	return ap, nil
}

// Peername is the address socket fd is connected to.
func Peername(fd int) (netip.AddrPort, error) {
	sa, err := unix.Getpeername(fd)
	if err != nil {
		return netip.AddrPort{}, err
	}
	ap := AddrPort(sa)
	if !ap.IsValid() {
		return netip.AddrPort{}, unix.EAFNOSUPPORT
	}
	return ap, nil
}
