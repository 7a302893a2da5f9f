package zkmigration

import (
	"testing"

	"github.com/foliodb/folio/compat/harness"
)

func TestMigrateFromJavaBookies(t *testing.T) { harness.ZooKeeperMigration(t) }
