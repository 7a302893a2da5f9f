package lint

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

const module = "github.com/foliodb/folio"

// layers lists, for each package of the module (by path relative to the
// module root; a rule covers the package and everything below it unless a
// longer rule matches), the module packages it may import. A package may
// always import packages under its own rule. A new package without a rule
// fails the test: decide where it sits in the layout (DESIGN.md §8 as
// amended by docs/design/layout.md) and add it here.
var layers = map[string][]string{
	"cmd/folio":           {"internal/cli"},
	"internal/cli":        {"*"}, // the top: may import anything below it
	"internal/lint":       {},
	"internal/wire":       {},
	"internal/wire/v2":    {"internal/wire", "internal/wire/v3"},
	"internal/wire/v3":    {"internal/wire"},
	"internal/wire/codec": {"internal/wire"},
	"internal/digest":     {},
	"internal/metadata":   {},
	"internal/transport":  {"internal/wire", "internal/digest"},
	"internal/ledger":     {"internal/wire", "internal/digest", "internal/metadata"},
	"internal/ledgerexec": {"internal/ledger", "internal/wire", "internal/digest", "internal/metadata"},
	"client":              {"internal/ledger", "internal/ledgerexec", "internal/transport", "internal/metadata", "internal/wire", "internal/digest", "internal/topologyscript"},
	"client/clientprom":   {"client", "internal/opstats"}, // the Prometheus adapter of client.Metrics
	// The public admin API wraps internal/admin (the implementation the
	// shell, the bookie's admin HTTP server and standalone share) with
	// public types: docs/design/layout.md.
	"admin":                          {"internal/admin", "client", "internal/rereplication", "internal/metadata", "internal/ledger", "internal/topologyscript"},
	"internal/storage":               {},
	"internal/bookie":                {"internal/storage", "internal/wire", "internal/digest"},
	"internal/bookie/server":         {"internal/bookie", "internal/storage", "internal/wire", "internal/digest", "internal/metadata", "internal/pki", "internal/opstats"},
	"internal/rereplication":         {"client", "internal/ledger", "internal/ledgerexec", "internal/transport", "internal/metadata", "internal/wire", "internal/digest", "internal/topologyscript"},
	"internal/admin":                 {"internal/rereplication", "client", "internal/ledger", "internal/ledgerexec", "internal/transport", "internal/metadata", "internal/wire", "internal/digest"},
	"internal/autorecovery":          {"internal/rereplication", "client", "internal/ledger", "internal/transport", "internal/metadata", "internal/wire", "internal/digest"},
	"internal/standalone":            {"internal/bookie", "internal/autorecovery", "internal/admin", "internal/rereplication", "client", "internal/metadata", "internal/storage", "internal/wire", "internal/pki"},
	"internal/testcluster":           {"internal/standalone", "internal/bookie", "internal/admin", "internal/rereplication", "internal/ledger", "internal/metadata", "internal/storage", "client", "internal/wire", "internal/digest", "internal/pki"},
	"internal/sim":                   {"internal/ledger", "internal/ledgerexec", "internal/bookie", "internal/storage", "internal/metadata", "internal/wire", "internal/digest", "client", "internal/transport"},
	"internal/metadata/formatpb":     {},
	"internal/wire/v3/protocolpb":    {},
	"internal/metadata/metadatatest": {"internal/metadata"},
	"internal/clock":                 {},
	"internal/topologyscript":        {"internal/metadata"}, // bookie locations from an operator's script (networkTopologyScriptFileName)
	"internal/pki":                   {},                    // PEM files and a local CA: leaf, no Folio imports
	"internal/benchbase":             {},                    // imported by benchmarks only
	"internal/tlsconf":               {},                    // TLS from PEM files; tlstest: test certificates
	"internal/scenario":              {},                    // test-only: its tests import what they need
	"internal/opstats":               {},                    // BookKeeper's OpStatsLogger as a Prometheus collector: leaf
	"internal/freeport":              {},                    // test ports reserved across test processes: leaf
	"deploy":                         {},                    // test-only: its tests check deploy/'s files against the code

	// The load generator of `folio bench`: measures through the public
	// client only, as an application would.
	"internal/bench": {"client"},

	// Test helpers below a layer that need more than it.
	"internal/metadata/etcd/etcdtest": {"internal/metadata", "internal/pki"}, // a TLS etcd with a test CA
	"client/foliotest":                {"client", "internal/standalone"},     // the public in-process cluster for users' tests
}

// universal lists packages every package may import: leaf utilities with
// no Folio imports of their own (internal/clock holds the wall clock the
// process injects into pure packages, so it is not pure itself;
// internal/tlsconf builds TLS configurations from PEM files for every end
// of a connection; internal/freeport hands out free loopback ports to
// whatever must know a port before it listens).
var universal = []string{"internal/clock", "internal/tlsconf", "internal/freeport"}

// pure lists the packages (and everything below them) that must not touch
// the network, the OS or the wall clock: they run inside the simulator.
var pure = []string{"internal/ledger", "internal/bookie", "internal/storage", "internal/wire", "internal/digest"}

// impure are exceptions below a pure root: the bookie's network server.
var impure = []string{"internal/bookie/server"}

// memoryImporters are the only packages whose non-test files may import
// the memory metadata driver: it is test-only (docs/design/layout.md), and
// the simulator runs on its store.
var memoryImporters = []string{"internal/sim", "internal/metadata/memory"}

type pkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
}

// listed caches go list's answer: every rule walks the same packages.
var listed struct {
	once sync.Once
	pkgs []pkg
	err  error
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	listed.once.Do(func() { listed.pkgs, listed.err = goList() })
	if listed.err != nil {
		t.Fatal(listed.err)
	}
	return listed.pkgs
}

func goList() ([]pkg, error) {
	cmd := exec.Command("go", "list", "-json", module+"/...")
	cmd.Dir = "../.."
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go list: %v\n%s", err, errb.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(&out)
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 3 {
		return nil, fmt.Errorf("go list found only %d packages", len(pkgs))
	}
	return pkgs, nil
}

func rel(importPath string) string {
	if importPath == module {
		return "."
	}
	return strings.TrimPrefix(importPath, module+"/")
}

func under(path, root string) bool {
	return path == root || strings.HasPrefix(path, root+"/")
}

// ruleFor returns the longest rule covering path.
func ruleFor(path string) (string, bool) {
	best, found := "", false
	for r := range layers {
		if under(path, r) && len(r) >= len(best) {
			best, found = r, true
		}
	}
	return best, found
}

func TestLayering(t *testing.T) {
	for _, p := range listPackages(t) {
		path := rel(p.ImportPath)
		rule, ok := ruleFor(path)
		if !ok {
			t.Errorf("%s: no layering rule; add it to internal/lint (DESIGN.md §8)", path)
			continue
		}
		allowed := layers[rule]
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") && imp != module {
				continue
			}
			target := rel(imp)
			if under(target, "internal/cli") || under(target, "cmd") {
				if path != "cmd/folio" {
					t.Errorf("%s imports %s: nothing may import the command tree", path, target)
				}
				continue
			}
			if under(target, rule) || permits(allowed, target) || permits(universal, target) {
				continue
			}
			t.Errorf("%s imports %s, which its layer (%s) may not: allowed %v", path, target, rule, allowed)
		}
	}
}

// TestMemoryDriverTestOnly keeps the memory metadata driver out of the
// shipped code paths: only the simulator imports it outside tests (tests
// register memory:// with memory.Register), and the public client does not
// depend on it (cmd/folio's and client's tests check the schemes).
func TestMemoryDriverTestOnly(t *testing.T) {
	const mem = "internal/metadata/memory"
	for _, p := range listPackages(t) {
		path := rel(p.ImportPath)
		for _, imp := range p.Imports {
			if rel(imp) == mem && !permits(memoryImporters, path) {
				t.Errorf("%s imports %s: the memory driver is test-only; import it from _test.go files", path, mem)
			}
		}
	}
	cmd := exec.Command("go", "list", "-deps", "./client")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./client: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == module+"/"+mem {
			t.Errorf("client depends on %s", mem)
		}
	}
}

func permits(allowed []string, target string) bool {
	for _, a := range allowed {
		if a == "*" || under(target, a) {
			return true
		}
	}
	return false
}

func isPure(path string) bool {
	for _, x := range impure {
		if under(path, x) {
			return false
		}
	}
	for _, r := range pure {
		if under(path, r) {
			return true
		}
	}
	return false
}

// TestPurePackages keeps net, os and time.Now out of the protocol and
// storage cores (DESIGN.md §4, §5, §8). Storage reaches files through vfs;
// clocks are injected.
func TestPurePackages(t *testing.T) {
	for _, p := range listPackages(t) {
		path := rel(p.ImportPath)
		if !isPure(path) {
			continue
		}
		for _, imp := range p.Imports {
			if imp == "os" || imp == "net" || strings.HasPrefix(imp, "net/") || imp == "os/exec" || imp == "syscall" {
				t.Errorf("%s imports %s: pure packages do no network or OS I/O", path, imp)
			}
		}
		for _, f := range p.GoFiles {
			for _, pos := range wallClockCalls(t, filepath.Join(p.Dir, f)) {
				t.Errorf("%s: calls time.%s; take an injected clock", pos.where, pos.fn)
			}
		}
	}
}

type call struct{ where, fn string }

// wallClockCalls finds time.Now, time.Since, time.Until, time.Sleep,
// time.After, time.Tick and time.NewTimer/NewTicker/AfterFunc in a file.
func wallClockCalls(t *testing.T, file string) []call {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	timeName := ""
	for _, imp := range f.Imports {
		if imp.Path.Value == `"time"` {
			timeName = "time"
			if imp.Name != nil {
				timeName = imp.Name.Name
			}
		}
	}
	if timeName == "" {
		return nil
	}
	banned := map[string]bool{"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
		"Tick": true, "NewTimer": true, "NewTicker": true, "AfterFunc": true}
	var found []call
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && id.Name == timeName && banned[sel.Sel.Name] {
			found = append(found, call{fset.Position(sel.Pos()).String(), sel.Sel.Name})
		}
		return true
	})
	return found
}

// TestRulesNameRealLayers keeps the rule table honest: every allowed import
// names a rule of its own.
func TestRulesNameRealLayers(t *testing.T) {
	var names []string
	for r, allowed := range layers {
		for _, a := range allowed {
			if a == "*" {
				continue
			}
			if _, ok := layers[a]; !ok {
				t.Errorf("rule %s allows %s, which has no rule of its own", r, a)
			}
		}
		names = append(names, r)
	}
	sort.Strings(names)
	if len(names) == 0 {
		t.Fatal("no rules")
	}
}
