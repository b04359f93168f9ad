package httpapi

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"gale/internal/platform/apperr"
)

// router matches requests against patterns written as for http.ServeMux ("GET /orgs/{id}",
// or "/path" for every method), segment by segment. Unlike ServeMux it accepts patterns that
// overlap without either being more specific, such as /scripts/executions/{id} and
// /scripts/{id}/executions: at each segment a literal is tried before a parameter, and a
// parameter before a trailing {name...}, backtracking when a branch leads to no route for the
// method. Paths match exactly: no subtree patterns, no redirects, no path cleaning. Unknown
// paths get 404 and known paths asked with another method 405, both in the error envelope.
type router struct {
	root node
}

// maxParams bounds the parameters of a pattern, so that matching keeps their values on the
// stack; as registration refuses more, no path below the root holds more.
const maxParams = 8

// node is one path segment of the registered patterns.
type node struct {
	literals map[string]*node
	param    *node // a {name} segment: any non-empty segment
	// rest ends the patterns whose last segment is {name...}: the remainder of the path.
	rest *endpoint
	// here ends the patterns whose last segment is this node.
	here *endpoint
}

// endpoint holds the routes of one path shape, one per method; anyMethod serves a pattern
// written without a method.
type endpoint struct {
	methods   []*route
	anyMethod *route
}

type route struct {
	method  string
	pattern string
	params  []string // names, in path order
	handler http.Handler
}

// HandleFunc registers handler for pattern; see router. Registering a pattern whose method
// and path shape are already taken panics, as one of the two could never be reached.
func (rt *router) HandleFunc(pattern string, handler func(http.ResponseWriter, *http.Request)) {
	rt.Handle(pattern, http.HandlerFunc(handler))
}

// Handle is HandleFunc for an http.Handler.
func (rt *router) Handle(pattern string, handler http.Handler) {
	method, path, hasMethod := strings.Cut(pattern, " ")
	if !hasMethod {
		method, path = "", pattern
	}
	if !strings.HasPrefix(path, "/") {
		panic("httpapi: route pattern " + pattern + " does not start with a method and /")
	}
	r := &route{method: method, pattern: pattern, handler: handler}
	n := &rt.root
	wildcard := false
	segments := strings.Split(path[1:], "/")
	for i, seg := range segments {
		name, isParam := strings.CutPrefix(seg, "{")
		name, closed := strings.CutSuffix(name, "}")
		rest, isRest := strings.CutSuffix(name, "...")
		switch {
		case !isParam && !strings.ContainsAny(seg, "{}"):
			if n.literals == nil {
				n.literals = map[string]*node{}
			}
			if n.literals[seg] == nil {
				n.literals[seg] = &node{}
			}
			n = n.literals[seg]
		case !isParam || !closed || rest == "" || strings.ContainsAny(name, "{}"):
			panic("httpapi: route pattern " + pattern + " has a malformed segment " + seg)
		case isRest && i != len(segments)-1:
			panic("httpapi: route pattern " + pattern + " has " + seg + " before its last segment")
		case slices.Contains(r.params, rest):
			panic("httpapi: route pattern " + pattern + " names {" + rest + "} twice")
		case isRest:
			r.params = append(r.params, rest)
			wildcard = true
		default:
			r.params = append(r.params, name)
			if n.param == nil {
				n.param = &node{}
			}
			n = n.param
		}
	}
	if len(r.params) > maxParams {
		panic("httpapi: route pattern " + pattern + " has more than " + strconv.Itoa(maxParams) + " parameters")
	}
	ends := &n.here
	if wildcard {
		ends = &n.rest
	}
	if *ends == nil {
		*ends = &endpoint{}
	}
	(*ends).add(r)
}

func (e *endpoint) add(r *route) {
	taken := e.anyMethod
	if r.method != "" {
		taken = e.route(r.method)
	}
	if taken != nil {
		panic("httpapi: route " + r.pattern + " is registered twice (as " + taken.pattern + ")")
	}
	if r.method == "" {
		e.anyMethod = r
		return
	}
	e.methods = append(e.methods, r)
}

