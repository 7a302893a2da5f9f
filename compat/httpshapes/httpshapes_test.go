package httpshapes

import (
	"testing"

	"github.com/foliodb/folio/compat/harness"
)

func TestHTTPShapes(t *testing.T) { harness.HTTPShapes(t) }
