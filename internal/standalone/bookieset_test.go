package standalone

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestBookieSetKeys: --bookie-set keys are checked as a bookie's
// configuration file is: a refused key stops the start naming it, a typo
// is a warning naming the nearest key, an implemented key applies.
func TestBookieSetKeys(t *testing.T) {
	var logs bytes.Buffer
	cfg := Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		BookieSet: []string{"gcWaitTime=1000", "flushIntervall=5"}}
	bc, err := bookieConfig(&cfg, 0, 3181, "etcd://127.0.0.1:2379/ledgers", security{})
	if err != nil {
		t.Fatal(err)
	}
	if bc.GCWaitTime.Milliseconds() != 1000 || !strings.Contains(logs.String(), "did you mean flushInterval?") {
		t.Errorf("gcWaitTime %v; logs:\n%s", bc.GCWaitTime, logs.String())
	}
	cfg.BookieSet = []string{"localScrubInterval=60"}
	if _, err := bookieConfig(&cfg, 0, 3181, "etcd://127.0.0.1:2379/ledgers", security{}); err == nil ||
		!strings.Contains(err.Error(), "--bookie-set: localScrubInterval=60") {
		t.Errorf("refused key: %v", err)
	}
}
