module github.com/corral-sh/corral

go 1.26.0

require golang.org/x/sys v0.50.0

require github.com/moby/sys/capability v0.5.0

require github.com/opencontainers/runtime-spec v1.3.0
