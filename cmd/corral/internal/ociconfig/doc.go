// Package ociconfig reads the OCI runtime-spec config.json that --config
// names: it validates the file strictly (an unknown or unsupported field is
// an *Error naming its JSON path, never silently ignored), translates what
// applies to one contained command into a File, and File.Apply sets that in
// a sandbox.Options before the command line's flags are applied. Default
// is the file `corral spec` prints.
//
// It is a front end, like cmd/corral's flags: it runs in the host process
// before Launch and in none of the process roles of package sandbox, which
// never see a config.json, only the Options it produced. It is internal
// because cmd/corral is its one user, and its types follow corral's flags,
// not a promise to other modules.
package ociconfig
