package admin

import (
	"testing"

	iadmin "github.com/foliodb/folio/internal/admin"
)

// TestValuesMatchImplementation: the public constants are literals (so go
// doc shows their values, not an internal name) and must stay equal to the
// implementation's, which the results are converted from.
func TestValuesMatchImplementation(t *testing.T) {
	for _, tc := range []struct{ public, internal string }{
		{string(BookieWritable), iadmin.StateWritable},
		{string(BookieReadOnly), iadmin.StateReadOnly},
		{string(RecoveryClosed), iadmin.OutcomeClosed},
		{string(RecoveryEnd), iadmin.OutcomeEnd},
		{string(RecoveryUndecided), iadmin.OutcomeUndecided},
	} {
		if tc.public != tc.internal {
			t.Errorf("public value %q differs from the implementation's %q", tc.public, tc.internal)
		}
	}
}
