module github.com/foliodb/folio/compat

go 1.26

// The interop harness tests the Folio of this checkout. The smoke test builds
// the folio binary from the parent module's directory and needs no imports;
// later interop tests that use the public client package resolve it here.
replace github.com/foliodb/folio => ../
