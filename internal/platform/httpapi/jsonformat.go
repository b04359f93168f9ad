package httpapi

import (
	"encoding/json"
	"io"
	"sync"

	"github.com/danielgtaylor/huma/v2"

	"gale/internal/platform/jsonenc"
)

// jsonFormat encodes response bodies as huma's default does (encoding/json, HTML escaping
// off), except that a body implementing jsonenc.Appender writes itself.
var jsonFormat = huma.Format{Marshal: marshalJSON, Unmarshal: json.Unmarshal}

// bodyBuffers recycles the buffers of appended bodies; very large ones are left to the GC.
var bodyBuffers = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledBody = 1 << 20

func marshalJSON(w io.Writer, v any) error {
	a, ok := v.(jsonenc.Appender)
	if !ok {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		return enc.Encode(v)
	}
	buf := bodyBuffers.Get().(*[]byte)
	b, err := a.AppendJSON((*buf)[:0])
	if err == nil {
		b = append(b, '\n')
		if ww, ok := w.(interface{ WriteWhole([]byte) (int, error) }); ok {
			_, err = ww.WriteWhole(b)
		} else {
			_, err = w.Write(b)
		}
	}
	if cap(b) <= maxPooledBody {
		*buf = b[:0]
		bodyBuffers.Put(buf)
	}
	return err
}
