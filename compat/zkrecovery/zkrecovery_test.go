package zkrecovery

import (
	"testing"

	"github.com/foliodb/folio/compat/harness"
)

func TestZooKeeperAutoRecovery(t *testing.T) { harness.ZooKeeperAutoRecovery(t) }
