// Package compat is Folio's interop harness (DESIGN.md §7, layer 5): tests
// that run Apache BookKeeper 4.17's own Java code, from Maven Central, against
// Folio. It is a module of its own because it needs Java and Maven; see
// README.md.
package compat
