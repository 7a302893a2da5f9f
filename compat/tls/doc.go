// Package tls runs the TLS interop tests (compat/harness, tls.go): Apache
// BookKeeper 4.17's Java client and bookies and Folio's, all with TLS,
// client certificates and BookieAuthZFactory, configured with BookKeeper's
// own keys and PEM files. It is a package of its own so that each compat
// package stays within the per-package time budget.
package tls
