package console

import (
	"bytes"
	"compress/gzip"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"

	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/httpapi"
)

//go:embed *.html
var pageFS embed.FS

// pages are the parsed pages by name (the file name without .html); each holds the layout,
// the shared components and its own blocks.
type pages map[string]*template.Template

// shared are the files every page is parsed with.
var shared = []string{"layout.html", "components.html"}

func parsePages(a *assets, clk clock.Clock) (pages, error) {
	base, err := template.New("").Funcs(funcs(a, clk)).ParseFS(pageFS, shared...)
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(pageFS, "*.html")
	if err != nil {
		return nil, err
	}
	out := pages{}
	for _, n := range names {
		if n == shared[0] || n == shared[1] {
			continue
		}
		t, err := base.Clone()
		if err == nil {
			t, err = t.ParseFS(pageFS, n)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		out[strings.TrimSuffix(n, ".html")] = t
	}
	return out, nil
}

func funcs(a *assets, clk clock.Clock) template.FuncMap {
	return template.FuncMap{
		"asset": a.url,
		"ago":   func(t time.Time) string { return ago(clk.Now().Sub(t)) },
		"when":  func(t time.Time) string { return t.UTC().Format(timeLayout) },
		"iso":   func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"bytes": humanBytes,
		"deref": deref,
		"pct":   func(v float64) string { return fmt.Sprintf("%.0f%%", v) },
		"list":  func(v ...string) []string { return v },
		"int64": func(n uint64) int64 { return int64(min(n, 1<<62)) },
		"osName": func(os string) string {
			if name, ok := osNames[os]; ok {
				return name
			}
			return os
		},
		"deviceRows": deviceRowsHTML,
		"orgOptions": orgOptionsHTML,
		"orgStep":    newOrgStep,
		// fragment hands a block that is also rendered alone (an htmx answer) its data.
		"fragment": func(data any) view { return view{Data: data} },
		"title": func(s string) string {
			if s == "" {
				return s
			}
			return strings.ToUpper(s[:1]) + s[1:]
		},
		"has": func(list []string, v string) bool {
			for _, s := range list {
				if s == v {
					return true
				}
			}
			return false
		},
	}
}

// osNames are the operating systems' names as people write them.
var osNames = map[string]string{"linux": "Linux", "windows": "Windows", "macos": "macOS"}

// timeLayout is how pages write a moment.
const timeLayout = "2006-01-02 15:04 UTC"

// view is what every page's template gets.
type view struct {
	Title string
	// Section is the navigation entry to highlight.
	Section string
	User    *access.Principal
	CSRF    string
	Scope   scopeView
	Version string
	// Path is the page's path, where a form of the layout returns to.
	Path string
	// Nav tells which sections of the side bar the user may open.
	Nav map[string]bool
	// Data is the page's own.
	Data any
}

// render writes a whole page, or only its block fragment when one is named (the answer to an
// htmx request that swaps part of the page).
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, page, fragment string, v view) error {
	t, ok := c.pages[page]
	if !ok {
		return fmt.Errorf("no console page %q", page)
	}
	if p := access.PrincipalFrom(r.Context()); p != nil {
		v.User = p
		v.CSRF = c.csrfToken(p)
		scope, err := c.scopeView(r)
		if err != nil {
			return err
		}
		v.Scope = scope
		if fragment == "" {
			v.Nav = c.nav(r)
		}
	}
	v.Version, v.Path = c.opts.Version, r.URL.Path
	name := "layout"
	if fragment != "" {
		name = fragment
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, name, v); err != nil {
		return fmt.Errorf("render %s %s: %w", page, name, err)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Vary", "Accept-Encoding, HX-Request")
	if buf.Len() > 1024 && acceptsGzip(r) {
		w.Header().Set("Content-Encoding", "gzip")
		w.WriteHeader(status)
		zw := gzipWriters.Get().(*gzip.Writer)
		defer gzipWriters.Put(zw)
		zw.Reset(w)
		zw.Write(buf.Bytes())
		return zw.Close()
	}
	w.WriteHeader(status)
	_, err := w.Write(buf.Bytes())
	return err
}

// gzipWriters are reused: a new one allocates its compressor's tables, a sixth of a page's
// compression.
var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return zw
}}

