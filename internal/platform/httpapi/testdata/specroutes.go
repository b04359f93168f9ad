// Specroutes prints every route of the API specification files named as arguments, one
// "METHOD /path" a line with parameters written {name}, sorted and without duplicates, after
// a comment saying how it was made. spec-routes.txt is its output:
//
//	go run ./internal/httpapi/testdata/specroutes.go SPECDIR/api-core.md \
//		SPECDIR/api-billing-tickets-imports.md > internal/platform/httpapi/testdata/spec-routes.txt
//
// It reads routes from code spans (`GET /a/:id`, `GET/POST /a`, and `/b` right after a route
// on the same line, which replaces that route's last segment), from tables with Method and
// Path columns, and from table cells that begin with a route. A section that says "All paths
// are under `/prefix`" prefixes its routes. Where the standard REST pattern is meant (a
// sentence naming it, or a table row of several methods over a collection and its items),
// a collection takes GET and POST, an item GET, PATCH and DELETE. Section 2 (resource
// fields) names no routes of its own and is skipped.
package main

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
)

var (
	codeSpan  = regexp.MustCompile("`([^`]+)`")
	routeSpan = regexp.MustCompile(`^((?:GET|POST|PUT|PATCH|DELETE|ALL)(?:/(?:GET|POST|PUT|PATCH|DELETE))*) (/\S*)$`)
	routeCell = regexp.MustCompile(`^((?:GET|POST|PUT|PATCH|DELETE)(?:/(?:GET|POST|PUT|PATCH|DELETE))*) (/[^\s,]*)`)
	param     = regexp.MustCompile(`:([A-Za-z][A-Za-z0-9]*)`)
	underLine = regexp.MustCompile("All paths are under `(/[^`]+)`")
	joiner    = regexp.MustCompile(`^(,\s*|,?\s*and\s+)$`)
	restLine  = regexp.MustCompile("standard REST pattern under `")
)

var restMethods = []string{"GET", "POST", "PATCH", "DELETE"}

func main() {
	routes := map[string]bool{}
	for _, file := range os.Args[1:] {
		if err := read(file, routes); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	fmt.Println("# Every route of the API specification (api-core.md, api-billing-tickets-imports.md):")
	fmt.Println("# go run ./internal/httpapi/testdata/specroutes.go api-core.md api-billing-tickets-imports.md")
	fmt.Println("# ALL means every method.")
	for _, r := range slices.Sorted(maps.Keys(routes)) {
		fmt.Println(r)
	}
}

func read(file string, routes map[string]bool) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	var prefix string
	var skip bool
	var methodCol, pathCol = -1, -1
	add := func(methods []string, path string) {
		path, _, _ = strings.Cut(prefix+path, "?")
		path = param.ReplaceAllString(path, "{$1}")
		if strings.HasSuffix(path, "/*") {
			path = strings.TrimSuffix(path, "*") + "{path...}"
		}
		for _, m := range methods {
			routes[m+" "+path] = true
		}
	}
	// addREST adds the standard REST routes among methods: POST on collections only, PATCH
	// and DELETE on items only.
	addREST := func(methods []string, paths ...string) {
		for _, p := range paths {
			item := strings.Contains(p[strings.LastIndex(p, "/"):], ":")
			for _, m := range methods {
				if m == "GET" || (m == "POST") != item {
					add([]string{m}, p)
				}
			}
		}
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			skip = strings.HasPrefix(line, "## 2.")
		}
		if strings.HasPrefix(line, "#") {
			prefix = ""
			continue
		}
		if skip {
			continue
		}
		if m := underLine.FindStringSubmatch(line); m != nil {
			prefix = m[1]
			continue
		}
		if restLine.MatchString(line) {
			for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
				addREST(restMethods, m[1], m[1]+"/:id")
			}
			continue
		}
		if strings.HasPrefix(line, "|") {
			cells := strings.Split(strings.Trim(line, "|"), "|")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			switch {
			case slices.Contains(cells, "Method") && slices.Contains(cells, "Path"):
				methodCol, pathCol = slices.Index(cells, "Method"), slices.Index(cells, "Path")
				continue
			case strings.HasPrefix(cells[0], "---"):
				continue
			case methodCol >= 0:
				methods, paths := strings.Split(cells[methodCol], ", "), strings.Split(cells[pathCol], ", ")
				if len(methods) > 1 && len(paths) > 1 {
					addREST(methods, paths...)
					continue
				}
				for _, p := range paths {
					add(methods, p)
				}
				continue
			}
			for _, c := range cells {
				if m := routeCell.FindStringSubmatch(c); m != nil {
					add(strings.Split(m[1], "/"), m[2])
				}
			}
		} else {
			methodCol, pathCol = -1, -1
		}
		var last []string // methods and path of the previous span, when it was a route
		end := 0
		for _, loc := range codeSpan.FindAllStringSubmatchIndex(line, -1) {
			span, between := line[loc[2]:loc[3]], line[end:loc[0]]
			end = loc[1]
			if m := routeSpan.FindStringSubmatch(span); m != nil {
				last = append(strings.Split(m[1], "/"), m[2])
				add(last[:len(last)-1], m[2])
				continue
			}
			if last != nil && strings.HasPrefix(span, "/") && !strings.Contains(span[1:], "/") && joiner.MatchString(between) {
				prev := last[len(last)-1]
				path := prev[:strings.LastIndex(prev, "/")] + span
				last[len(last)-1] = path
				add(last[:len(last)-1], path)
				continue
			}
			last = nil
		}
	}
	return sc.Err()
}
