package module

import (
	"fmt"
	"strings"
	"testing"
)

type greeter interface{ Greet() string }

type english struct{}

func (english) Greet() string { return "hello" }

type french struct{}

func (french) Greet() string { return "bonjour" }

// A module finds what earlier modules provided; one listed before what it needs fails the
// build naming itself, as does one that finds two candidates.
func TestBuildOrderAndLookups(t *testing.T) {
	var got string
	uses := Module{Name: "uses", Build: func(k *Kernel) error {
		got = Get[greeter](k).Greet()
		return nil
	}}
	provides := func(v any) Module {
		return Module{Name: fmt.Sprintf("provides %T", v), Build: func(k *Kernel) error { k.Provide(v); return nil }}
	}
	k := &Kernel{}
	if err := k.Build([]Module{provides(english{}), uses}); err != nil || got != "hello" {
		t.Fatalf("build = %v, greeting %q", err, got)
	}
	err := (&Kernel{}).Build([]Module{uses, provides(english{})})
	if err == nil || !strings.Contains(err.Error(), "module uses") || !strings.Contains(err.Error(), "found 0") {
		t.Fatalf("a module before what it needs: %v", err)
	}
	err = (&Kernel{}).Build([]Module{provides(english{}), provides(french{}), uses})
	if err == nil || !strings.Contains(err.Error(), "found 2") {
		t.Fatalf("two candidates: %v", err)
	}
	k = &Kernel{}
	if err := k.Build([]Module{provides(english{}), provides(french{})}); err != nil {
		t.Fatal(err)
	}
	if all := All[greeter](k); len(all) != 2 || all[0].Greet() != "hello" || all[1].Greet() != "bonjour" {
		t.Fatalf("All = %v, want both in the order provided", all)
	}
}

// Caches are forgotten together; closers run in reverse order, once.
func TestCachesAndClosers(t *testing.T) {
	k := &Kernel{}
	var log []string
	k.Cache(func() { log = append(log, "forget a") })
	k.Cache(func() { log = append(log, "forget b") })
	k.OnClose(func() { log = append(log, "close first") })
	k.OnClose(func() { log = append(log, "close second") })
	k.ForgetCaches()
	k.Close()
	k.Close()
	if want := "forget a,forget b,close second,close first"; strings.Join(log, ",") != want {
		t.Fatalf("ran %v, want %s", log, want)
	}
}
