// Package javabookies runs the interop scenarios on a cluster of Apache
// BookKeeper bookies only (compat/harness.JavaBookieEnsemble); it is a
// package of its own so that each compat package stays within the
// per-package time budget.
package javabookies
