package groups

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// Limits of a dynamic filter.
const (
	maxConditions = 50
	maxInValues   = 100
	maxTextValue  = 200
	maxMinutes    = 525600 // a year
)

// Operators of a filter condition.
const (
	opEq         = "eq"
	opNeq        = "neq"
	opContains   = "contains"
	opStartsWith = "startsWith"
	opGlob       = "glob"
	opMatches    = "matches"
	opIn         = "in"
	opExists     = "exists"
	opOlderThan  = "olderThanMinutes"
	opWithin     = "withinMinutes"
)

// Kinds of filter fields: how a field's values are checked and compared.
type fieldKind int

const (
	kindText   fieldKind = iota // free text, compared ignoring case
	kindEnum                    // one of a fixed set
	kindID                      // a UUID, compared exactly
	kindTags                    // the device's set of tags
	kindTime                    // lastSeen
	kindCustom                  // a custom field's effective value
)

type fieldSpec struct {
	kind fieldKind
	ops  []string
	enum []string
}

var textOps = []string{opEq, opNeq, opContains, opStartsWith, opMatches, opIn, opExists}

var fieldSpecs = map[string]fieldSpec{
	"osType":               {kind: kindEnum, ops: []string{opEq, opNeq, opIn}, enum: []string{"linux", "windows", "macos", "darwin"}},
	"osName":               {kind: kindText, ops: textOps},
	"osVersion":            {kind: kindText, ops: textOps},
	"hostname":             {kind: kindText, ops: []string{opEq, opNeq, opContains, opStartsWith, opGlob, opMatches, opIn}},
	"siteId":               {kind: kindID, ops: []string{opEq, opNeq, opIn}},
	"status":               {kind: kindEnum, ops: []string{opEq, opNeq, opIn}, enum: []string{"online", "offline", "pending"}},
	"tag":                  {kind: kindTags, ops: []string{opEq, opNeq, opContains, opStartsWith, opIn, opExists}},
	"lastSeen":             {kind: kindTime, ops: []string{opOlderThan, opWithin}},
	customPrefix + "<key>": {kind: kindCustom, ops: []string{opEq, opNeq, opContains, opStartsWith, opIn, opExists}},
}

const customPrefix = "customField."

var customKeyPattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// Filter is a parsed, validated dynamic-group filter: every condition (mode all) or at least
// one (mode any) must hold. The zero Filter is never produced by ParseFilter.
type Filter struct {
	Mode  string // "all" or "any"
	Conds []Cond
}

// Cond is one condition, or (Sub set) a nested all/any group of conditions.
type Cond struct {
	Sub *Filter
	// Field is the filter field; for custom fields "customField" with the field's key in Key.
	Field string
	Key   string
	Op    string
	// The operand, as the operator needs it: one string (Str), a list of strings or custom
	// field scalars (List), a number of minutes, or exists' expectation.
	Str     string
	List    []any
	Minutes int
	Want    bool
	re      *regexp.Regexp
	// at is where the condition sits in the filter (filter.all[2]), for error details.
	at string
}

// Snapshot is what a filter sees of a device.
type Snapshot struct {
	ID          string
	Hostname    string
	DisplayName *string
	OSType      string
	OSName      string
	OSVersion   string
	SiteID      string
	Status      string
	LastSeen    *time.Time
	Tags        []string
	// Custom holds the device's effective custom field values by key (defaults included);
	// nil when no condition needs them.
	Custom map[string]any
	// decommissioned devices are never members.
	decommissioned bool
}

// Match reports whether the device matches the filter at time now.
func (f *Filter) Match(d *Snapshot, now time.Time) bool {
	if f.Mode == "any" {
		return slices.ContainsFunc(f.Conds, func(c Cond) bool { return c.match(d, now) })
	}
	for _, c := range f.Conds {
		if !c.match(d, now) {
			return false
		}
	}
	return true
}

// UsesCustomFields reports whether a condition reads custom field values.
func (f *Filter) UsesCustomFields() bool {
	return slices.ContainsFunc(f.Conds, func(c Cond) bool {
		return c.Field == "customField" || (c.Sub != nil && c.Sub.UsesCustomFields())
	})
}

