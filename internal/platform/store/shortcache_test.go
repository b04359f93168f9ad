package store

import (
	"testing"
	"time"
)

func TestShortCacheKeepsUntilItsTimeOrAForget(t *testing.T) {
	c := NewShortCache[string](time.Second, 10)
	now := time.Now()
	c.Put("a", "one", c.Generation(), now)
	if v, ok := c.Get("a", now.Add(999*time.Millisecond)); !ok || v != "one" {
		t.Fatalf("within its time: %q %v", v, ok)
	}
	if _, ok := c.Get("a", now.Add(time.Second)); ok {
		t.Fatal("kept past its time")
	}
	c.Forget()
	if _, ok := c.Get("a", now); ok {
		t.Fatal("kept past a Forget")
	}
}

// A value read before a Forget may predate the change that caused it: it is not kept.
func TestShortCacheRefusesAValueReadBeforeAForget(t *testing.T) {
	c := NewShortCache[string](time.Hour, 10)
	now := time.Now()
	before := c.Generation()
	c.Forget()
	c.Put("a", "stale", before, now)
	if _, ok := c.Get("a", now); ok {
		t.Fatal("a value read before the Forget was kept")
	}
	c.Put("a", "fresh", c.Generation(), now)
	if v, ok := c.Get("a", now); !ok || v != "fresh" {
		t.Fatalf("a value read after the Forget: %q %v", v, ok)
	}
}

func TestShortCacheBoundsAndNil(t *testing.T) {
	c := NewShortCache[int](time.Hour, 2)
	now := time.Now()
	for i, k := range []string{"a", "b", "c"} {
		c.Put(k, i, c.Generation(), now)
	}
	if len(c.entries) > 2 {
		t.Fatalf("%d entries kept, at most 2 allowed", len(c.entries))
	}
	if v, ok := c.Get("c", now); !ok || v != 2 {
		t.Fatalf("the newest value: %d %v", v, ok)
	}
	var none *ShortCache[int]
	if NewShortCache[int](0, 2) != nil {
		t.Fatal("a zero time should mean no cache")
	}
	none.Put("a", 1, none.Generation(), now)
	none.Forget()
	if _, ok := none.Get("a", now); ok {
		t.Fatal("a nil cache kept a value")
	}
}
