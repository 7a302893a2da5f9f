package standalone

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// goroutine this package starts must end when its owner is closed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
