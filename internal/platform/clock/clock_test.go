package clock

import (
	"testing"
	"time"
)

func TestFakeMovesAndRuns(t *testing.T) {
	at := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	f := NewFake(at)
	if d := f.Now().Sub(at); d < 0 || d > time.Second {
		t.Fatalf("NewFake(%v) tells %v", at, f.Now())
	}
	f.Advance(time.Hour)
	if d := f.Now().Sub(at.Add(time.Hour)); d < 0 || d > time.Second {
		t.Fatalf("after Advance(1h) the clock tells %v", f.Now())
	}
	before := f.Now()
	time.Sleep(2 * time.Millisecond)
	if !f.Now().After(before) {
		t.Fatal("the fake clock does not run")
	}
	if var0 := (&Fake{}).Now(); time.Since(var0) > time.Second {
		t.Fatalf("a zero Fake tells %v", var0)
	}
	if Or(nil) != (System{}) || Or(f) != f {
		t.Fatal("Or")
	}
}
