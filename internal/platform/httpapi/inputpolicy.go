package httpapi

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"gale/internal/platform/apperr"
)

// The input policy holds for every operation, whatever its domain, before its handler runs:
//
//   - no NUL (U+0000) in a path or query parameter, nor in any string or key of a JSON body
//     (PostgreSQL cannot store it in text);
//   - a JSON body nests at most MaxJSONDepth levels;
//   - the strings of a decoded body refuse control characters (see refuseControlCharacters);
//   - a POST, PUT or PATCH that takes no body refuses one.
//
// Agents' operations keep only the depth rule for their bodies: what an agent reports is
// cleaned by the service that stores it rather than refused, so that a heartbeat is never
// lost over a stray character.

// MaxJSONDepth is how deeply arrays and objects of a request body may nest.
const MaxJSONDepth = 32

// maxEmptyBody is how much an operation without a body reads of one: enough for `{}` and
// some whitespace.
const maxEmptyBody = 64

// maxShownKey bounds how much of a property name the scanner keeps to name a field.
const maxShownKey = 64

// inputPolicy is the per-operation middleware of the policy; it runs after authorize, and
// before huma reads the body.
func (s *Server) inputPolicy(r Route, takesBody bool) func(huma.Context, func(huma.Context)) {
	return func(hctx huma.Context, next func(huma.Context)) {
		req, _ := humago.Unwrap(hctx)
		if err := refuseNULParameters(hctx, req); err != nil {
			s.writeHumaError(hctx, err)
			return
		}
		if !takesBody {
			if err := refuseBody(r.Method, req.Body); err != nil {
				s.writeHumaError(hctx, err)
				return
			}
			next(hctx)
			return
		}
		next(guardedBody{humaContext: hctx, body: &jsonGuard{body: req.Body, refuseNUL: !r.Agent}})
	}
}

// guardedBody is the request's context with the body read through a jsonGuard.
type guardedBody struct {
	humaContext
	body io.ReadCloser
}

// humaContext names the embedded context so that its Context method is not shadowed.
type humaContext = huma.Context

func (c guardedBody) BodyReader() io.Reader { return c.body }
func (c guardedBody) Unwrap() huma.Context  { return c.humaContext }

func containsNUL(s string) bool { return strings.IndexByte(s, 0) >= 0 }

func nulRefused(field string) *apperr.Error {
	return apperr.Invalid(field, "must not contain the NUL character (\\u0000)")
}

// refuseNULParameters refuses a path or query parameter holding NUL, naming it.
func refuseNULParameters(hctx huma.Context, req *http.Request) *apperr.Error {
	if containsNUL(req.URL.Path) {
		for _, p := range hctx.Operation().Parameters {
			if p.In == "path" && containsNUL(hctx.Param(p.Name)) {
				return nulRefused(p.Name)
			}
		}
		return nulRefused("path")
	}
	// A NUL can only arrive escaped: the server refuses raw control bytes in the request line.
	if !strings.Contains(req.URL.RawQuery, "%00") {
		return nil
	}
	values, _ := url.ParseQuery(req.URL.RawQuery)
	for _, name := range slices.Sorted(maps.Keys(values)) {
		if containsNUL(name) || slices.ContainsFunc(values[name], containsNUL) {
			return nulRefused(strings.ReplaceAll(name, "\x00", `\u0000`))
		}
	}
	return nil
}

// refuseBody reads what a POST, PUT or PATCH without a body was sent: nothing, whitespace
// or `{}` pass; anything else (reading at most a few bytes of it) is refused. The body of a
// GET or DELETE has no meaning in HTTP and is never read.
func refuseBody(method string, body io.Reader) *apperr.Error {
	if body == nil || method != http.MethodPost && method != http.MethodPut && method != http.MethodPatch {
		return nil
	}
	head, _ := io.ReadAll(io.LimitReader(body, maxEmptyBody+1))
	rest := strings.Join(strings.Fields(string(head)), "")
	if len(head) <= maxEmptyBody && (rest == "" || rest == "{}") {
		return nil
	}
	return apperr.BadRequest(apperr.CodeValidation, "this operation takes no request body")
}