// leaves calls fn for every condition that is not a nested group.
func (f *Filter) leaves(fn func(c *Cond)) {
	for i := range f.Conds {
		if c := &f.Conds[i]; c.Sub != nil {
			c.Sub.leaves(fn)
		} else {
			fn(c)
		}
	}
}

func (c *Cond) match(d *Snapshot, now time.Time) bool {
	if c.Sub != nil {
		return c.Sub.Match(d, now)
	}
	switch c.Field {
	case "osType":
		return c.matchOne(normalizeOS(d.OSType))
	case "osName":
		return c.matchOne(d.OSName)
	case "osVersion":
		return c.matchOne(d.OSVersion)
	case "hostname":
		return c.matchOne(d.Hostname)
	case "siteId":
		return c.matchOne(d.SiteID)
	case "status":
		return c.matchOne(d.Status)
	case "tag":
		return c.matchTags(d.Tags)
	case "lastSeen":
		if c.Op == opWithin {
			return d.LastSeen != nil && now.Sub(*d.LastSeen) <= time.Duration(c.Minutes)*time.Minute
		}
		// A device never seen counts as not seen for any length of time.
		return d.LastSeen == nil || now.Sub(*d.LastSeen) > time.Duration(c.Minutes)*time.Minute
	case "customField":
		v, ok := d.Custom[c.Key]
		return c.matchCustom(v, ok)
	}
	return false
}

// matchOne compares a single text value; text is compared ignoring case (IDs and enums are
// stored in lower case already).
func (c *Cond) matchOne(v string) bool {
	switch c.Op {
	case opEq:
		return strings.EqualFold(v, c.Str)
	case opNeq:
		return !strings.EqualFold(v, c.Str)
	case opContains:
		return strings.Contains(strings.ToLower(v), c.Str)
	case opStartsWith:
		return strings.HasPrefix(strings.ToLower(v), c.Str)
	case opGlob:
		ok, _ := path.Match(c.Str, strings.ToLower(v))
		return ok
	case opMatches:
		return c.re.MatchString(v)
	case opIn:
		return slices.ContainsFunc(c.List, func(x any) bool { return strings.EqualFold(v, x.(string)) })
	case opExists:
		return (v != "") == c.Want
	}
	return false
}

// matchTags: eq, contains, startsWith and in hold when some tag satisfies them; neq when no
// tag equals the value; exists when the device has any tag at all.
func (c *Cond) matchTags(tags []string) bool {
	switch c.Op {
	case opNeq:
		return !slices.ContainsFunc(tags, func(t string) bool { return strings.EqualFold(t, c.Str) })
	case opExists:
		return (len(tags) > 0) == c.Want
	}
	one := Cond{Op: c.Op, Str: c.Str, List: c.List}
	return slices.ContainsFunc(tags, one.matchOne)
}

// matchCustom compares a custom field's effective value (absent when !ok). A multiselect
// value (an array) satisfies eq, contains, startsWith and in when one of its options does.
func (c *Cond) matchCustom(v any, ok bool) bool {
	switch c.Op {
	case opExists:
		return ok == c.Want
	case opNeq:
		return !ok || !customEq(v, c.List[0])
	case opEq, opIn:
		return ok && slices.ContainsFunc(c.List, func(want any) bool { return customEq(v, want) })
	case opContains, opStartsWith:
		return ok && anyScalar(v, func(x any) bool {
			s, isStr := x.(string)
			if !isStr {
				return false
			}
			s = strings.ToLower(s)
			if c.Op == opContains {
				return strings.Contains(s, c.Str)
			}
			return strings.HasPrefix(s, c.Str)
		})
	}
	return false
}

func customEq(v, want any) bool {
	return anyScalar(v, func(x any) bool {
		switch w := want.(type) {
		case string:
			s, ok := x.(string)
			return ok && strings.EqualFold(s, w)
		case float64:
			n, ok := x.(float64)
			return ok && n == w
		case bool:
			b, ok := x.(bool)
			return ok && b == w
		}
		return false
	})
}

