package egress

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/textproto"
	"strings"

	"golang.org/x/sys/unix"
)

// The proxy is the run's own: every request must carry the credentials
// made for this Proxy (HTTP Proxy-Authorization: Basic, or SOCKS5
// username/password, RFC 1929). Without them another process on the host
// (the proxy listens on the host's loopback in subreaper mode) could reach
// the allowed hosts, appear in the log as the runner and fill the
// connection cap.

// credentials are a Proxy's user and password: random, made by NewProxy,
// given to the runner in the proxy URLs, compared in constant time.
type credentials struct {
	user, pass string
}

// newCredentials reads the kernel's CSPRNG with getrandom(2), as
// crypto/rand does on Linux: linking crypto/rand for 24 bytes brought the
// FIPS 140 module's packages and their initialisers into every corral
// process's start, whether it runs a proxy or not. Where a seccomp
// profile refuses getrandom (older container profiles answer EPERM or
// ENOSYS), /dev/urandom, crypto/rand's own fallback; an error if both
// fail, never weaker credentials.
func newCredentials() (credentials, error) {
	var b [8 + 16]byte
	if err := getrandom(b[:]); err != nil {
		if uerr := urandom(b[:]); uerr != nil {
			return credentials{}, fmt.Errorf("getrandom(2): %v; /dev/urandom: %v", err, uerr)
		}
	}
	return credentials{user: "corral-" + hex.EncodeToString(b[:8]), pass: hex.EncodeToString(b[8:])}, nil
}

func getrandom(b []byte) error {
	for n := 0; n < len(b); {
		m, err := unix.Getrandom(b[n:], 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		n += m
	}
	return nil
}

// urandom fills b from /dev/urandom, refusing anything that is not the
// kernel's random device (a file or a /dev/null bound over it).
func urandom(b []byte) error {
	fd, err := unix.Open("/dev/urandom", unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	// The kernel's urandom is the character device 1:9.
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || unix.Major(st.Rdev) != 1 || unix.Minor(st.Rdev) != 9 {
		return errors.New("not the kernel's random device (character device 1:9)")
	}
	for n := 0; n < len(b); {
		m, err := unix.Read(fd, b[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if m == 0 {
			return io.ErrUnexpectedEOF
		}
		n += m
	}
	return nil
}

// match compares user and pass with the Proxy's, in time that depends on
// neither secret's content.
func (c credentials) match(user, pass string) bool {
	u := constantTimeEqual(user, c.user)
	p := constantTimeEqual(pass, c.pass)
	return u&p == 1
}

// constantTimeEqual is 1 when a and b are equal and 0 otherwise, in time
// that depends on their lengths alone (as crypto/subtle's
// ConstantTimeCompare, which would link the FIPS module for this): every
// byte is compared, and the differences are folded without a branch.
func constantTimeEqual(a, b string) int {
	if len(a) != len(b) {
		return 0
	}
	var v byte
	for i := 0; i < len(a); i++ {
		v |= a[i] ^ b[i]
	}
	return int((uint32(v) - 1) >> 31)
}

// Userinfo is USER:PASS, the part of a proxy URL before "@": the runner's
// proxy variables are http://USER:PASS@ADDR and socks5h://USER:PASS@ADDR.
// Both are lower-case hexadecimal with a "corral-" prefix for the user,
// so they need no escaping in a URL.
func (p *Proxy) Userinfo() string { return p.auth.user + ":" + p.auth.pass }

// The reasons an attempt is refused before its destination is known.
const (
	reasonNoCredentials  = "no proxy credentials"
	reasonBadCredentials = "wrong proxy credentials"
)

// checkBasic checks an HTTP request's Proxy-Authorization against the
// Proxy's credentials and returns "" or why it is refused.
func (c credentials) checkBasic(h textproto.MIMEHeader) string {
	v := h.Values("Proxy-Authorization")
	if len(v) == 0 {
		return reasonNoCredentials
	}
	// Go's client sends the URL's credentials beside a header the
	// program set: the same value twice is one.
	for _, o := range v[1:] {
		if o != v[0] {
			return reasonBadCredentials
		}
	}
	scheme, token, _ := strings.Cut(strings.TrimSpace(v[0]), " ")
	if !strings.EqualFold(scheme, "Basic") {
		return reasonBadCredentials
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(token))
	if err != nil {
		return reasonBadCredentials
	}
	user, pass, _ := strings.Cut(string(raw), ":")
	if !c.match(user, pass) {
		return reasonBadCredentials
	}
	return ""
}