// route returns the route of method exactly, or nil.
func (e *endpoint) route(method string) *route {
	for _, r := range e.methods {
		if r.method == method {
			return r
		}
	}
	return nil
}

// serving returns the route that answers method: its own, GET's for HEAD, else the one
// registered for every method.
func (e *endpoint) serving(method string) *route {
	if r := e.route(method); r != nil {
		return r
	}
	if method == http.MethodHead {
		if r := e.route(http.MethodGet); r != nil {
			return r
		}
	}
	return e.anyMethod
}

// lookup is the state of one match: the request's method, the parameter values met so far
// (escaped), and, once no route serves the method, the methods that the path allows.
type lookup struct {
	method string
	values [maxParams]string
	n      int // values in use
	// allow collects the methods of every endpoint the path reaches, instead of stopping
	// at the first that serves method.
	allow   bool
	allowed []string
}

// ServeHTTP runs the route the request matches, with its parameters as path values and its
// pattern as r.Pattern (which logs and metrics name the route by).
func (rt *router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.EscapedPath()
	if !strings.HasPrefix(path, "/") {
		rt.notFound(w, r)
		return
	}
	m := lookup{method: r.Method}
	found := rt.root.find(path[1:], &m)
	if found == nil {
		m = lookup{allow: true}
		rt.root.find(path[1:], &m)
		if len(m.allowed) == 0 {
			rt.notFound(w, r)
			return
		}
		slices.Sort(m.allowed)
		w.Header().Set("Allow", strings.Join(slices.Compact(m.allowed), ", "))
		WriteError(w, &apperr.Error{Kind: apperr.KindMethodNotAllowed, Code: apperr.CodeMethod,
			Message: "method " + r.Method + " not allowed on " + r.URL.Path})
		return
	}
	for i, name := range found.params {
		value, err := url.PathUnescape(m.values[i])
		if err != nil {
			rt.notFound(w, r)
			return
		}
		r.SetPathValue(name, value)
	}
	r.Pattern = found.pattern
	found.handler.ServeHTTP(w, r)
}

func (rt *router) notFound(w http.ResponseWriter, r *http.Request) {
	WriteError(w, &apperr.Error{Kind: apperr.KindNotFound, Code: apperr.CodeNotFound,
		Message: "no route " + r.Method + " " + r.URL.Path})
}

// find matches path (escaped, without its leading slash) below n.
func (n *node) find(path string, m *lookup) *route {
	seg, below, more := strings.Cut(path, "/")
	literal := seg
	if strings.Contains(seg, "%") {
		// A literal may arrive percent-encoded. A parameter's value stays escaped until a
		// route is found and is then unescaped on its own, so an encoded slash stays in it.
		if unescaped, err := url.PathUnescape(seg); err == nil {
			literal = unescaped
		}
	}
	if child := n.literals[literal]; child != nil {
		if r := child.next(below, more, m); r != nil {
			return r
		}
	}
	if n.param != nil && seg != "" {
		m.values[m.n] = seg
		m.n++
		if r := n.param.next(below, more, m); r != nil {
			return r
		}
		m.n--
	}
	if n.rest != nil {
		m.values[m.n] = path
		return n.rest.match(m)
	}
	return nil
}

// next continues below n with the rest of the path, or ends at n when there is none.
func (n *node) next(path string, more bool, m *lookup) *route {
	if more {
		return n.find(path, m)
	}
	if n.here == nil {
		return nil
	}
	return n.here.match(m)
}

// match returns e's route for the method; while collecting what the path allows, it notes
// e's methods and returns nil so the search goes on.
func (e *endpoint) match(m *lookup) *route {
	if !m.allow {
		return e.serving(m.method)
	}
	for _, r := range e.methods {
		m.allowed = append(m.allowed, r.method)
		if r.method == http.MethodGet {
			m.allowed = append(m.allowed, http.MethodHead)
		}
	}
	return nil
}
