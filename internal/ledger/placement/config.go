package placement

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/foliodb/folio/internal/metadata"
)

// Kind names a placement policy.
type Kind int

// Placement policies, as BookKeeper's ensemblePlacementPolicy classes.
const (
	// KindDefault is RackAware when locations are configured, else Random
	// (Folio's behaviour before policies could be named).
	KindDefault Kind = iota
	KindRandom
	KindRackAware
	KindRegionAware
	KindZoneAware
)

func (k Kind) String() string {
	switch k {
	case KindDefault:
		return "default"
	case KindRandom:
		return "random"
	case KindRackAware:
		return "rackaware"
	case KindRegionAware:
		return "regionaware"
	case KindZoneAware:
		return "zoneaware"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// ParseKind reads a policy name: "", "random", "rackaware",
// "regionaware", "zoneaware" (any case), or BookKeeper's class names
// (org.apache.bookkeeper.client.DefaultEnsemblePlacementPolicy →
// random, RackawareEnsemblePlacementPolicy, RegionAwareEnsemblePlacementPolicy,
// ZoneawareEnsemblePlacementPolicy, with or without the package).
func ParseKind(name string) (Kind, error) {
	n := strings.ToLower(strings.TrimPrefix(strings.TrimSpace(name), "org.apache.bookkeeper.client."))
	switch n {
	case "":
		return KindDefault, nil
	case "random", "defaultensembleplacementpolicy":
		return KindRandom, nil
	case "rackaware", "rackawareensembleplacementpolicy":
		return KindRackAware, nil
	case "regionaware", "regionawareensembleplacementpolicy":
		return KindRegionAware, nil
	case "zoneaware", "zoneawareensembleplacementpolicy":
		return KindZoneAware, nil
	}
	return 0, fmt.Errorf("placement: unknown policy %q (want random, rackaware, regionaware, zoneaware or a BookKeeper ensemblePlacementPolicy class name)", name)
}

// Config is a client's placement configuration; ForLedger builds the
// policy of one ledger from it.
type Config struct {
	Kind Kind
	// Locations maps bookies to network locations; nil: none configured.
	Locations map[metadata.BookieID]string

	// Rack-aware (and the racks of region-aware).
	MinRacksPerWriteQuorum int // ≤ 0: DefaultMinRacksPerWriteQuorum
	EnforceMinNumRacks     bool

	// Zone-aware.
	MinZonesPerWriteQuorum     int // ≤ 0: DefaultMinZonesPerWriteQuorum
	DesiredZonesPerWriteQuorum int // ≤ 0: DefaultDesiredZonesPerWriteQuorum
	EnforceStrictZoneaware     bool

	// Region-aware.
	RegionsToWrite             []string
	MinRegionsForDurability    int // ≤ 0: DefaultMinRegionsForDurability
	EnforceDurabilityInReplace bool
	EnableValidation           bool

	// Avoid reports bookies (quarantined ones) that placements leave out
	// unless no placement exists without them; nil: none.
	Avoid func(metadata.BookieID) bool
}

// Validate reports settings no ledger could use.
func (c *Config) Validate() error {
	minZ, desZ := orDefault(c.MinZonesPerWriteQuorum, DefaultMinZonesPerWriteQuorum), orDefault(c.DesiredZonesPerWriteQuorum, DefaultDesiredZonesPerWriteQuorum)
	if minZ > desZ {
		return fmt.Errorf("placement: minNumZonesPerWriteQuorum %d cannot exceed desiredNumZonesPerWriteQuorum %d", minZ, desZ)
	}
	if m := orDefault(c.MinRegionsForDurability, DefaultMinRegionsForDurability); len(c.RegionsToWrite) > 0 && len(c.RegionsToWrite) < m {
		return fmt.Errorf("placement: %d regions to write are too few for reppMinimumRegionsForDurability %d", len(c.RegionsToWrite), m)
	}
	for _, r := range c.RegionsToWrite {
		if r == "" || strings.Contains(r, "/") {
			return fmt.Errorf("placement: region to write %q: want a region name without \"/\"", r)
		}
	}
	return nil
}

func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// ForLedger returns the policy of a ledger with write quorum wq and ack
// quorum aq, drawing from src. It is not safe for concurrent use.
func (c *Config) ForLedger(src rand.Source, wq, aq int) Policy {
	var p Policy
	switch c.Kind {
	case KindRandom:
		p = NewRandom(src)
	case KindRackAware:
		r := NewRackAware(src, c.Locations, c.EnforceMinNumRacks)
		r.MinRacksPerWriteQuorum, r.WriteQuorum = c.MinRacksPerWriteQuorum, wq
		p = r
	case KindRegionAware:
		r := NewRegionAware(src, c.Locations, wq, aq, c.RegionsToWrite)
		r.MinRegionsForDurability = orDefault(c.MinRegionsForDurability, DefaultMinRegionsForDurability)
		r.EnforceDurabilityInReplace, r.EnableValidation = c.EnforceDurabilityInReplace, c.EnableValidation
		r.MinRacksPerWriteQuorum = c.MinRacksPerWriteQuorum
		p = r
	case KindZoneAware:
		p = NewZoneAware(src, c.Locations, wq, aq, c.MinZonesPerWriteQuorum, c.DesiredZonesPerWriteQuorum, c.EnforceStrictZoneaware)
	default:
		if c.Locations != nil {
			r := NewRackAware(src, c.Locations, c.EnforceMinNumRacks)
			r.MinRacksPerWriteQuorum, r.WriteQuorum = c.MinRacksPerWriteQuorum, wq
			p = r
		} else {
			p = NewRandom(src)
		}
	}
	if c.Avoid != nil {
		p = &Avoiding{Policy: p, Avoid: c.Avoid}
	}
	return p
}

// Avoiding leaves the bookies Avoid reports out of new ensembles and
// replacements, and uses them only when the policy finds no placement
// without them (BookKeeper's quarantined bookies: BookieWatcherImpl retries
// newEnsemble and replaceBookie with them when the first attempt fails with
// BKNotEnoughBookiesException).
type Avoiding struct {
	Policy
	Avoid func(metadata.BookieID) bool
}

// NewEnsemble implements Policy.
func (a *Avoiding) NewEnsemble(size int, writable []metadata.BookieID) ([]metadata.BookieID, error) {
	healthy := slices.DeleteFunc(slices.Clone(writable), a.Avoid)
	if len(healthy) < len(writable) {
		ens, err := a.Policy.NewEnsemble(size, healthy)
		if err == nil || !errors.Is(err, ErrNotEnoughBookies) {
			return ens, err
		}
	}
	return a.Policy.NewEnsemble(size, writable)
}

// ReplaceBookie implements Policy.
func (a *Avoiding) ReplaceBookie(ensemble []metadata.BookieID, idx int, writable, exclude []metadata.BookieID) (metadata.BookieID, error) {
	healthy := slices.DeleteFunc(slices.Clone(writable), a.Avoid)
	if len(healthy) < len(writable) {
		b, err := a.Policy.ReplaceBookie(ensemble, idx, healthy, exclude)
		if err == nil || !errors.Is(err, ErrNotEnoughBookies) {
			return b, err
		}
	}
	return a.Policy.ReplaceBookie(ensemble, idx, writable, exclude)
}
