package jsonenc_test

import (
	"errors"
	"io"
	"testing"

	"gale/internal/platform/jsonenc"
)

type shape struct {
	Name string `json:"name"`
}

func TestDecodeStrict(t *testing.T) {
	for _, c := range []struct {
		raw     string
		want    string
		wantErr bool
	}{
		{raw: `{"name":"a"}`, want: "a"},
		{raw: `{"name":"a"} trailing`, want: "a"},
		{raw: `{"name":"a","nmae":"b"}`, wantErr: true},
		{raw: `{"name":`, wantErr: true},
	} {
		var got shape
		err := jsonenc.DecodeStrict([]byte(c.raw), &got)
		if (err != nil) != c.wantErr || !c.wantErr && got.Name != c.want {
			t.Errorf("DecodeStrict(%s) = %+v, %v; want name %q, error %v", c.raw, got, err, c.want, c.wantErr)
		}
	}
	if err := jsonenc.DecodeStrict(nil, &shape{}); err != io.EOF {
		t.Errorf("DecodeStrict(empty) = %v, want io.EOF", err)
	}
}

func TestDecodeStrictRequired(t *testing.T) {
	if err := jsonenc.DecodeStrictRequired(nil, &shape{}); !errors.Is(err, jsonenc.ErrMissing) {
		t.Errorf("DecodeStrictRequired(empty) = %v, want ErrMissing", err)
	}
	var got shape
	if err := jsonenc.DecodeStrictRequired([]byte(`{"name":"a"}`), &got); err != nil || got.Name != "a" {
		t.Errorf("DecodeStrictRequired = %+v, %v", got, err)
	}
	if err := jsonenc.DecodeStrictRequired([]byte(`{"other":1}`), &got); err == nil {
		t.Error("DecodeStrictRequired accepted an unknown member")
	}
}
