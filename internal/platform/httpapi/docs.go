package httpapi

import (
	_ "embed"
	"net/http"
)

// docsPage renders /api/v1/openapi.json in the browser. It is served from the binary, so
// the reference works on servers without internet access.
//
//go:embed assets/docs.html
var docsPage []byte

func serveDocs(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; frame-ancestors 'none'")
	_, _ = w.Write(docsPage)
}
