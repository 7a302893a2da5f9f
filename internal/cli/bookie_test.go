package cli

import (
	"testing"
	"time"

	"github.com/foliodb/folio/internal/bookie/server"
)

// The bookie's AutoRecovery keys reach the auditor and the workers with
// BookKeeper's meaning: 0 switches a periodic check off (AuditorConfig
// says < 0), replicationRateByBytes -1 is unlimited (0), the sessions last
// zkTimeout.
func TestAutoRecoveryKnobs(t *testing.T) {
	cfg, err := server.LoadConfig("", server.Overrides{Set: []string{"zkTimeout=3000"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, w := autoRecoveryKnobs(cfg)
	if a.SessionTTL != 3*time.Second || w.SessionTTL != 3*time.Second {
		t.Errorf("session TTLs %v %v, want zkTimeout", a.SessionTTL, w.SessionTTL)
	}
	if a.BookieCheckInterval != 86400*time.Second || a.LedgerCheckInterval != 604800*time.Second || a.PlacementPolicyCheckInterval >= 0 {
		t.Errorf("defaults: bookie check %v, ledger check %v, placement check %v (want off)", a.BookieCheckInterval, a.LedgerCheckInterval, a.PlacementPolicyCheckInterval)
	}
	if w.RateLimitBytesPerSecond != 0 || w.OpenLedgerRereplicationGracePeriod != 30*time.Second || w.FailureBackoff != 5*time.Second || w.PollInterval != time.Second {
		t.Errorf("worker defaults: %+v", w)
	}

	cfg, err = server.LoadConfig("", server.Overrides{Set: []string{
		"auditorPeriodicBookieCheckInterval=0", "auditorPeriodicCheckInterval=0", "auditorPeriodicPlacementPolicyCheckInterval=60",
		"auditorLedgerVerificationPercentage=50", "lostBookieRecoveryDelay=30", "replicationRateByBytes=1000",
		"openLedgerRereplicationGracePeriod=1500", "rwRereplicateBackoffMs=250", "autoRecoveryPollInterval=100",
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, w = autoRecoveryKnobs(cfg)
	if a.BookieCheckInterval >= 0 || a.LedgerCheckInterval >= 0 || a.PlacementPolicyCheckInterval != time.Minute ||
		a.LedgerVerificationPercentage != 50 || a.LostBookieRecoveryDelay != 30*time.Second {
		t.Errorf("auditor: %+v", a)
	}
	if w.RateLimitBytesPerSecond != 1000 || w.LedgerVerificationPercentage != 50 || w.OpenLedgerRereplicationGracePeriod != 1500*time.Millisecond ||
		w.FailureBackoff != 250*time.Millisecond || w.PollInterval != 100*time.Millisecond {
		t.Errorf("worker: %+v", w)
	}
}
