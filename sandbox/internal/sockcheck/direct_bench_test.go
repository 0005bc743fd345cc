package sockcheck

import (
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func init() { scenarios["bench-download"] = scenarioBenchDownload }

// benchDownloadBytes is one download of BenchmarkDirectDownload.
const benchDownloadBytes = 200 << 20

// What the bench-download runner asks the source server for, in its one
// request byte: a whole download, or one byte (a connection's first
// byte, then the server closes).
const (
	askDownload = 1
	askFirst    = 2
)

// Per runner of BenchmarkDirectDownload: connections timed to their first
// byte, and downloads, each way.
const (
	benchFirsts    = 200
	benchDownloads = 2
)

// scenarioBenchDownload times connections to a source server as a client
// that ignores the proxy variables makes them in subreaper mode: with no
// filter, and with the checker making the connect (Policy.Direct admits
// the address), the bytes flowing on the runner's own socket. The two
// ways alternate, one of each per round, starting with the other way
// each round, so that the machine's load weighs on both alike: the
// unchecked connections run on a thread of their own that is locked
// before the filter goes on the main thread (a filter without TSYNC is
// its thread's alone, and new threads never come from a locked one), the
// checked ones on the main thread. Each connection is timed from its
// socket(2) to its first byte (benchFirsts rounds: a one-byte answer),
// then each way makes benchDownloads whole downloads. It prints one line
// per figure and way, the nanoseconds of each sample: "BENCH-FIRST-PLAIN
// N N ...", BENCH-FIRST-CHECKED, BENCH-DOWNLOAD-PLAIN,
// BENCH-DOWNLOAD-CHECKED.
func scenarioBenchDownload(c *child) {
	port := envInt("SOURCE")
	// once makes one connection and reads the answer to ask: its time to
	// the first byte, and to the last.
	once := func(buf []byte, ask byte) (total, first time.Duration) {
		start := time.Now()
		fd := tcpSocket(c, unix.AF_INET)
		defer unix.Close(fd)
		if e := rawConnect(fd, sockaddr4(lo, port)); e != 0 {
			c.fatalf("connect: %v", errName(e))
		}
		unix.Write(fd, []byte{ask})
		want := 1
		if ask == askDownload {
			want = benchDownloadBytes
		}
		for got := 0; got < want; {
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
	type result struct{ total, first time.Duration }
	asks, results := make(chan byte), make(chan result)
	go func() {
		runtime.LockOSThread() // never unlocked: this thread never gets the filter
		buf := make([]byte, 1<<20)
		for ask := range asks {
			t, f := once(buf, ask)
			results <- result{t, f}
		}
	}()
	plain := func(ask byte) result { asks <- ask; return <-results }
	plain(askFirst) // its thread is locked and warm before the filter goes on
	c.install(true)
	buf := make([]byte, 1<<20)
	checked := func(ask byte) result { t, f := once(buf, ask); return result{t, f} }
	checked(askFirst)
	var firstPlain, firstChecked, dlPlain, dlChecked []time.Duration
	for i := range benchFirsts + benchDownloads {
		ask := byte(askFirst)
		if i >= benchFirsts {
			ask = askDownload
		}
		var p, k result
		if i%2 == 0 {
			p, k = plain(ask), checked(ask)
		} else {
			k, p = checked(ask), plain(ask)
		}
		if ask == askFirst {
			firstPlain, firstChecked = append(firstPlain, p.first), append(firstChecked, k.first)
		} else {
			dlPlain, dlChecked = append(dlPlain, p.total), append(dlChecked, k.total)
		}
	}
	close(asks)
	for _, l := range []struct {
		name string
		v    []time.Duration
	}{{"FIRST-PLAIN", firstPlain}, {"FIRST-CHECKED", firstChecked}, {"DOWNLOAD-PLAIN", dlPlain}, {"DOWNLOAD-CHECKED", dlChecked}} {
		var b strings.Builder
		b.WriteString("BENCH-" + l.name)
		for _, d := range l.v {
			b.WriteString(" " + strconv.FormatInt(d.Nanoseconds(), 10))
		}
		fmt.Println(b.String())
	}
}

// BenchmarkDirectDownload (issue 34): in subreaper mode a client that
// ignores the proxy variables gets its own socket connected by the
// checker, and no byte passes through corral: a 200 MB download's
// throughput against the same without any filter (goal ≥ 0.95×), and the
// time to a new connection's first byte (goal ≤ +0.1 ms). Each iteration
// is one runner (scenarioBenchDownload: the two ways in turns); each
// figure is the median of every sample of every runner, each way.
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
				var ask [1]byte
				if _, err := c.Read(ask[:]); err != nil {
					return
				}
				if ask[0] == askFirst {
					c.Write(ask[:])
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
	samples := map[string][]int64{}
	for range max(b.N, 1) {
		ck, cmd, buf := start(b, "bench-download", pol, fmt.Sprintf("CORRAL_SOCKCHECK_SOURCE=%d", src.Port()))
		err := cmd.Wait()
		closeChecker(b, ck)
		if err != nil {
			b.Fatalf("bench runner: %v: %s", err, buf)
		}
		// Every checked connect came to the checker, and no unchecked
		// one did (else the two ways would be one).
		if n, checked := ck.stats.received.Load(), int64(1+benchFirsts+benchDownloads); n < checked || n >= checked+benchFirsts {
			b.Fatalf("the checker saw %d calls for %d checked connects: the unchecked thread is checked too", n, checked)
		}
		for _, line := range strings.Split(buf.String(), "\n") {
			f := strings.Fields(line)
			if len(f) == 0 || !strings.HasPrefix(f[0], "BENCH-") {
				continue
			}
			for _, s := range f[1:] {
				v, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					b.Fatalf("bad figure %q: %s", s, buf)
				}
				samples[f[0]] = append(samples[f[0]], v)
			}
		}
	}
	median := func(name string) int64 {
		v := samples["BENCH-"+name]
		if len(v) == 0 {
			b.Fatalf("no %s figures", name)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	mbs := func(ns int64) float64 { return float64(benchDownloadBytes) / 1e6 / (float64(ns) / 1e9) }
	b.ReportMetric(mbs(median("DOWNLOAD-PLAIN")), "MB/s-direct")
	b.ReportMetric(mbs(median("DOWNLOAD-CHECKED")), "MB/s-checked")
	b.ReportMetric(float64(median("FIRST-PLAIN")), "ns/first-byte-direct")
	b.ReportMetric(float64(median("FIRST-CHECKED")), "ns/first-byte-checked")
	b.ReportMetric(float64(median("FIRST-CHECKED")-median("FIRST-PLAIN")), "ns/first-byte-added")
}
