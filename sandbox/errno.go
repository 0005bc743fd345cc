package sandbox

import "github.com/corral-sh/corral/internal/setuperr"

// describeErr renders an error with its errno name, e.g.
// "operation not permitted (EPERM)": the module's one formatter.
var describeErr = setuperr.Describe
