package console

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
)

//go:embed assets
var assetFS embed.FS

// asset is one embedded file, with its gzip form when that is smaller.
type asset struct {
	data, gz    []byte
	contentType string
	hash        string
}

// assets are the console's stylesheet, scripts and vendored libraries. Pages link them with
// their content hash in the URL, so browsers keep them until they change.
type assets struct{ files map[string]*asset }

func loadAssets() (*assets, error) {
	a := &assets{files: map[string]*asset{}}
	err := fs.WalkDir(assetFS, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := assetFS.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		f := &asset{data: data, hash: hex.EncodeToString(sum[:6]), contentType: mime.TypeByExtension(path.Ext(p))}
		if f.contentType == "" {
			f.contentType = "text/plain; charset=utf-8"
		}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(data)
		zw.Close()
		if buf.Len() < len(data) {
			f.gz = buf.Bytes()
		}
		a.files[strings.TrimPrefix(p, "assets/")] = f
		return nil
	})
	return a, err
}

// url is the address of an asset, with its hash; it panics on a name that is not embedded,
// which the page tests would catch.
func (a *assets) url(name string) string {
	f, ok := a.files[name]
	if !ok {
		panic("console: no asset " + name)
	}
	return "/assets/" + name + "?v=" + f.hash
}

func (a *assets) serve(w http.ResponseWriter, r *http.Request) {
	f, ok := a.files[r.PathValue("path")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", f.contentType)
	h.Set("Vary", "Accept-Encoding")
	if r.URL.Query().Get("v") == f.hash {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	h.Set("ETag", `"`+f.hash+`"`)
	if r.Header.Get("If-None-Match") == `"`+f.hash+`"` {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := f.data
	if f.gz != nil && acceptsGzip(r) {
		h.Set("Content-Encoding", "gzip")
		body = f.gz
	}
	w.Write(body)
}

func acceptsGzip(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept-Encoding"), "gzip")
}