// sections are the side bar's entries and the API operation each one's page stands for.
var sections = map[string]string{"devices": "list-devices", "alerts": "list-alerts", "scripts": "list-scripts",
	"start": "create-enrollment-key", "audit": "search-audit", "settings": "list-enrollment-keys", "users": "list-users",
	"patches":  "list-patches",
	"security": "get-security-dashboard", "vulnerabilities": "list-vulnerabilities",
	"automations": "list-automations", "monitors": "list-monitors", "maintenance": "list-maintenance-windows", "discovery": "list-discovery-profiles",
	"apikeys": "list-api-keys", "roles": "list-roles", "channels": "list-alert-channels", "webhooks": "list-webhooks"}

func (c *Console) nav(r *http.Request) map[string]bool {
	out := make(map[string]bool, len(sections))
	for name, op := range sections {
		out[name] = c.HTTP.Permits(r.Context(), op)
	}
	return out
}

// contentSecurityPolicy lets pages load only this server's own scripts, styles and
// connections: no inline script, no other origin, no framing.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

func (c *Console) secureHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Security-Policy", contentSecurityPolicy)
}

// errorPage is the data of the error page.
type errorPage struct {
	Status  int
	Heading string
	Message string
	Next    string
	Request string
	// Details say which field broke which rule.
	Details []apperr.Detail
}

// fail shows an error: the API's message and what to do next, as a page, or as a notice in
// the page for an htmx request. A missing resource and one outside the user's scope are the
// same 404.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	ae, ok := apperr.As(err)
	if !ok {
		c.Logger.ErrorContext(r.Context(), "console page failed", "path", r.URL.Path, "error", err,
			"requestId", access.RequestFrom(r.Context()).ID)
		ae = &apperr.Error{Kind: apperr.KindInternal, Code: "INTERNAL", Message: "something went wrong on the server"}
	}
	status := httpapi.StatusOf(ae)
	e := errorPage{Status: status, Message: ae.Message, Request: access.RequestFrom(r.Context()).ID, Details: ae.Details}
	switch ae.Kind {
	case apperr.KindNotFound:
		e.Heading = "Not found"
		e.Message = "This page does not exist, or what it shows is outside what you may see."
		e.Next = "Check the address, or go back to the list it came from."
	case apperr.KindForbidden:
		e.Heading = "Not allowed"
		e.Next = "Ask an administrator for the permission if you need it."
	case apperr.KindInternal:
		e.Heading = "Server error"
		e.Next = "Try again; if it keeps failing, give your administrator the request ID below."
	case apperr.KindRateLimited:
		e.Heading = "Too many attempts"
		e.Next = "Wait a little, then try again."
	default:
		e.Heading = "That did not work"
		e.Next = "Correct what the message says and try again."
	}
	if r.Header.Get("HX-Request") != "" {
		w.Header().Set("HX-Retarget", "#notice")
		w.Header().Set("HX-Reswap", "innerHTML")
		if rerr := c.render(w, r, status, "error", "notice", view{Data: e}); rerr != nil {
			http.Error(w, e.Message, status)
		}
		return
	}
	if rerr := c.render(w, r, status, "error", "", view{Title: e.Heading, Data: e}); rerr != nil {
		c.Logger.ErrorContext(r.Context(), "console error page failed", "error", rerr)
		http.Error(w, e.Message, status)
	}
}

// deref is the string s points to, "" for none.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// ago says how long ago something happened, d before now.
func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h ago", int(d.Hours()))
	default:
		return fmt.Sprintf("%d days ago", int(d.Hours()/24))
	}
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for v := n / unit; v >= unit; v /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// nextPage is the address of the page after this one: the same path and query with the
// cursor the service returned; "" on the last page.
func nextPage(r *http.Request, cursor string) string {
	if cursor == "" {
		return ""
	}
	q := r.URL.Query()
	q.Set("cursor", cursor)
	return r.URL.Path + "?" + q.Encode()
}

// toNotice sends an htmx answer to the page's notice area, and tells the page's live regions
// to fetch themselves again.
func toNotice(w http.ResponseWriter) {
	w.Header().Set("HX-Retarget", "#notice")
	w.Header().Set("HX-Reswap", "innerHTML")
	w.Header().Set("HX-Trigger", "live")
}

// targeted is fragment when an htmx request asks for the element of that id (a live region
// fetching itself again), else "": the whole page.
func targeted(r *http.Request, fragment string) string {
	if r.Header.Get("HX-Target") == fragment {
		return fragment
	}
	return ""
}
