# goals.awk reads the `go test -bench` output of the egress proxy's and
# the socket checker's benchmarks (make bench) and prints issue 27's goals
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

/^BenchmarkThroughput\// {
	split($1, p, "/")
	mbs[p[2], leaf($1)] = metric("MB/s")
}
/^BenchmarkSetup\// { setup[leaf($1)] = metric("ns/op") }
/^BenchmarkCheckedConnect/ {
	name = $1
	sub(/-[0-9]+$/, "", name)
	added[name] = metric("ns/added")
}

function verdict(ok) { return ok ? "met" : "**missed**" }

END {
	print "### Targets (issue 27: the proxy and the socket checker)"
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
	if ("direct" in setup)
		for (name in setup) {
			if (name == "direct" || name == "forward-buffered")
				continue
			add = (setup[name] - setup["direct"]) / 1e6
			printf "| first byte, %s: ≤ 0.2 ms added | %.3f ms vs %.3f ms direct: +%.3f ms | %s |\n", name, setup[name] / 1e6, setup["direct"] / 1e6, add, verdict(add <= 0.2)
		}
	for (name in added)
		printf "| %s: < 50 µs added per checked connect | %+.1f µs | %s |\n", name, added[name] / 1e3, verdict(added[name] < 50000)
}