// jsonGuard passes a JSON body through to huma while following its tokens, and fails the
// read as soon as the body nests deeper than MaxJSONDepth or, with refuseNUL, a string or
// property name holds an escaped NUL. It does not validate the JSON (the decoder does), so a
// malformed body at worst gets a less precise field name. huma answers the *apperr.Error
// returned from Read as it is (see newHumaError).
type jsonGuard struct {
	body      io.ReadCloser
	refuseNUL bool
	err       error
	levels    []jsonLevel
	inString  bool
	inKey     bool
	// escape is 0 outside an escape, 1 after a backslash, and 2 to 5 while reading the hex
	// digits of a \u escape; zeros says whether those digits were all 0 so far.
	escape int
	zeros  bool
}

// jsonLevel is one open array or object: where in it the scan is, to name a field.
type jsonLevel struct {
	array     bool
	index     int
	key       []byte // the current property name, as written, cut at maxShownKey
	expectKey bool
}

func (g *jsonGuard) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	n, err := g.body.Read(p)
	for _, c := range p[:n] {
		if refused := g.scan(c); refused != nil {
			g.err = refused
			return 0, refused
		}
	}
	return n, err
}

func (g *jsonGuard) Close() error { return g.body.Close() }

func (g *jsonGuard) scan(c byte) *apperr.Error {
	if g.inString {
		switch {
		case g.escape == 1:
			g.escape = 0
			if c == 'u' {
				g.escape, g.zeros = 2, true
			}
		case g.escape > 1:
			g.zeros = g.zeros && c == '0'
			g.escape++
			if g.escape == 6 {
				g.escape = 0
				if g.zeros && g.refuseNUL {
					if g.inKey {
						return apperr.Invalid(fieldPath(g.levels[:len(g.levels)-1]), "property names must not contain the NUL character (\\u0000)")
					}
					return nulRefused(fieldPath(g.levels))
				}
			}
		case c == '\\':
			g.escape = 1
		case c == '"':
			g.inString, g.inKey = false, false
			return nil
		}
		if g.inKey {
			if top := &g.levels[len(g.levels)-1]; len(top.key) < maxShownKey {
				top.key = append(top.key, c)
			}
		}
		return nil
	}
	switch c {
	case '{', '[':
		if len(g.levels) == MaxJSONDepth {
			return apperr.Invalid(fieldPath(g.levels), "nests deeper than "+strconv.Itoa(MaxJSONDepth)+" levels")
		}
		// Levels are reused, keeping the room of their key.
		if n := len(g.levels); n < cap(g.levels) {
			g.levels = g.levels[:n+1]
		} else {
			g.levels = append(g.levels, jsonLevel{})
		}
		top := &g.levels[len(g.levels)-1]
		top.array, top.index, top.key, top.expectKey = c == '[', 0, top.key[:0], c == '{'
	case '}', ']':
		if len(g.levels) > 0 {
			g.levels = g.levels[:len(g.levels)-1]
		}
	case ',':
		if len(g.levels) > 0 {
			top := &g.levels[len(g.levels)-1]
			top.index++
			top.expectKey = !top.array
		}
	case ':':
		if len(g.levels) > 0 {
			g.levels[len(g.levels)-1].expectKey = false
		}
	case '"':
		g.inString = true
		if n := len(g.levels); n > 0 && g.levels[n-1].expectKey {
			g.inKey = true
			g.levels[n-1].key = g.levels[n-1].key[:0]
		}
	}
	return nil
}

// fieldPath names the position of levels as the error details do: "settings.a[2].b", or
// "body" at the top.
func fieldPath(levels []jsonLevel) string {
	var b strings.Builder
	for _, l := range levels {
		switch {
		case l.array:
			b.WriteString("[" + strconv.Itoa(l.index) + "]")
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.Write(l.key)
		}
	}
	if b.Len() == 0 {
		return "body"
	}
	return b.String()
}

// takesBody reports whether the operation's input I has a request body.
func takesBody[I any]() bool {
	t := reflect.TypeFor[I]()
	if t.Kind() != reflect.Struct {
		return false
	}
	_, body := t.FieldByName("Body")
	_, raw := t.FieldByName("RawBody")
	return body || raw
}

