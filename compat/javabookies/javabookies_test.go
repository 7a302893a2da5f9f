package javabookies

import (
	"testing"

	"github.com/foliodb/folio/compat/harness"
)

func TestJavaBookieEnsemble(t *testing.T) { harness.JavaBookieEnsemble(t) }
