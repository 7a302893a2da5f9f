package compat

import (
	"testing"

	"github.com/foliodb/folio/compat/harness"
)

func TestJavaBookieClientSmoke(t *testing.T) { harness.JavaBookieClientSmoke(t) }

func TestJavaClientInterop(t *testing.T) { harness.JavaClientInterop(t) }

func TestMixedEnsemble(t *testing.T) { harness.MixedEnsemble(t) }
