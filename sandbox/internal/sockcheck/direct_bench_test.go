package sockcheck

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func init() { scenarios["bench-download"] = scenarioBenchDownload }

// benchDownloadBytes is one download of BenchmarkDirectDownload.
const benchDownloadBytes = 200 << 20

// scenarioBenchDownload times a connect and a 200 MB download from a
// source server, as a client that ignores the proxy variables makes them
// in subreaper mode: first with no filter, then with the checker making
// the connect (Policy.Direct admits the address), the bytes flowing on the
// runner's own socket. Each way is timed three times, interleaved, and the
// best kept. It prints "BENCH PLAIN-NS CHECKED-NS PLAIN-FIRST CHECKED-FIRST",
// nanoseconds per download and to the first byte.
func scenarioBenchDownload(c *child) {
	port := envInt("SOURCE")
	buf := make([]byte, 1<<20)
	once := func() (total, first time.Duration) {
		start := time.Now()
		fd := tcpSocket(c, unix.AF_INET)
		defer unix.Close(fd)
		if e := rawConnect(fd, sockaddr4(lo, port)); e != 0 {
			c.fatalf("connect: %v", errName(e))
		}
		unix.Write(fd, []byte{1}) // ask
		for got := 0; got < benchDownloadBytes; {
			n, err := unix.Read(fd, buf)
			if err != nil || n == 0 {
				c.fatalf("read after %d bytes: %v", got, err)
			}
			if got == 0 {
				first = time.Since(start)
			}
			got += n
		}
		return time.Since(start), first
	}
	best := func(d, b time.Duration) time.Duration {
		if b == 0 || d < b {
			return d
		}
		return b
	}
	var plain, plainFirst, checked, checkedFirst time.Duration
	once() // warm-up
	for range 3 {
		t, f := once()
		plain, plainFirst = best(t, plain), best(f, plainFirst)
	}
	c.install(true)
	once()
	for range 3 {
		t, f := once()
		checked, checkedFirst = best(t, checked), best(f, checkedFirst)
	}
	fmt.Printf("BENCH %d %d %d %d\n", plain.Nanoseconds(), checked.Nanoseconds(), plainFirst.Nanoseconds(), checkedFirst.Nanoseconds())
}

// BenchmarkDirectDownload (issue 34): in subreaper mode a client that
// ignores the proxy variables gets its own socket connected by the
// checker, and no byte passes through corral: a 200 MB download's
// throughput against the same without any filter (goal ≥ 0.95×), and the
// time to its first byte (goal ≤ +0.1 ms).
func BenchmarkDirectDownload(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	chunk := make([]byte, 1<<20)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var one [1]byte
				if _, err := c.Read(one[:]); err != nil {
					return
				}
				for sent := 0; sent < benchDownloadBytes; sent += len(chunk) {
					if _, err := c.Write(chunk); err != nil {
						return
					}
				}
			}()
		}
	}()
	src := netip.MustParseAddrPort(ln.Addr().String())
	pol := Policy{Net: true, TCP: true, StaticCreds: true, Direct: func(a netip.AddrPort) bool { return a == src }}
	// Each iteration is one runner: the median of each figure over them.
	var plains, checkeds, plainFirsts, checkedFirsts []int64
	for range max(b.N, 1) {
		ck, cmd, buf := start(b, "bench-download", pol, fmt.Sprintf("CORRAL_SOCKCHECK_SOURCE=%d", src.Port()))
		err := cmd.Wait()
		closeChecker(b, ck)
		if err != nil {
			b.Fatalf("bench runner: %v: %s", err, buf)
		}
		out := buf.String()
		var plain, checked, plainFirst, checkedFirst int64
		if _, err := fmt.Sscanf(out[strings.Index(out, "BENCH"):], "BENCH %d %d %d %d", &plain, &checked, &plainFirst, &checkedFirst); err != nil {
			b.Fatalf("no figures: %s", out)
		}
		plains, checkeds = append(plains, plain), append(checkeds, checked)
		plainFirsts, checkedFirsts = append(plainFirsts, plainFirst), append(checkedFirsts, checkedFirst)
	}
	median := func(v []int64) int64 { slices.Sort(v); return v[len(v)/2] }
	plain, checked, plainFirst, checkedFirst := median(plains), median(checkeds), median(plainFirsts), median(checkedFirsts)
	mbs := func(ns int64) float64 { return float64(benchDownloadBytes) / 1e6 / (float64(ns) / 1e9) }
	b.ReportMetric(mbs(plain), "MB/s-direct")
	b.ReportMetric(mbs(checked), "MB/s-checked")
	b.ReportMetric(float64(checkedFirst-plainFirst), "ns/first-byte-added")
}
