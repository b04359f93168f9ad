package app

import "testing"

func TestGCPercentShrinksAsTheLiveHeapGrows(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 400}, {10 << 20, 400}, {32 << 20, 400}, {64 << 20, 200}, {100 << 20, 128}, {128 << 20, 100}, {1 << 30, 100},
	} {
		if got := gcPercentFor(c.live); got != c.want {
			t.Errorf("live heap %d MiB: GOGC %d, want %d", c.live>>20, got, c.want)
		}
	}
}
