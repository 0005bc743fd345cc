package pidinit

import (
	"encoding/binary"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// addLoopbackAddr adds a (a host address: /32, /128) to "lo" with one
// rtnetlink RTM_NEWADDR, as `ip addr add A dev lo` would; an address
// already there is fine. IPv6 addresses skip duplicate address detection,
// so they can be bound at once.
func addLoopbackAddr(a netip.Addr) error {
	ifi, err := loopbackIndex()
	if err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	family, bits := unix.AF_INET, 32
	if a.Is6() {
		family, bits = unix.AF_INET6, 128
	}
	raw := a.AsSlice()
	attr := func(typ uint16, data []byte) []byte {
		l := unix.SizeofRtAttr + len(data)
		b := make([]byte, (l+3)&^3)
		binary.NativeEndian.PutUint16(b[0:], uint16(l))
		binary.NativeEndian.PutUint16(b[2:], typ)
		copy(b[unix.SizeofRtAttr:], data)
		return b
	}
	body := make([]byte, unix.SizeofIfAddrmsg)
	*(*unix.IfAddrmsg)(unsafe.Pointer(&body[0])) = unix.IfAddrmsg{Family: uint8(family), Prefixlen: uint8(bits),
		Flags: unix.IFA_F_NODAD, Scope: unix.RT_SCOPE_HOST, Index: uint32(ifi)}
	body = append(body, attr(unix.IFA_LOCAL, raw)...)
	body = append(body, attr(unix.IFA_ADDRESS, raw)...)
	msg := make([]byte, unix.SizeofNlMsghdr, unix.SizeofNlMsghdr+len(body))
	*(*unix.NlMsghdr)(unsafe.Pointer(&msg[0])) = unix.NlMsghdr{Len: uint32(unix.SizeofNlMsghdr + len(body)),
		Type: unix.RTM_NEWADDR, Flags: unix.NLM_F_REQUEST | unix.NLM_F_ACK | unix.NLM_F_CREATE | unix.NLM_F_REPLACE, Seq: 1}
	msg = append(msg, body...)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return err
		}
		for b := buf[:n]; len(b) >= unix.SizeofNlMsghdr; {
			h := (*unix.NlMsghdr)(unsafe.Pointer(&b[0]))
			l := int(h.Len)
			if l < unix.SizeofNlMsghdr || l > len(b) {
				return unix.EBADMSG
			}
			if h.Type == unix.NLMSG_ERROR && h.Seq == 1 && l >= unix.SizeofNlMsghdr+4 {
				e := -int32(binary.NativeEndian.Uint32(b[unix.SizeofNlMsghdr:]))
				if e != 0 && unix.Errno(e) != unix.EEXIST {
					return unix.Errno(e)
				}
				return nil
			}
			b = b[min((l+3)&^3, len(b)):]
		}
	}
}

// loopbackIndex is the interface index of "lo".
func loopbackIndex() (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return 0, err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFINDEX, ifr); err != nil {
		return 0, err
	}
	return int(ifr.Uint32()), nil
}
