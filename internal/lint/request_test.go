package lint

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"testing"
)

// requestBuilders are the packages whose non-test files may build the
// wire requests a client sends about a ledger's entries (ADD_ENTRY,
// READ_ENTRY, READ_LAC): the executor's request constructors, and the
// codecs, which decode requests off the wire. Everyone else — the client,
// re-replication, admin, the simulator — calls ledgerexec.AddRequest,
// ReadRequest, FenceReadRequest, ReadLACRequest (issue 20 item 1). The
// bookie and its server only answer such requests; internal/transport
// builds only START_TLS.
var requestBuilders = []string{"internal/ledgerexec", "internal/wire"}

const wirePath = module + "/internal/wire"

// entryOps, entryBodies and entryFields are what marks a wire.Request as an
// ADD, READ or READ_LAC request: its Header.Op, its Has, or its body field.
var (
	entryOps    = map[string]bool{"OpAddEntry": true, "OpReadEntry": true, "OpReadLAC": true}
	entryBodies = map[string]bool{"BodyAdd": true, "BodyRead": true, "BodyReadLAC": true}
	entryFields = map[string]bool{"Add": true, "Read": true, "ReadLACLedgerID": true}
)

// TestOneRequestBuilder keeps the ADD/READ/READ_LAC requests built in one
// place: no non-test file outside requestBuilders writes a wire.Request
// literal for one of them, or sets a request's Header.Op to one.
func TestOneRequestBuilder(t *testing.T) {
	builders := 0
	for _, p := range listPackages(t) {
		path := rel(p.ImportPath)
		for _, f := range p.GoFiles {
			found := entryRequestLiterals(t, filepath.Join(p.Dir, f))
			if permits(requestBuilders, path) {
				if path == "internal/ledgerexec" {
					builders += len(found)
				}
				continue
			}
			for _, c := range found {
				t.Errorf("%s: %s; build it with ledgerexec's request constructors (AddRequest, ReadRequest, FenceReadRequest, ReadLACRequest)", c.where, c.fn)
			}
		}
	}
	if builders == 0 {
		t.Fatal("found no entry request literal in internal/ledgerexec: the check is broken")
	}
}

// entryRequestLiterals finds, in one file, the wire.Request composite
// literals that build an ADD, READ or READ_LAC request (by Header.Op, Has
// or the body field they set) and the assignments of one of those ops to
// a field named Op. Inside package wire itself the names are unqualified.
func entryRequestLiterals(t *testing.T, file string) []call {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	wireName := ""
	if f.Name.Name == "wire" {
		wireName = "." // unqualified: the package's own names
	}
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == wirePath {
			wireName = "wire"
			if imp.Name != nil {
				wireName = imp.Name.Name
			}
		}
	}
	if wireName == "" {
		return nil
	}
	// wireIdent returns the name x refers to in package wire, or "".
	wireIdent := func(x ast.Expr) string {
		switch x := x.(type) {
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.Ident); ok && id.Name == wireName {
				return x.Sel.Name
			}
		case *ast.Ident:
			if wireName == "." {
				return x.Name
			}
		}
		return ""
	}
	var found []call
	report := func(n ast.Node, format string, args ...any) {
		found = append(found, call{fset.Position(n.Pos()).String(), fmt.Sprintf(format, args...)})
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CompositeLit:
			if wireIdent(n.Type) != "Request" {
				return true
			}
			for _, el := range n.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				key, _ := kv.Key.(*ast.Ident)
				if key == nil {
					continue
				}
				switch {
				case key.Name == "Header":
					if op := headerOp(kv.Value, wireIdent); entryOps[op] {
						report(n, "wire.Request literal with Op %s", op)
						return true
					}
				case key.Name == "Has" && entryBodies[wireIdent(kv.Value)]:
					report(n, "wire.Request literal with Has %s", wireIdent(kv.Value))
					return true
				case entryFields[key.Name]:
					report(n, "wire.Request literal setting %s", key.Name)
					return true
				}
			}
		case *ast.AssignStmt:
			for i, lhs := range n.Lhs {
				sel, ok := lhs.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "Op" || i >= len(n.Rhs) {
					continue
				}
				if op := wireIdent(n.Rhs[i]); entryOps[op] {
					report(n, "assigns %s to a request's Op", op)
				}
			}
		}
		return true
	})
	return found
}

// headerOp returns the wire constant a wire.Header literal's Op names.
func headerOp(x ast.Expr, wireIdent func(ast.Expr) string) string {
	lit, ok := x.(*ast.CompositeLit)
	if !ok || wireIdent(lit.Type) != "Header" {
		return ""
	}
	for _, el := range lit.Elts {
		if kv, ok := el.(*ast.KeyValueExpr); ok {
			if key, ok := kv.Key.(*ast.Ident); ok && key.Name == "Op" {
				return wireIdent(kv.Value)
			}
		}
	}
	return ""
}

// The check must be able to fail: each way of building an entry request by
// hand is reported, and the requests and responses others build are not.
func TestRequestLiteralsFound(t *testing.T) {
	file := writeSource(t, `package p

import w "github.com/foliodb/folio/internal/wire"

func f(id int64, body []byte) {
	_ = &w.Request{Header: w.Header{Op: w.OpAddEntry}, Has: w.BodyAdd,
		Add: w.AddRequest{LedgerID: id, Body: body}}
	_ = w.Request{Header: w.Header{Op: w.OpReadEntry}}
	_ = w.Request{Has: w.BodyReadLAC}
	_ = w.Request{ReadLACLedgerID: id}
	var r w.Request
	r.Header.Op = w.OpReadLAC
	_ = w.Request{Header: w.Header{Op: w.OpGetBookieInfo}, Has: w.BodyGetBookieInfo}
	_ = w.Response{Header: w.Header{Op: w.OpAddEntry}}
	_ = w.Header{Op: w.OpStartTLS}
	if r.Header.Op == w.OpAddEntry {
		r.Header.Op = w.OpForceLedger
	}
}
`)
	var got []string
	for _, c := range entryRequestLiterals(t, file) {
		got = append(got, c.fn)
	}
	want := "[wire.Request literal with Op OpAddEntry wire.Request literal with Op OpReadEntry " +
		"wire.Request literal with Has BodyReadLAC wire.Request literal setting ReadLACLedgerID assigns OpReadLAC to a request's Op]"
	if fmt.Sprint(got) != want {
		t.Fatalf("found %v\nwant %s", got, want)
	}

	// Inside package wire the names are unqualified.
	own := writeSource(t, `package wire

func g() Request { return Request{Header: Header{Op: OpReadEntry}} }
`)
	if got := entryRequestLiterals(t, own); len(got) != 1 {
		t.Fatalf("package wire: found %v, want the one READ literal", got)
	}
}
