package zookeeper

import (
	"testing"

	"github.com/foliodb/folio/compat/harness"
)

func TestZooKeeperInterop(t *testing.T) { harness.ZooKeeperInterop(t) }
