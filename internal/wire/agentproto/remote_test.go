package agentproto

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestTermFramesRoundTrip(t *testing.T) {
	var b bytes.Buffer
	big := bytes.Repeat([]byte("x"), MaxTermPayload+10)
	if err := WriteTermData(&b, big); err != nil {
		t.Fatal(err)
	}
	if err := WriteTermFrame(&b, TermResize, ResizePayload(120, 40)); err != nil {
		t.Fatal(err)
	}
	var got []byte
	for range 2 {
		typ, p, err := ReadTermFrame(&b, nil)
		if err != nil || typ != TermData {
			t.Fatalf("data frame: %d %v", typ, err)
		}
		got = append(got, p...)
	}
	if !bytes.Equal(got, big) {
		t.Fatalf("data came back as %d bytes, want %d", len(got), len(big))
	}
	typ, p, err := ReadTermFrame(&b, nil)
	if err != nil || typ != TermResize {
		t.Fatalf("resize frame: %d %v", typ, err)
	}
	if cols, rows, err := ParseResize(p); cols != 120 || rows != 40 || err != nil {
		t.Fatalf("ParseResize = %d, %d, %v; want 120, 40", cols, rows, err)
	}
	if _, _, err := ReadTermFrame(&b, nil); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
	if err := WriteTermFrame(&b, TermData, big); !errors.Is(err, ErrTermFrame) {
		t.Fatalf("oversized frame: %v", err)
	}
	if _, _, err := ReadTermFrame(bytes.NewReader([]byte{TermData, 0, 5, 'a'}), nil); !errors.Is(err, ErrTermFrame) {
		t.Fatalf("cut frame: %v", err)
	}
	if _, _, err := ParseResize([]byte{1, 2}); !errors.Is(err, ErrTermFrame) {
		t.Fatalf("short resize: %v", err)
	}
}

func FuzzReadTermFrame(f *testing.F) {
	f.Add([]byte{TermData, 0, 2, 'h', 'i'})
	f.Add([]byte{TermResize, 0, 4, 0, 80, 0, 24})
	f.Add([]byte{0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		for {
			typ, p, err := ReadTermFrame(r, nil)
			if err != nil {
				return
			}
			if len(p) > MaxTermPayload {
				t.Fatalf("payload of %d bytes", len(p))
			}
			if typ == TermResize {
				_, _, _ = ParseResize(p)
			}
		}
	})
}
