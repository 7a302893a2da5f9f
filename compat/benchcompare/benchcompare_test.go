//go:build benchcompare

package benchcompare

import (
	"testing"

	"github.com/foliodb/folio/compat/harness"
)

func TestBenchCompare(t *testing.T) { harness.BenchCompare(t) }
