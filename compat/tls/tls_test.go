package tls

import (
	"testing"

	"github.com/foliodb/folio/compat/harness"
)

func TestTLSJavaClientOnFolioBookies(t *testing.T) { harness.TLSJavaClientOnFolioBookies(t) }

func TestTLSMixedEnsemble(t *testing.T) { harness.TLSMixedEnsemble(t) }