// anyScalar applies fn to v, or to each element when v is an array.
func anyScalar(v any, fn func(any) bool) bool {
	if items, ok := v.([]any); ok {
		return slices.ContainsFunc(items, fn)
	}
	return fn(v)
}

// normalizeOS treats darwin, the name Go and the agent downloads use, as macos, the name
// enrolled devices report.
func normalizeOS(s string) string {
	if strings.EqualFold(s, "darwin") {
		return "macos"
	}
	return s
}

// ParseFilter validates a filter strictly and returns it with its canonical JSON (the form
// stored and shown). Every problem is one detail of a single 400, its field named like
// filter.all[1].any[0].value.
func ParseFilter(raw json.RawMessage) (*Filter, string, error) {
	p := &parser{}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil, "", apperr.Invalid("filter", "not valid JSON")
	}
	f := p.group(v, "filter", 0)
	if len(p.details) == 0 && p.count > maxConditions {
		p.fail("filter", fmt.Sprintf("at most %d conditions in all", maxConditions))
	}
	if len(p.details) > 0 {
		return nil, "", &apperr.Error{Kind: apperr.KindInvalid, Code: apperr.CodeValidation, Message: "validation failed",
			Details: p.details}
	}
	canonical, _ := json.Marshal(v)
	return f, string(canonical), nil
}

// mustParse reads a stored filter, which was validated when written.
func mustParse(stored string) (*Filter, error) {
	f, _, err := ParseFilter(json.RawMessage(stored))
	if err != nil {
		return nil, fmt.Errorf("stored group filter does not parse: %w", err)
	}
	return f, nil
}

type parser struct {
	details []apperr.Detail
	count   int
}

func (p *parser) fail(field, msg string) {
	p.details = append(p.details, apperr.Detail{Field: field, Message: msg})
}

const groupShape = `an object with exactly one key, "all" or "any", holding an array of conditions`

// group parses {"all": [...]} or {"any": [...]} at the given nesting depth (0: the top).
func (p *parser) group(v any, at string, depth int) *Filter {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		p.fail(at, "expected "+groupShape)
		return nil
	}
	var mode string
	var list any
	for k, x := range m {
		mode, list = k, x
	}
	if mode != "all" && mode != "any" {
		p.fail(at+"."+mode, `unknown key; expected "all" or "any"`)
		return nil
	}
	at += "." + mode
	items, ok := list.([]any)
	if !ok || len(items) == 0 {
		p.fail(at, "expected a non-empty array of conditions")
		return nil
	}
	f := &Filter{Mode: mode}
	for i, item := range items {
		f.Conds = append(f.Conds, p.cond(item, fmt.Sprintf("%s[%d]", at, i), depth))
	}
	return f
}