// bodyTextCheck returns the control-character check of the operation's decoded body, or nil
// when the operation has none: it reads no body, or is an agent's.
func bodyTextCheck[I any](r Route) func(*I) *apperr.Error {
	field, ok := reflect.TypeFor[I]().FieldByName("Body")
	if !ok || r.Agent || r.Method == http.MethodGet || r.Method == http.MethodHead {
		return nil
	}
	return func(in *I) *apperr.Error {
		return refuseControlCharacters(reflect.ValueOf(in).Elem().FieldByIndex(field.Index))
	}
}

// refuseControlCharacters walks a decoded body and refuses C0 control characters
// (U+0000–U+001F), DEL (U+007F) and C1 controls (U+0080–U+009F) in its strings, which would
// otherwise reach terminals, logs and other clients. A field tagged `multiline:"true"`
// (descriptions, notes, scripts, message bodies) may hold line feeds, carriage returns and
// tabs. Free-form JSON (interface values, raw messages) is not walked: only the NUL and depth
// rules hold there.
func refuseControlCharacters(body reflect.Value) *apperr.Error {
	var details []apperr.Detail
	walkText(body, "", false, &details)
	if len(details) == 0 {
		return nil
	}
	return apperr.InvalidFields(details)
}

func walkText(v reflect.Value, path string, multiline bool, details *[]apperr.Detail) {
	switch v.Kind() {
	case reflect.String:
		if HasControl(v.String(), multiline) {
			msg := "must not contain control characters"
			if multiline {
				msg = "must not contain control characters other than line breaks and tabs"
			}
			*details = append(*details, apperr.Detail{Field: orBody(path), Message: msg})
		}
	case reflect.Pointer:
		if !v.IsNil() {
			walkText(v.Elem(), path, multiline, details)
		}
	case reflect.Struct:
		for _, f := range textFields(v.Type()) {
			if fv, err := v.FieldByIndexErr(f.index); err == nil {
				walkText(fv, joinField(path, f.name), f.multiline, details)
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		for i := range v.Len() {
			walkText(v.Index(i), path+"["+strconv.Itoa(i)+"]", multiline, details)
		}
	case reflect.Map:
		if v.Type().Elem().Kind() == reflect.Interface {
			return
		}
		for iter := v.MapRange(); iter.Next(); {
			name := fmt.Sprint(iter.Key())
			if HasControl(name, false) {
				*details = append(*details, apperr.Detail{Field: orBody(path), Message: "property names must not contain control characters"})
				continue
			}
			walkText(iter.Value(), joinField(path, name), multiline, details)
		}
	}
}

// HasControl reports whether s holds a C0 control (other than \n, \r and \t when
// multiline), DEL or a C1 control: the input policy's rule, exported for text that arrives
// inside free-form JSON, which the policy does not walk (an imported bundle's scripts).
func HasControl(s string, multiline bool) bool {
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			if !multiline {
				return true
			}
		case r < 0x20 || r >= 0x7f && r <= 0x9f:
			return true
		}
	}
	return false
}

func joinField(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func orBody(path string) string {
	if path == "" {
		return "body"
	}
	return path
}

// textField is a JSON field of a struct that may hold strings.
type textField struct {
	index     []int
	name      string
	multiline bool
}

// textFieldsByType caches textFields per struct type.
var textFieldsByType sync.Map

// textFields lists the fields of struct type t as encoding/json sees them (embedded structs
// flattened, `json:"-"` left out), skipping free-form ones.
func textFields(t reflect.Type) []textField {
	if cached, ok := textFieldsByType.Load(t); ok {
		return cached.([]textField)
	}
	var fields []textField
	for _, f := range reflect.VisibleFields(t) {
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if !f.IsExported() || name == "-" || f.Anonymous && name == "" || f.Type.Kind() == reflect.Interface {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields = append(fields, textField{index: f.Index, name: name, multiline: f.Tag.Get("multiline") == "true"})
	}
	textFieldsByType.Store(t, fields)
	return fields
}
