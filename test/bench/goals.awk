# goals.awk reads the `go test -bench` output of the egress proxy's and
# the socket checker's benchmarks, and of the filesystem rules' tar -x
# (make bench), and of the copy-on-write workspace's untar and grep -r,
# and prints issue 27's, issue 33's and issue 36's goals
# for them beside this run's figures, as ratios to the direct connection
# measured in the same run: bulk throughput (a bare io.Copy relay is the
# floor any relay meets on loopback), the time added to a connection's
# first byte, and the cost of one checked connect.

# The sub-benchmark's last name, without the -GOMAXPROCS suffix.
function leaf(s,    n, p) {
	n = split(s, p, "/")
	sub(/-[0-9]+$/, "", p[n])
	return p[n]
}

function metric(unit,    i) {
	for (i = 2; i < NF; i++)
		if ($(i + 1) == unit)
			return $i
	return ""
}

# The proxy's benchmarks run their ways in turns and report each way's
# median as a metric of its own: NAME-MB/s (bulk), NAME-ns (a connection's
# life). ways() gathers those of one suffix into arr, by NAME.
function ways(arr, suffix, prefix,    i, u) {
	for (i = 2; i < NF; i++) {
		u = $(i + 1)
		if (u ~ /-cpu-ns$/ || length(u) <= length(suffix) || substr(u, length(u) - length(suffix) + 1) != suffix)
			continue
		arr[prefix substr(u, 1, length(u) - length(suffix))] = $i
	}
}

/^BenchmarkThroughput\// { ways(mbs, "-MB/s", leaf($1) SUBSEP) }
/^BenchmarkSetup/ { ways(setup, "-ns", "") }
# Issue 34: a plain-http download through the proxy as an absolute-URI
# request, against the bare relay in the same run.
/^BenchmarkAbsoluteURI/ { ways(abs, "-MB/s", "") }
# Issue 34: subreaper mode's direct connection (a 200 MB download on a
# socket the checker connected), one DNS lookup over UDP, a sendmsg.
/^BenchmarkDirectDownload/ {
	ddirect = metric("MB/s-direct")
	dchecked = metric("MB/s-checked")
	dfirst = metric("ns/first-byte-added")
	dfirstd = metric("ns/first-byte-direct")
	dfirstc = metric("ns/first-byte-checked")
}
/^BenchmarkUDPDNSLookup/ { udpdns = metric("ns/added") }
/^BenchmarkSendmsgUnderUDP/ { sendmsg = metric("ns/added") }
# Issue 34: a 200 MB download through the namespace modes' relay.
/^BenchmarkRelayDownload\// { relaydl[leaf($1)] = metric("MB/s") }
/^BenchmarkCheckedConnect/ {
	name = $1
	sub(/-[0-9]+$/, "", name)
	added[name] = metric("ns/added")
	addedc[name] = metric("ns/checked-connect")
	addedu[name] = metric("ns/unchecked-connect")
}
# Issue 33: one checked metadata call and one checked write-intent open
# (subreaper mode's filesystem rules).
/^BenchmarkChecked(Chmod|Open)/ {
	name = $1
	sub(/-[0-9]+$/, "", name)
	fsadded[name] = metric("ns/added")
}
# Issue 33: tar -x into a folder, plain and under --writable, per mode and
# build (test/mounts_bench_test.go).
/^BenchmarkMountsTar\// {
	mode = leaf($1)
	for (i = 2; i < NF; i++)
		if ($(i + 1) ~ /-median-ms$/) {
			m = $(i + 1)
			sub(/-median-ms$/, "", m)
			tar[mode, m] = $i
			modes[mode] = 1
		}
}

# SPEC, "Refusals are named": npm ci into a --writable project, this build
# against the one without the naming, and with no policy (test/naming_bench_test.go).
/^BenchmarkNamingNpmCI\// {
	mode = leaf($1)
	for (i = 2; i < NF; i++)
		if ($(i + 1) ~ /-median-ms$/) {
			m = $(i + 1)
			sub(/-median-ms$/, "", m)
			npmci[mode, m] = $i
			npmmodes[mode] = 1
		}
}

# Issue 36: tar -x then grep -r in DIR, through --overlay and directly on
# DIR, and changes apply, per mode (test/overlay_bench_test.go).
/^BenchmarkOverlay\// {
	mode = leaf($1)
	for (i = 2; i < NF; i++)
		if ($(i + 1) ~ /-ms$/ || $(i + 1) == "files")
			ov[mode, $(i + 1)] = $i
	ovmodes[mode] = 1
}

function verdict(ok) { return ok ? "met" : "**missed**" }

