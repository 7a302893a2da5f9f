package ledger

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestEffectsAndEventsInOnePlace checks that every Effect type is declared
// in effect.go and listed by Effects, and every Event type is declared in
// event.go and listed by Events: shells test their exhaustiveness against
// those lists, so a type missing from them would escape the test.
func TestEffectsAndEventsInOnePlace(t *testing.T) {
	for _, c := range []struct {
		marker, file string
		listed       []string
	}{
		{"isEffect", "effect.go", typeNames(Effects())},
		{"isEvent", "event.go", typeNames(Events())},
	} {
		declared := markedTypes(t, c.marker)
		for name, file := range declared {
			if file != c.file {
				t.Errorf("%s implements %s in %s, want it in %s", name, c.marker, file, c.file)
			}
			if !slices.Contains(c.listed, name) {
				t.Errorf("%s implements %s but is missing from the list in %s", name, c.marker, c.file)
			}
		}
		for _, name := range c.listed {
			if _, ok := declared[name]; !ok {
				t.Errorf("%s is listed in %s but does not implement %s", name, c.file, c.marker)
			}
		}
		if len(c.listed) != len(declared) {
			t.Errorf("%s: %d types listed, %d declared (duplicates?)", c.file, len(c.listed), len(declared))
		}
	}
}

func typeNames[T any](vs []T) []string {
	var out []string
	for _, v := range vs {
		out = append(out, reflect.TypeOf(v).Name())
	}
	return out
}

// markedTypes returns the receiver types of the package's methods named
// marker, with the file declaring each.
func markedTypes(t *testing.T, marker string) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range pkgs["ledger"].Files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || fd.Name.Name != marker {
				continue
			}
			id, ok := fd.Recv.List[0].Type.(*ast.Ident)
			if !ok {
				t.Fatalf("%s: %s on a pointer receiver", fset.Position(fd.Pos()), marker)
			}
			out[id.Name] = fset.File(fd.Pos()).Name()
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s methods found", marker)
	}
	return out
}
