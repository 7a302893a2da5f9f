package lint

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// prometheusModule is the metrics library the public client must not
// depend on: programs that use another one (or none) should not carry it.
// Its adapter is client/clientprom.
const prometheusModule = "github.com/prometheus"

// TestClientWithoutPrometheus keeps Prometheus out of the client package:
// no non-test .go file directly in client/ imports it (whatever its build
// constraints), and nothing the client depends on does either.
func TestClientWithoutPrometheus(t *testing.T) {
	dir := filepath.Join("..", "..", "client")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, name), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				t.Fatalf("client/%s: import %s: %v", name, imp.Path.Value, err)
			}
			if path == prometheusModule || strings.HasPrefix(path, prometheusModule+"/") {
				t.Errorf("client/%s imports %s: the client records through its Metrics interface; Prometheus belongs in client/clientprom", name, path)
			}
		}
	}
	if checked == 0 {
		t.Fatalf("no .go files found in %s", dir)
	}

	cmd := exec.Command("go", "list", "-deps", "./client")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./client: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == prometheusModule || strings.HasPrefix(dep, prometheusModule+"/") {
			t.Errorf("client depends on %s", dep)
		}
	}
}
