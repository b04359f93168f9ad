package pam

import (
	"strings"
	"time"
)

// Subject is what a rule is matched against: an elevation request's facts.
type Subject struct {
	SiteID, User, Path, SHA256, Signer, Thumbprint, Parent, CommandLine string
	Groups                                                              []string
	At                                                                  time.Time
}

// lowered is a Subject with its text lower-cased once for every rule.
type lowered struct {
	site, user, path, hash, signer, thumb, parent, cmd string
	groups                                             []string
	at                                                 time.Time
}

func lower(s Subject) lowered {
	l := lowered{site: s.SiteID, user: strings.ToLower(s.User), path: strings.ToLower(s.Path), hash: strings.ToLower(s.SHA256),
		signer: strings.ToLower(s.Signer), thumb: strings.ToLower(s.Thumbprint), parent: strings.ToLower(s.Parent),
		cmd: strings.ToLower(s.CommandLine), at: s.At}
	for _, g := range s.Groups {
		l.groups = append(l.groups, strings.ToLower(g))
	}
	return l
}

// glob is a lower-cased pattern: * any run of characters (/ included), ? one byte.
type glob string

func (g glob) match(s string) bool {
	p := string(g)
	px, sx := 0, 0
	starP, starS := -1, 0
	for sx < len(s) {
		switch {
		case px < len(p) && p[px] == '*':
			starP, starS = px, sx
			px++
		case px < len(p) && (p[px] == '?' || p[px] == s[sx]):
			px++
			sx++
		case starP >= 0:
			starS++
			px, sx = starP+1, starS
		default:
			return false
		}
	}
	for px < len(p) && p[px] == '*' {
		px++
	}
	return px == len(p)
}

func isGlob(s string) bool { return strings.ContainsAny(s, "*?") }

// signerSet is a compiled signer group.
type signerSet struct {
	signers     []glob
	thumbprints map[string]bool
}

func (g *signerSet) match(l *lowered) bool {
	if g == nil {
		return false
	}
	if l.thumb != "" && g.thumbprints[l.thumb] {
		return true
	}
	if l.signer == "" {
		return false
	}
	for _, s := range g.signers {
		if s.match(l.signer) {
			return true
		}
	}
	return false
}

// window is a compiled time window.
type window struct {
	start, end int // minutes of the day
	days       [7]bool
	anyDay     bool
	loc        *time.Location
}

func compileWindow(w *PAMTimeWindow) *window {
	if w == nil {
		return nil
	}
	cw := &window{loc: time.UTC, anyDay: len(w.Days) == 0}
	cw.start, _ = parseClock(w.Start)
	cw.end, _ = parseClock(w.End)
	for _, d := range w.Days {
		if d >= 0 && d < 7 {
			cw.days[d] = true
		}
	}
	if w.Timezone != "" {
		if loc, err := time.LoadLocation(w.Timezone); err == nil {
			cw.loc = loc
		}
	}
	return cw
}

// open reports whether t is inside the window. The weekday is that of t's local date: the
// part of an overnight window after midnight counts on the next day.
func (w *window) open(t time.Time) bool {
	lt := t.In(w.loc)
	if !w.anyDay && !w.days[lt.Weekday()] {
		return false
	}
	m := lt.Hour()*60 + lt.Minute()
	if w.start < w.end {
		return m >= w.start && m < w.end
	}
	return m >= w.start || m < w.end
}

// compiled is one rule ready to match.
type compiled struct {
	id              string
	verdict         string
	approvalMinutes int
	siteID          string
	signer          glob
	hasSigner       bool
	thumb, hash     string
	groupID         string
	group           *signerSet
	path, parent    glob
	hasPath         bool
	hasParent       bool
	cmd             string
	cmdGlob         bool
	user            glob
	hasUser         bool
	ad              string
	window          *window
}

func compile(r PAMRule, groups map[string]*signerSet) compiled {
	c := compiled{id: r.ID, verdict: r.Verdict, approvalMinutes: r.ApprovalMinutes, window: compileWindow(r.TimeWindow)}
	if r.SiteID != nil {
		c.siteID = *r.SiteID
	}
	low := func(p *string) string {
		if p == nil {
			return ""
		}
		return strings.ToLower(*p)
	}
	c.signer, c.hasSigner = glob(low(r.MatchSigner)), r.MatchSigner != nil
	c.thumb, c.hash = low(r.MatchSignerThumbprint), low(r.MatchHash)
	if r.MatchSignerGroupID != nil {
		c.groupID = *r.MatchSignerGroupID
		c.group = groups[c.groupID]
	}
	c.path, c.hasPath = glob(low(r.MatchPathGlob)), r.MatchPathGlob != nil
	c.parent, c.hasParent = glob(low(r.MatchParentImage)), r.MatchParentImage != nil
	c.cmd = low(r.MatchCommandLine)
	c.cmdGlob = isGlob(c.cmd)
	c.user, c.hasUser = glob(low(r.MatchUser)), r.MatchUser != nil
	c.ad = low(r.MatchAdGroup)
	return c
}

// matches reports whether every field the rule sets holds for the subject.
func (c *compiled) matches(l *lowered) bool {
	if c.siteID != "" && c.siteID != l.site {
		return false
	}
	if c.hash != "" && c.hash != l.hash {
		return false
	}
	if c.thumb != "" && c.thumb != l.thumb {
		return false
	}
	if c.hasPath && !c.path.match(l.path) {
		return false
	}
	if c.hasUser && !c.user.match(l.user) {
		return false
	}
	if c.hasSigner && (l.signer == "" || !c.signer.match(l.signer)) {
		return false
	}
	if c.groupID != "" && !c.group.match(l) {
		return false
	}
	if c.hasParent && !c.parent.match(l.parent) {
		return false
	}
	if c.cmd != "" {
		if c.cmdGlob && !glob(c.cmd).match(l.cmd) || !c.cmdGlob && !strings.Contains(l.cmd, c.cmd) {
			return false
		}
	}
	if c.ad != "" && !contains(l.groups, c.ad) {
		return false
	}
	if c.window != nil && !c.window.open(l.at) {
		return false
	}
	return true
}

// ruleSet is an organization's enabled rules in order, with its default verdict.
type ruleSet struct {
	version        int64
	rules          []compiled
	defaultVerdict string
}

// Verdict is the outcome of matching a request.
type Verdict struct {
	Verdict         string
	RuleID          string // empty when no rule matched
	ApprovalMinutes int
}

// decide returns the verdict of the first matching rule, else the default.
func (rs *ruleSet) decide(s Subject) Verdict {
	l := lower(s)
	for i := range rs.rules {
		if rs.rules[i].matches(&l) {
			return Verdict{Verdict: rs.rules[i].verdict, RuleID: rs.rules[i].id, ApprovalMinutes: rs.rules[i].approvalMinutes}
		}
	}
	return Verdict{Verdict: rs.defaultVerdict, ApprovalMinutes: defaultApproval}
}
