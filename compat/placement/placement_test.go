package placement

import (
	"testing"

	"github.com/foliodb/folio/compat/harness"
)

func TestPlacementVerdicts(t *testing.T) { harness.PlacementVerdicts(t) }
