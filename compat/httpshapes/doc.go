// Package httpshapes holds TestHTTPShapes: Folio's admin HTTP routes and
// metrics compared with a Java bookie's (harness.HTTPShapes).
package httpshapes
