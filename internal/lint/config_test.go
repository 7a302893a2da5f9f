package lint

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// configFunc reports whether a function of this name takes or checks a
// configuration: a constructor (New…, Open…, Start…) or a validation or
// defaulting method. Bad configuration is an error such functions return
// (a Validate() error on the configuration type), never a panic.
func configFunc(name string) bool {
	if name == "NewTicker" {
		// A clock's NewTicker keeps time.NewTicker's contract (a
		// non-positive period is a programming error), not a configuration.
		return false
	}
	for _, p := range []string{"New", "Open", "Start"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	switch name {
	case "Validate", "validate", "setDefaults", "withDefaults", "defaults":
		return true
	}
	return false
}

// configPanics returns the panics in file's configuration functions.
func configPanics(t *testing.T, file string) []finding {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var found []finding
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil || !configFunc(fd.Name.Name) {
			continue
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "panic" && id.Obj == nil {
					found = append(found, finding{fset.Position(call.Pos()).String(), fd.Name.Name + " panics"})
				}
			}
			return true
		})
	}
	return found
}

// TestNoConfigPanics: constructors and configuration checks of the
// module's non-test code return errors for bad configuration.
func TestNoConfigPanics(t *testing.T) {
	for _, p := range listPackages(t) {
		for _, f := range p.GoFiles {
			for _, v := range configPanics(t, filepath.Join(p.Dir, f)) {
				t.Errorf("%s: %s: return the configuration error (Validate() error), do not panic", v.where, v.what)
			}
		}
	}
}

func TestConfigPanicsFound(t *testing.T) {
	file := writeSource(t, `package p
type Config struct{ N int }
func (c Config) Validate() error { if c.N < 0 { panic("negative") }; return nil }
func NewThing(c Config) *int { if c.N == 0 { panic("zero") }; return new(int) }
func helper() { panic("not a configuration function") }
func OpenLocal(c Config) { panic := func(string) {}; panic("shadowed") }
`)
	got := fmt.Sprint(whats(configPanics(t, file)))
	if got != "[Validate panics NewThing panics]" {
		t.Fatalf("found %s, want the panics of Validate and NewThing", got)
	}
}
