package script

import (
	"bytes"
	"context"
	"sync"
	"time"
	"unicode/utf8"

	"gale/internal/agent/capability"
	"gale/internal/wire/agentproto"
)

// liveInterval is how often a running script's new output is sent.
const liveInterval = 500 * time.Millisecond

// outputBuffer keeps the first max bytes written to a stream, notes whether more came, and
// is read while the script still writes (for the live pieces).
type outputBuffer struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	max       int
	truncated bool
}

func (b *outputBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room < len(p) {
		b.truncated = true
		if room > 0 {
			b.buf.Write(p[:room])
		}
		return len(p), nil
	}
	return b.buf.Write(p)
}

// since returns a copy of what was written from offset on.
func (b *outputBuffer) since(offset int) []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes()[offset:])
}

// Bytes returns everything kept; call it once the script has ended.
func (b *outputBuffer) Bytes() []byte { return b.buf.Bytes() }

// liveStream is what of one stream was sent live.
type liveStream struct {
	buf  *outputBuffer
	sent int
	off  bool // the stream is not text: it is no longer sent live
}

// next returns the stream's new text since the last piece: whole characters only (a character
// cut at the end waits for its rest). A stream that turns out not to be text stops.
func (l *liveStream) next() []byte {
	if l.off {
		return nil
	}
	p := l.buf.since(l.sent)
	end := len(p)
	for i := 1; i < utf8.UTFMax && i <= len(p); i++ {
		if utf8.RuneStart(p[len(p)-i]) {
			if !utf8.FullRune(p[len(p)-i:]) {
				end = len(p) - i
			}
			break
		}
	}
	p = p[:end]
	if !utf8.Valid(p) || bytes.IndexByte(p, 0) >= 0 {
		l.off = true
		return nil
	}
	return p
}

// sendLive reports that the script started, then sends its new output every liveInterval
// until ctx ends.
func sendLive(ctx context.Context, commandID string, stdout, stderr *outputBuffer) {
	sink := capability.OutputFrom(ctx)
	sink(agentproto.CommandOutput{CommandID: commandID})
	out, errs := &liveStream{buf: stdout}, &liveStream{buf: stderr}
	t := time.NewTicker(liveInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		o := agentproto.CommandOutput{CommandID: commandID, StdoutOffset: int64(out.sent), StderrOffset: int64(errs.sent),
			Stdout: out.next(), Stderr: errs.next()}
		if len(o.Stdout) == 0 && len(o.Stderr) == 0 {
			continue
		}
		out.sent += len(o.Stdout)
		errs.sent += len(o.Stderr)
		sink(o)
	}
}
