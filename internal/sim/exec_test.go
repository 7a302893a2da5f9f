package sim

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"strings"
	"testing"
)

// TestNoRequestsOfItsOwn: the simulator builds no wire request of its own;
// every request its clients send is built by the production executor
// (internal/ledgerexec), so the simulator checks the code that production
// runs between the machines and the sockets.
func TestNoRequestsOfItsOwn(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range pkgs["sim"].Files {
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			sel, ok := lit.Type.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "wire" && strings.HasSuffix(sel.Sel.Name, "Request") {
				t.Errorf("%s: a wire.%s literal: requests are the executor's to build", fset.Position(lit.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
}
