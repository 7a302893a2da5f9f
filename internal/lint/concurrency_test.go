package lint

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The protocol core (internal/ledger and below) is a set of deterministic
// state machines driven by one caller: it starts no goroutine, takes no
// lock and draws no randomness it was not given (a rand.Source is
// injected; the simulator seeds it). The bookie's request code
// (internal/bookie, not its network server) starts goroutines only through
// its Config.Go hook, so that the simulator schedules that work itself.
// docs/design/threads.md lists the goroutines these rules leave.

// singleThreaded lists the package trees whose non-test code may not use
// go statements, sync or sync/atomic, or math/rand's global source.
var singleThreaded = []string{"internal/ledger"}

// hookedGo lists the package trees (minus impure exceptions) whose go
// statements must sit in the default of a Config.Go hook.
var hookedGo = []string{"internal/bookie"}

// randConstructors are the math/rand (v1 and v2) names that do not touch
// the global source: constructors over an explicit seed or source, and
// types.
var randConstructors = map[string]bool{
	"New": true, "NewSource": true, "NewPCG": true, "NewChaCha8": true, "NewZipf": true,
	"Rand": true, "Source": true, "Source64": true, "PCG": true, "ChaCha8": true, "Zipf": true,
}

type finding struct{ where, what string }

// concurrencyFindings parses file and reports what the rules ban in it:
// with single set, go statements, sync imports and global math/rand use;
// with hooked set, go statements outside the default of a Config.Go hook
// (a function literal assigned to a field named Go).
func concurrencyFindings(t *testing.T, file string, single, hooked bool) []finding {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var found []finding
	randNames := map[string]bool{}
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		switch path {
		case "sync", "sync/atomic":
			if single {
				found = append(found, finding{fset.Position(imp.Pos()).String(), "imports " + path})
			}
		case "math/rand", "math/rand/v2":
			name := "rand"
			if imp.Name != nil {
				name = imp.Name.Name
			}
			randNames[name] = true
		}
	}
	// hookBodies are the function literals assigned to a Go field.
	hookBodies := map[*ast.FuncLit]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		as, ok := n.(*ast.AssignStmt)
		if !ok || len(as.Lhs) != len(as.Rhs) {
			return true
		}
		for i, lhs := range as.Lhs {
			sel, ok := lhs.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Go" {
				continue
			}
			if lit, ok := as.Rhs[i].(*ast.FuncLit); ok {
				hookBodies[lit] = true
			}
		}
		return true
	})
	var walk func(n ast.Node, inHook bool)
	walk = func(n ast.Node, inHook bool) {
		ast.Inspect(n, func(c ast.Node) bool {
			switch c := c.(type) {
			case *ast.FuncLit:
				if c != n && hookBodies[c] {
					walk(c, true)
					return false
				}
			case *ast.GoStmt:
				if single || (hooked && !inHook) {
					found = append(found, finding{fset.Position(c.Pos()).String(), "go statement"})
				}
			case *ast.SelectorExpr:
				if id, ok := c.X.(*ast.Ident); ok && single && randNames[id.Name] && id.Obj == nil && !randConstructors[c.Sel.Name] {
					found = append(found, finding{fset.Position(c.Pos()).String(), "global math/rand " + id.Name + "." + c.Sel.Name})
				}
			}
			return true
		})
	}
	walk(f, false)
	return found
}

func inAny(path string, roots []string) bool {
	for _, r := range roots {
		if under(path, r) {
			return true
		}
	}
	return false
}

