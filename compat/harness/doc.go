// Package harness runs Apache BookKeeper 4.17's own Java code (built from
// ../java with Maven) against Folio: the Java programs, `folio standalone`,
// Java bookies, and the interop scenarios. The test packages (compat and
// compat/javabookies) call its entry points; it is split from them so that
// each test package stays within the per-package time budget.
package harness
