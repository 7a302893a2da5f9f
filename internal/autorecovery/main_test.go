package autorecovery

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// goroutine this package starts must end when its owner is closed.
// Exception: an idle HTTP/1 keep-alive connection between members of a multi-member embedded etcd (its peer round tripper
// keeps one after a member stops and restarts; etcd's, not ours) — the
// client's read and write loops and the server's read of that connection.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*connReader).backgroundRead"),
		goleak.IgnoreAnyFunction("net/http.(*connReader).abortPendingRead"),
	)
}
