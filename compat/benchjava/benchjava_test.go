//go:build benchjava

package benchjava

import (
	"testing"

	"github.com/foliodb/folio/compat/harness"
)

func TestBenchJava(t *testing.T) { harness.BenchJava(t) }
