package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOneClock keeps internal/clock the only time abstraction (issue 20
// item 2): no other non-test file declares an interface named like a clock,
// timer or ticker, or one with a clock's methods (Now, NewTimer, AfterFunc,
// After). Aliases (type Clock = clock.Clock) are fine.
func TestOneClock(t *testing.T) {
	found := 0
	for _, p := range listPackages(t) {
		path := rel(p.ImportPath)
		for _, f := range p.GoFiles {
			for _, d := range clockInterfaces(t, filepath.Join(p.Dir, f)) {
				if path == "internal/clock" {
					found++
					continue
				}
				t.Errorf("%s: interface %s looks like a clock; use internal/clock's types (an alias is fine)", d.where, d.fn)
			}
		}
	}
	if found == 0 {
		t.Fatal("found no clock interface in internal/clock: the check is broken")
	}
}

// clockInterfaces lists a file's interface declarations (not aliases) that
// are clocks, timers or tickers by name or by method.
func clockInterfaces(t *testing.T, file string) []call {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	timeMethods := map[string]bool{"Now": true, "NewTimer": true, "NewTicker": true, "AfterFunc": true, "After": true}
	var found []call
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Assign.IsValid() {
			return true
		}
		it, ok := ts.Type.(*ast.InterfaceType)
		if !ok {
			return true
		}
		name := strings.ToLower(ts.Name.Name)
		clockish := strings.HasSuffix(name, "clock") || strings.HasSuffix(name, "timer") || strings.HasSuffix(name, "ticker")
		for _, m := range it.Methods.List {
			for _, id := range m.Names {
				if timeMethods[id.Name] && returnsTime(m.Type) {
					clockish = true
				}
			}
		}
		if clockish {
			found = append(found, call{fset.Position(ts.Pos()).String(), ts.Name.Name})
		}
		return true
	})
	return found
}

// returnsTime: a method type whose results mention package time or a
// timer (Now() time.Time, After(d) <-chan time.Time, NewTimer(d) Timer).
func returnsTime(expr ast.Expr) bool {
	ft, ok := expr.(*ast.FuncType)
	if !ok || ft.Results == nil {
		return false
	}
	hit := false
	for _, r := range ft.Results.List {
		ast.Inspect(r.Type, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && id.Name == "time" {
					hit = true
				}
			case *ast.Ident:
				if n.Name == "Timer" || n.Name == "Ticker" {
					hit = true
				}
			}
			return true
		})
	}
	return hit
}

func TestClockInterfacesFound(t *testing.T) {
	file := filepath.Join(t.TempDir(), "x.go")
	src := `package x

import "time"

type LoopClock interface{ Now() time.Time }
type Waker interface{ After(d time.Duration) <-chan time.Time }
type Timer interface{ Stop() bool }
type Clock = LoopClock
type Namer interface{ Name() string }
`
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range clockInterfaces(t, file) {
		got = append(got, c.fn)
	}
	if strings.Join(got, ",") != "LoopClock,Waker,Timer" {
		t.Fatalf("found %v", got)
	}
}
