module github.com/corral-sh/corral

go 1.26.0

require (
	github.com/moby/sys/capability v0.5.0
	github.com/opencontainers/runtime-spec v1.3.0
	golang.org/x/net v0.63.0 // sandbox/internal/egress: dns/dnsmessage, the launch resolver's DNS codec
	golang.org/x/sys v0.50.0
	gopkg.in/yaml.v3 v3.0.1 // test only: test/deploy_test.go parses deploy/
)
