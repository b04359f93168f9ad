package module

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

type greeter interface{ Greet() string }

type english struct{}

func (*english) Greet() string { return "hello" }

type french struct{}

func (*french) Greet() string { return "bonjour" }

func provides(v any) Module {
	return Module{Name: fmt.Sprintf("provides %T", v), Build: func(k *Kernel) error { k.Provide(v); return nil }}
}

// A module finds what earlier modules provided, by concrete type; one listed before what it
// needs fails the build naming itself, as does one that finds two candidates or asks for an
// interface.
func TestBuildOrderAndLookups(t *testing.T) {
	var got string
	uses := Module{Name: "uses", Build: func(k *Kernel) error {
		got = Get[*english](k).Greet()
		return nil
	}}
	k := &Kernel{}
	if err := k.Build([]Module{provides(&english{}), uses}); err != nil || got != "hello" {
		t.Fatalf("build = %v, greeting %q", err, got)
	}
	err := (&Kernel{}).Build([]Module{uses, provides(&english{})})
	if err == nil || !strings.Contains(err.Error(), "module uses") || !strings.Contains(err.Error(), "found 0") {
		t.Fatalf("a module before what it needs: %v", err)
	}
	err = (&Kernel{}).Build([]Module{provides(&english{}), provides(&english{}), uses})
	if err == nil || !strings.Contains(err.Error(), "found 2") {
		t.Fatalf("two candidates: %v", err)
	}
	byInterface := Module{Name: "by interface", Build: func(k *Kernel) error { Get[greeter](k); return nil }}
	err = (&Kernel{}).Build([]Module{provides(&english{}), byInterface})
	if err == nil || !strings.Contains(err.Error(), "module by interface") || !strings.Contains(err.Error(), "concrete type") {
		t.Fatalf("a lookup by interface: %v", err)
	}
}

// Declarations reach their receiver whichever side of it they are built on, in module order,
// and only once every module is built.
func TestDeclarations(t *testing.T) {
	declares := func(v any) Module {
		return Module{Name: fmt.Sprintf("declares %T", v), Build: func(k *Kernel) error { k.Declare(v); return nil }}
	}
	var greetings []string
	receiver := Module{Name: "receiver", Build: func(k *Kernel) error {
		k.OnReady(func(ctx context.Context) error {
			for _, g := range Declared[greeter](k) {
				greetings = append(greetings, g.Greet())
			}
			return nil
		})
		return nil
	}}
	k := &Kernel{}
	if err := k.Build([]Module{declares(&english{}), receiver, declares(&french{}), declares("not a greeter")}); err != nil {
		t.Fatal(err)
	}
	if err := k.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	if strings.Join(greetings, ",") != "hello,bonjour" {
		t.Fatalf("Declared = %v, want both greeters in module order", greetings)
	}
	early := Module{Name: "early", Build: func(k *Kernel) error { Declared[greeter](k); return nil }}
	err := (&Kernel{}).Build([]Module{declares(&english{}), early})
	if err == nil || !strings.Contains(err.Error(), "module early") || !strings.Contains(err.Error(), "OnReady") {
		t.Fatalf("declarations read while building: %v", err)
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