END {
	print "### Targets (issue 27: the proxy and the socket checker; issue 33: the filesystem rules; issue 34: egress; issue 36: the copy-on-write workspace)"
	print ""
	print "| target | measured | |"
	print "|---|---|---|"
	split("up down", dirs, " ")
	for (d = 1; d <= 2; d++) {
		dir = dirs[d]
		direct = mbs[dir, "direct"]
		if (direct == "")
			continue
		floor = mbs[dir, "relay-floor"]
		for (k in mbs) {
			split(k, kk, SUBSEP)
			if (kk[1] != dir || kk[2] !~ /splice$/)
				continue
			r = mbs[k] / direct
			line = sprintf("%.0f MB/s vs %.0f MB/s direct: %.2f×", mbs[k], direct, r)
			if (floor != "")
				line = line sprintf(" (the bare relay: %.2f×)", floor / direct)
			printf "| proxy throughput, %s, %s ≥ 0.9× direct | %s | %s |\n", dir, kk[2], line, verdict(r >= 0.9)
		}
	}
	# Beside each way into the proxy, its floor measured in the same run:
	# the bare relay (no policy) for a forward; the bare CONNECT proxy
	# for CONNECT and SOCKS5, whose dial waits for the request and whose
	# client waits for the answer (of that, one round trip alone costs
	# what direct-round-trip adds).
	if ("direct" in setup)
		for (name in setup) {
			if (name == "direct" || name == "forward-buffered" || name ~ /floor$/ || name == "direct-round-trip")
				continue
			add = (setup[name] - setup["direct"]) / 1e6
			line = sprintf("%.3f ms vs %.3f ms direct: +%.3f ms", setup[name] / 1e6, setup["direct"] / 1e6, add)
			if ((name == "connect" || name == "socks5") && "connect-floor" in setup) {
				line = line sprintf(" (a bare CONNECT proxy: +%.3f ms", (setup["connect-floor"] - setup["direct"]) / 1e6)
				if ("direct-round-trip" in setup)
					line = line sprintf("; one round trip: +%.3f ms", (setup["direct-round-trip"] - setup["direct"]) / 1e6)
				line = line ")"
			} else if ("relay-floor" in setup)
				line = line sprintf(" (the bare relay: +%.3f ms)", (setup["relay-floor"] - setup["direct"]) / 1e6)
			printf "| first byte, %s: ≤ 0.2 ms added | %s | %s |\n", name, line, verdict(add <= 0.2)
		}
	for (name in added) {
		line = sprintf("%+.1f µs", added[name] / 1e3)
		if (addedc[name] != "")
			line = line sprintf(" (%.1f µs checked, %.1f µs unchecked: medians of connects made in turns)", addedc[name] / 1e3, addedu[name] / 1e3)
		printf "| %s: < 50 µs added per checked connect | %s | %s |\n", name, line, verdict(added[name] < 50000)
	}
	for (name in fsadded) {
		if (name ~ /Chmod/)
			printf "| %s (issue 33): one checked metadata call, well under 50 µs added | %+.1f µs | %s |\n", name, fsadded[name] / 1e3, verdict(fsadded[name] < 50000)
		else
			printf "| %s (issue 33): one checked open for writing, its cost | %+.1f µs | reported |\n", name, fsadded[name] / 1e3
	}
	for (mode in npmmodes) {
		w = npmci[mode, "this"]
		pl = npmci[mode, "plain"]
		u = npmci[mode, "unnamed"]
		if (w == "" || pl == "")
			continue
		if (u == "") {
			printf "| npm ci of 150 packages into --writable, %s (the checker makes every write-intent call) | %d ms, no policy %d ms: %.2f× | reported |\n", mode, w, pl, w / pl
			continue
		}
		printf "| npm ci of 150 packages into --writable, %s: naming refused writes ≤ 5 %% (SPEC, \"Refusals are named\") | %d ms, without the naming %d ms: %.2f× (no policy %d ms) | %s |\n", mode, w, u, w / u, pl, verdict(w / u <= 1.05)
	}
	for (mode in modes) {
		w = tar[mode, "this-writable"]
		pl = tar[mode, "this-plain"]
		if (w == "" || pl == "")
			continue
		line = sprintf("--writable %d ms, plain %d ms: %.2f× plain", w, pl, w / pl)
		if (mode ~ /^subreaper/) {
			if (tar[mode, "base-writable"] != "")
				line = line sprintf("; the build before, --writable: %d ms: %.2f×", tar[mode, "base-writable"], w / tar[mode, "base-writable"])
			printf "| tar -x of 20,000 files, %s (issue 33: its cost, every write-intent and metadata call checked) | %s | reported |\n", mode, line
			continue
		}
		# Namespace modes: the filesystem rules' own cost (issue 33) is
		# the build without the naming of refused writes against the
		# build before; the naming's (SPEC, "Refusals are named") is this
		# build against the one without it, both shown by removal.
		bw = tar[mode, "base-writable"]
		uw = tar[mode, "unnamed-writable"]
		if (uw != "")
			printf "| tar -x of 20,000 files, %s, --writable: naming refused writes (one round trip to the checker per write-intent call), its cost | this build %d ms, without the naming %d ms: %.2f× | reported |\n", mode, w, uw, w / uw
		if (bw == "") {
			printf "| tar -x of 20,000 files, %s, --writable ≤ 1.05× the build before (BENCH_BASE) | %s | no base measured |\n", mode, line
			continue
		}
		line = line sprintf("; the build before, --writable: %d ms: %.2f×", bw, w / bw)
		if (uw == "") {
			printf "| tar -x of 20,000 files, %s, --writable ≤ 1.05× the build before | %s | %s |\n", mode, line, verdict(w / bw <= 1.05)
			continue
		}
		printf "| tar -x of 20,000 files, %s, --writable ≤ 1.05× the build before (issue 33: the rules without the naming) | without the naming %d ms, the build before %d ms: %.2f× (%s) | %s |\n", mode, uw, bw, uw / bw, line, verdict(uw / bw <= 1.05)
	}
	if (abs["direct"] != "" && abs["relay-floor"] != "")
		for (name in abs) {
			if (name !~ /^(absolute-uri|connect)/)
				continue
			printf "| %s download (issue 34): at least the bare relay | %.0f MB/s vs the relay's %.0f: %.2f× (direct %.0f) | %s |\n", name, abs[name], abs["relay-floor"], abs[name] / abs["relay-floor"], abs["direct"], (name ~ /buffered/) ? "reported" : verdict(abs[name] >= abs["relay-floor"])
		}
	if (ddirect != "") {
		printf "| issue 34: subreaper mode, 200 MB on a socket the checker connected ≥ 0.95× direct | %.0f MB/s vs %.0f MB/s: %.2f× | %s |\n", dchecked, ddirect, dchecked / ddirect, verdict(dchecked / ddirect >= 0.95)
		line = sprintf("%+.3f ms", dfirst / 1e6)
		if (dfirstd != "")
			line = line sprintf(" (%.3f ms checked, %.3f ms unchecked: medians of connections made in turns)", dfirstc / 1e6, dfirstd / 1e6)
		printf "| issue 34: subreaper mode, time added to the first byte ≤ 0.1 ms | %s | %s |\n", line, verdict(dfirst <= 100000)
	}
	if (udpdns != "")
		printf "| issue 34: one DNS lookup over UDP, subreaper mode, ≤ 0.2 ms added | %+.3f ms | %s |\n", udpdns / 1e6, verdict(udpdns <= 200000)
	if (sendmsg != "")
		printf "| issue 34: one sendmsg under subreaper mode's UDP checks, its cost | %+.1f µs | reported |\n", sendmsg / 1e3
	if (relaydl["relay"] != "" && relaydl["relay-floor"] != "") {
		r = relaydl["relay"] / relaydl["relay-floor"]
		printf "| issue 34: 200 MB through the namespace modes' relay ≥ the bare splice relay | %.0f MB/s vs %.0f MB/s the bare relay: %.2f× (direct %.0f MB/s) | %s |\n", relaydl["relay"], relaydl["relay-floor"], r, relaydl["direct"], verdict(r >= 1)
	}
	for (mode in ovmodes) {
		o = ov[mode, "overlay-median-ms"]
		d = ov[mode, "direct-median-ms"]
		if (o == "" || d == "")
			continue
		n = ov[mode, "files"]
		line = sprintf("%.0f ms through the overlay, %.0f ms on DIR: %.2f× (untar %.0f / %.0f ms, grep -r %.0f / %.0f ms)", o, d, o / d, ov[mode, "overlay-untar-median-ms"], ov[mode, "direct-untar-median-ms"], ov[mode, "overlay-grep-median-ms"], ov[mode, "direct-grep-median-ms"])
		printf "| tar -x of %d files into DIR, then grep -r of DIR, %s (issue 36): --overlay ≤ 1.10× directly on DIR | %s | %s |\n", n, mode, line, verdict(o / d <= 1.10)
		printf "| corral changes apply of %d changed files, %s (issue 36): its time | %.0f ms | reported |\n", n / 2, mode, ov[mode, "apply-median-ms"]
	}
}