func (p *parser) cond(v any, at string, depth int) Cond {
	m, ok := v.(map[string]any)
	if !ok {
		p.fail(at, `expected a condition {"field", "op", "value"} or a nested {"all"|"any": [...]}`)
		return Cond{}
	}
	_, isAll := m["all"]
	_, isAny := m["any"]
	if isAll || isAny {
		if depth >= 1 {
			p.fail(at, "conditions nest one level deep at most")
			return Cond{}
		}
		return Cond{Sub: p.group(m, at, depth+1)}
	}
	p.count++
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if k != "field" && k != "op" && k != "value" {
			p.fail(at+"."+k, `unknown key; a condition has "field", "op" and "value"`)
		}
	}
	field, ok := m["field"].(string)
	if !ok {
		p.fail(at+".field", "expected a string naming a field: "+fieldList())
		return Cond{}
	}
	c := Cond{Field: field, at: at}
	spec, known := fieldSpecs[field]
	if strings.HasPrefix(field, customPrefix) {
		c.Field, c.Key, spec, known = "customField", strings.TrimPrefix(field, customPrefix), fieldSpecs[customPrefix+"<key>"], true
		if !customKeyPattern.MatchString(c.Key) {
			p.fail(at+".field", "customField.<key> needs a custom field key: a lower-case letter, then lower-case letters, digits or _")
			return Cond{}
		}
	}
	if !known {
		p.fail(at+".field", "unknown field; use one of "+fieldList())
		return Cond{}
	}
	op, ok := m["op"].(string)
	if !ok || !slices.Contains(spec.ops, op) {
		p.fail(at+".op", fmt.Sprintf("%s takes the operators %s", field, strings.Join(spec.ops, ", ")))
		return Cond{}
	}
	c.Op = op
	value, hasValue := m["value"]
	at += ".value"
	switch {
	case op == opExists:
		c.Want = true
		if hasValue {
			b, ok := value.(bool)
			if !ok {
				p.fail(at, "exists takes no value, or true or false")
			}
			c.Want = b
		}
	case !hasValue:
		p.fail(at, "required for "+op)
	case op == opOlderThan || op == opWithin:
		n, ok := value.(json.Number)
		i, err := strconv.Atoi(string(n))
		if !ok || err != nil || i < 1 || i > maxMinutes {
			p.fail(at, fmt.Sprintf("expected a whole number of minutes from 1 to %d", maxMinutes))
		}
		c.Minutes = i
	case op == opIn:
		items, ok := value.([]any)
		if !ok || len(items) == 0 || len(items) > maxInValues {
			p.fail(at, fmt.Sprintf("in takes an array of 1 to %d values", maxInValues))
			return c
		}
		for i, item := range items {
			x, msg := operand(spec, opEq, item)
			if msg != "" {
				p.fail(fmt.Sprintf("%s[%d]", at, i), msg)
			}
			c.List = append(c.List, x)
		}
	default:
		x, msg := operand(spec, op, value)
		if msg != "" {
			p.fail(at, msg)
			return c
		}
		switch op {
		case opMatches:
			re, err := regexp.Compile(x.(string))
			if err != nil {
				p.fail(at, "not a valid regular expression (RE2 syntax)")
			}
			c.Str, c.re = x.(string), re
		case opGlob:
			c.Str = strings.ToLower(x.(string))
			if _, err := path.Match(c.Str, ""); err != nil {
				p.fail(at, "not a valid glob pattern: * matches any run of characters, ? one character, [a-z] a class")
			}
		case opContains, opStartsWith:
			c.Str = strings.ToLower(x.(string))
		default: // eq, neq
			if spec.kind == kindCustom {
				c.List = []any{x}
			} else {
				c.Str = x.(string)
			}
		}
	}
	if c.Field == "osType" {
		c.Str = normalizeOS(c.Str)
		for i, x := range c.List {
			s, _ := x.(string)
			c.List[i] = normalizeOS(s)
		}
	}
	return c
}

// operand checks a single value of op for a field and returns it ready to compare (numbers
// of custom fields as float64), or a message saying what is wrong.
func operand(spec fieldSpec, op string, v any) (any, string) {
	if spec.kind == kindCustom && (op == opEq || op == opNeq) {
		switch x := v.(type) {
		case json.Number:
			f, err := x.Float64()
			if err != nil {
				return nil, "not a usable number"
			}
			return f, ""
		case bool:
			return x, ""
		case string:
			if x == "" || utf8.RuneCountInString(x) > maxTextValue {
				return nil, fmt.Sprintf("expected 1 to %d characters", maxTextValue)
			}
			return x, ""
		}
		return nil, "expected a string, a number or true/false"
	}
	s, ok := v.(string)
	if !ok || s == "" || utf8.RuneCountInString(s) > maxTextValue {
		return nil, fmt.Sprintf("expected a string of 1 to %d characters", maxTextValue)
	}
	if op != opEq && op != opNeq {
		return s, ""
	}
	switch spec.kind {
	case kindEnum:
		if !slices.Contains(spec.enum, s) {
			return nil, "expected one of " + strings.Join(spec.enum, ", ")
		}
	case kindID:
		if !store.ValidID(s) {
			return nil, "expected an ID (a lower-case UUID)"
		}
	}
	return s, ""
}

func fieldList() string {
	names := make([]string, 0, len(fieldSpecs))
	for k := range fieldSpecs {
		names = append(names, k)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
