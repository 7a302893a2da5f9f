package placement

import (
	"slices"

	"github.com/foliodb/folio/internal/metadata"
)

// AckChecker is implemented by the policies that judge whether the bookies
// that acknowledged an add span enough fault domains (BookKeeper's
// EnsemblePlacementPolicy.areAckedBookiesAdheringToPlacementPolicy, used
// when the client sets enforceMinNumFaultDomainsForWrite).
//
// AckedAdhering reads only the policy's configuration, never its random
// source, and does not keep acked: it is pure and safe for concurrent use.
// It is monotone: adding bookies to acked never turns true into false, so
// an add that cannot adhere with every live member of its write set acked
// never will.
type AckChecker interface {
	AckedAdhering(acked []metadata.BookieID, writeQuorum, ackQuorum int) bool
}

var (
	_ AckChecker = (*Random)(nil)
	_ AckChecker = (*RackAware)(nil)
	_ AckChecker = (*RegionAware)(nil)
	_ AckChecker = (*ZoneAware)(nil)
	_ AckChecker = (*Avoiding)(nil)
)

// AckedAdherence returns the fault-domain rule of policy p bound to a
// ledger of write quorum wq and ack quorum aq, as the predicate
// ledger.WriterConfig.AckedAdhering takes; nil (no rule) when p has no
// fault domains to check (BookKeeper's default method returns true).
func AckedAdherence(p Policy, wq, aq int) func(acked []metadata.BookieID) bool {
	c, ok := p.(AckChecker)
	if !ok {
		return nil
	}
	if _, random := p.(*Random); random {
		return nil
	}
	if a, ok := p.(*Avoiding); ok {
		return AckedAdherence(a.Policy, wq, aq)
	}
	return func(acked []metadata.BookieID) bool { return c.AckedAdhering(acked, wq, aq) }
}

// AckedAdhering implements AckChecker: Random has no fault domains, so any
// acknowledgement adheres (BookKeeper's DefaultEnsemblePlacementPolicy
// inherits the interface's default, true).
func (r *Random) AckedAdhering(acked []metadata.BookieID, writeQuorum, ackQuorum int) bool {
	return true
}

// AckedAdhering implements AckChecker as BookKeeper's
// RackawareEnsemblePlacementPolicyImpl: the acknowledging bookies span at
// least min(Qw, MinRacksPerWriteQuorum) distinct network locations. A
// bookie without a configured location counts as DefaultRack (Java
// resolves every registered bookie, to the default rack when it has no
// location; it skips a bookie it does not know at all, which cannot happen
// here since acks only come from ensemble members).
func (p *RackAware) AckedAdhering(acked []metadata.BookieID, writeQuorum, ackQuorum int) bool {
	return distinctCount(acked, p.Rack) >= p.minRacks(writeQuorum)
}

// AckedAdhering implements AckChecker: BookKeeper's region-aware policy
// inherits the rack-aware rule, counting distinct "/region/rack"
// locations against min(Qw, MinRacksPerWriteQuorum).
func (p *RegionAware) AckedAdhering(acked []metadata.BookieID, writeQuorum, ackQuorum int) bool {
	return distinctCount(acked, p.Location) >= min(writeQuorum, orDefault(p.MinRacksPerWriteQuorum, DefaultMinRacksPerWriteQuorum))
}

// AckedAdhering implements AckChecker as BookKeeper's
// ZoneawareEnsemblePlacementPolicyImpl: at least Qa bookies, spanning at
// least min(Qw, MinZones) zones (bookies without a valid location are in
// the default zone).
func (p *ZoneAware) AckedAdhering(acked []metadata.BookieID, writeQuorum, ackQuorum int) bool {
	return len(acked) >= ackQuorum && distinctCount(acked, p.zone) >= min(writeQuorum, p.MinZones)
}

// AckedAdhering implements AckChecker with the wrapped policy's rule.
func (a *Avoiding) AckedAdhering(acked []metadata.BookieID, writeQuorum, ackQuorum int) bool {
	if c, ok := a.Policy.(AckChecker); ok {
		return c.AckedAdhering(acked, writeQuorum, ackQuorum)
	}
	return true
}

// distinctCount is the number of distinct domain(b) over bookies.
func distinctCount(bookies []metadata.BookieID, domain func(metadata.BookieID) string) int {
	seen := make([]string, 0, len(bookies))
	for _, b := range bookies {
		if d := domain(b); !slices.Contains(seen, d) {
			seen = append(seen, d)
		}
	}
	return len(seen)
}
