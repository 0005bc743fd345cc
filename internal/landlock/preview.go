package landlock

// Preview reports what Restrict(p) would enforce on this kernel, and fails
// as Restrict would for a policy or a kernel that cannot have it (a
// *PolicyError, an *UnavailableError, an *ABIError), without restricting
// anything. It is for the process that decides whether a run may start at
// all: it refuses before anything is started, and says once, from one
// place, what the runner gets, while Restrict itself runs later on the
// runner's thread, possibly in another process (the exec stage, or the
// init of a new PID namespace).
//
// Report.Rules counts the rules planned rather than made. The plan is of
// the filesystem as this process sees it; Restrict plans again where it
// runs (a fresh /proc in a new PID namespace lists other entries).
func Preview(p Policy) (Report, error) {
	_, rep, pl, err := prepare(p)
	if err != nil || pl == nil {
		return rep, err
	}
	rep.Rules = len(pl.rules) + len(pl.ports)
	return rep, nil
}

// prepare is what Preview and Restrict share: the paths resolved, the
// ruleset the running ABI takes, and the rules planned. pl is nil when p
// restricts nothing.
func prepare(p Policy) (rulesetAttr, Report, *plan, error) {
	r, err := resolve(p)
	if err != nil || !p.Active() {
		return rulesetAttr{}, Report{}, nil, err
	}
	abi, err := ABI()
	if err != nil {
		return rulesetAttr{}, Report{}, nil, err
	}
	attr, rep, err := ruleset(p, abi)
	if err != nil {
		return attr, rep, nil, err
	}
	pl, err := r.plan()
	if err != nil {
		return attr, rep, nil, err
	}
	rep.Split = pl.split
	return attr, rep, &pl, nil
}