// TestConcurrencyRules applies the rules above to the module's non-test
// files.
func TestConcurrencyRules(t *testing.T) {
	checked := map[string]int{}
	for _, p := range listPackages(t) {
		path := rel(p.ImportPath)
		single := inAny(path, singleThreaded)
		hooked := inAny(path, hookedGo) && isPure(path)
		if !single && !hooked {
			continue
		}
		for _, f := range p.GoFiles {
			checked[path]++
			for _, v := range concurrencyFindings(t, filepath.Join(p.Dir, f), single, hooked) {
				switch {
				case single:
					t.Errorf("%s: %s: internal/ledger is single-threaded and takes its randomness injected (docs/design/threads.md)", v.where, v.what)
				default:
					t.Errorf("%s: %s: the bookie starts goroutines only through Config.Go (docs/design/threads.md)", v.where, v.what)
				}
			}
		}
	}
	for _, want := range []string{"internal/ledger", "internal/ledger/quorum", "internal/bookie"} {
		if checked[want] == 0 {
			t.Errorf("the concurrency rules checked no file of %s", want)
		}
	}
}

func writeSource(t *testing.T, src string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "p.go")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

func whats(fs []finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.what)
	}
	return out
}

// The rules must be able to fail: each banned construct is reported, and
// what they allow is not.
func TestConcurrencyRulesCatchViolations(t *testing.T) {
	single := writeSource(t, `package p
import (
	"sync"
	"sync/atomic"
	mrand "math/rand/v2"
	old "math/rand"
)
var mu sync.Mutex
var n atomic.Int64
func f(src mrand.Source) {
	go f(src)
	_ = mrand.IntN(3)
	old.Seed(1)
	r := mrand.New(src)
	_ = r.IntN(3)
	_ = mrand.NewPCG(1, 2)
	{
		mrand := r
		_ = mrand.IntN(2)
	}
}
`)
	got := fmt.Sprint(whats(concurrencyFindings(t, single, true, false)))
	want := "[imports sync imports sync/atomic go statement global math/rand mrand.IntN global math/rand old.Seed]"
	if got != want {
		t.Fatalf("single-threaded findings %s, want %s", got, want)
	}

	hooked := writeSource(t, `package p
import "sync"
type Config struct{ Go func(func()) }
var mu sync.Mutex
func New(cfg Config) {
	if cfg.Go == nil {
		cfg.Go = func(fn func()) { go fn() }
	}
	go watch()
	cfg.Other = func() { go watch() }
	defer func() { go watch() }()
}
func watch() {}
`)
	fs := concurrencyFindings(t, hooked, false, true)
	if got := fmt.Sprint(whats(fs)); got != "[go statement go statement go statement]" {
		t.Fatalf("hooked findings %s, want three go statements (not the Config.Go default)", got)
	}
	for i, line := range []string{":9:", ":10:", ":11:"} {
		if !strings.Contains(fs[i].where, line) {
			t.Fatalf("finding %d at %s, want line %s", i, fs[i].where, line)
		}
	}
	if fs := concurrencyFindings(t, hooked, false, false); len(fs) != 0 {
		t.Fatalf("no rule applies, found %v", fs)
	}
}

// TestThreadsDocumented keeps docs/design/threads.md complete: every
// non-test file of the module that starts a goroutine (a go statement, or a
// WaitGroup.Go) is named there by its path from the module root, so a new
// background goroutine comes with its entry (who starts it, what ends it,
// what it owns).
func TestThreadsDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/design/threads.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	n := 0
	for _, p := range listPackages(t) {
		for _, f := range p.GoFiles {
			file := filepath.Join(p.Dir, f)
			if !startsGoroutines(t, file) {
				continue
			}
			n++
			path := rel(p.ImportPath) + "/" + f
			if !strings.Contains(doc, "`"+path+"`") {
				t.Errorf("%s starts goroutines but docs/design/threads.md does not name `%s`", path, path)
			}
		}
	}
	if n < 10 {
		t.Fatalf("found only %d files that start goroutines", n)
	}
}

// startsGoroutines reports whether file has a go statement or calls a
// method named Go on a sync.WaitGroup-like value (wg.Go).
func startsGoroutines(t *testing.T, file string) bool {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			found = true
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Go" {
				if id, ok := sel.X.(*ast.Ident); ok && (id.Name == "wg" || id.Name == "checks") {
					found = true
				}
			}
		}
		return !found
	})
	return found
}
