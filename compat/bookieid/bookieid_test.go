package bookieid

import (
	"testing"

	"github.com/foliodb/folio/compat/harness"
)

func TestCustomBookieIDs(t *testing.T) { harness.CustomBookieIDs(t) }
