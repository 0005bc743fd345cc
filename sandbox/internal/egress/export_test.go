package egress

// Functions only tests use, kept beside the package they test.

// String returns the destination as the user wrote it.
func (r Rule) String() string { return r.text }

// IsAddress reports whether r is an IP address or CIDR rule.
func (r Rule) IsAddress() bool { return r.prefix.IsValid() }
