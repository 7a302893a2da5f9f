package metadata

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// LedgerState is a ledger's state, numbered as LedgerMetadataFormat.State.
// States only move forward: OPEN → IN_RECOVERY → CLOSED (a writer may also
// close straight from OPEN, or over IN_RECOVERY: spec/metadata.md §1.6).
type LedgerState int32

const (
	LedgerOpen       LedgerState = 1
	LedgerInRecovery LedgerState = 2
	LedgerClosed     LedgerState = 3
)

func (s LedgerState) String() string {
	switch s {
	case LedgerOpen:
		return "OPEN"
	case LedgerInRecovery:
		return "IN_RECOVERY"
	case LedgerClosed:
		return "CLOSED"
	}
	return fmt.Sprintf("LedgerState(%d)", int32(s))
}

// DigestType is the entry digest of a ledger, numbered as
// LedgerMetadataFormat.DigestType (and as the digest package's types).
type DigestType int32

const (
	DigestCRC32  DigestType = 1
	DigestHMAC   DigestType = 2 // Java's API calls it MAC
	DigestCRC32C DigestType = 3
	DigestDummy  DigestType = 4
)

func (d DigestType) String() string {
	switch d {
	case DigestCRC32:
		return "CRC32"
	case DigestHMAC:
		return "HMAC"
	case DigestCRC32C:
		return "CRC32C"
	case DigestDummy:
		return "DUMMY"
	}
	return fmt.Sprintf("DigestType(%d)", int32(d))
}

// Segment is one ensemble of a ledger: the bookies that store entries from
// FirstEntryID up to the next segment's FirstEntryID (exclusive).
// Ensemble[i] is the bookie at bookie index i.
type Segment struct {
	FirstEntryID int64
	Ensemble     []BookieID
}

// LedgerMetadata is a ledger's metadata, the value stored under its key.
//
// Invariants (Validate): EnsembleSize ≥ WriteQuorum ≥ AckQuorum ≥ 1; at least
// one segment, the first at entry 0, strictly ascending FirstEntryID, each
// with EnsembleSize valid bookie ids; custom metadata keys are unique.
type LedgerMetadata struct {
	// FormatVersion is the serialization format the value was read in (1, 2
	// or 3), 0 for metadata built in memory. Folio always writes format 3.
	FormatVersion int

	EnsembleSize int
	WriteQuorum  int // quorumSize in the format
	AckQuorum    int

	State LedgerState
	// LastEntryID and Length are the close values: the last entry and the
	// total payload bytes (digests excluded). Meaningful only when CLOSED;
	// -1 and 0 otherwise. A closed empty ledger has LastEntryID -1.
	LastEntryID int64
	Length      int64

	// Ensembles are the segments in ascending FirstEntryID order; the last
	// one is the current ensemble.
	Ensembles []Segment

	// HasPassword reports whether the stored value has a password, and so a
	// digest type. Java (and Folio) always write both; only format 1 or a
	// foreign writer lacks them, and then any password opens the ledger.
	HasPassword bool
	DigestType  DigestType // 0 only when !HasPassword
	Password    []byte     // the raw ledger password (not hashed)

	// CustomMetadata is the application's map given at create, copied on
	// every rewrite. Written sorted by key.
	CustomMetadata map[string][]byte

	// Ctime is the creation time in milliseconds since the epoch, stored
	// only if StoreCtime (Java's storeSystemTimeAsLedgerCreationTime); -1
	// when absent.
	Ctime      int64
	StoreCtime bool

	// CToken is the creator token (ZooKeeper create idempotence); 0 on etcd.
	CToken int64
}

// Clone returns a deep copy.
func (m *LedgerMetadata) Clone() *LedgerMetadata {
	c := *m
	c.Ensembles = make([]Segment, len(m.Ensembles))
	for i, s := range m.Ensembles {
		c.Ensembles[i] = Segment{FirstEntryID: s.FirstEntryID, Ensemble: slices.Clone(s.Ensemble)}
	}
	c.Password = bytes.Clone(m.Password)
	if m.CustomMetadata != nil {
		c.CustomMetadata = make(map[string][]byte, len(m.CustomMetadata))
		for k, v := range m.CustomMetadata {
			c.CustomMetadata[k] = bytes.Clone(v)
		}
	}
	return &c
}

// Equal reports whether m and o say the same thing, as a round trip through
// the store preserves it: FormatVersion is ignored (it records where a value
// came from), close values only count when CLOSED, Ctime only when stored,
// and digest and password only when present.
func (m *LedgerMetadata) Equal(o *LedgerMetadata) bool {
	if m.EnsembleSize != o.EnsembleSize || m.WriteQuorum != o.WriteQuorum || m.AckQuorum != o.AckQuorum ||
		m.State != o.State || m.HasPassword != o.HasPassword || m.StoreCtime != o.StoreCtime || m.CToken != o.CToken ||
		len(m.Ensembles) != len(o.Ensembles) || !maps.EqualFunc(m.CustomMetadata, o.CustomMetadata, bytes.Equal) {
		return false
	}
	if m.State == LedgerClosed && (m.LastEntryID != o.LastEntryID || m.Length != o.Length) {
		return false
	}
	if m.StoreCtime && m.Ctime != o.Ctime {
		return false
	}
	if m.HasPassword && (m.DigestType != o.DigestType || !bytes.Equal(m.Password, o.Password)) {
		return false
	}
	for i := range m.Ensembles {
		if m.Ensembles[i].FirstEntryID != o.Ensembles[i].FirstEntryID || !slices.Equal(m.Ensembles[i].Ensemble, o.Ensembles[i].Ensemble) {
			return false
		}
	}
	return true
}

// IsClosed reports whether the ledger is CLOSED.
func (m *LedgerMetadata) IsClosed() bool { return m.State == LedgerClosed }

// SegmentIndex returns the index in Ensembles of the segment that holds
// entryID: the last segment whose FirstEntryID ≤ entryID. entryID < 0 gives
// segment 0.
func (m *LedgerMetadata) SegmentIndex(entryID int64) int {
	i := sort.Search(len(m.Ensembles), func(i int) bool { return m.Ensembles[i].FirstEntryID > entryID })
	return max(i-1, 0)
}

// EnsembleAt returns the ensemble that stores entryID. The slice is shared
// with m: do not modify it.
func (m *LedgerMetadata) EnsembleAt(entryID int64) []BookieID {
	return m.Ensembles[m.SegmentIndex(entryID)].Ensemble
}

// LastEnsemble returns the current (last) segment, shared with m.
func (m *LedgerMetadata) LastEnsemble() Segment { return m.Ensembles[len(m.Ensembles)-1] }

// Validate checks the invariants Java checks when it builds or parses
// metadata (spec/metadata.md §1.5), plus Qa ≥ 1 and a valid digest type
// when a password is present. The error says what is wrong.
func (m *LedgerMetadata) Validate() error {
	switch {
	case m.AckQuorum < 1:
		return fmt.Errorf("ack quorum %d < 1", m.AckQuorum)
	case m.WriteQuorum < m.AckQuorum:
		return fmt.Errorf("write quorum %d < ack quorum %d", m.WriteQuorum, m.AckQuorum)
	case m.EnsembleSize < m.WriteQuorum:
		return fmt.Errorf("ensemble size %d < write quorum %d", m.EnsembleSize, m.WriteQuorum)
	}
	switch m.State {
	case LedgerOpen, LedgerInRecovery, LedgerClosed:
	default:
		return fmt.Errorf("unknown state %d", int32(m.State))
	}
	if len(m.Ensembles) == 0 {
		return errors.New("no ensembles")
	}
	for i, s := range m.Ensembles {
		if i == 0 && s.FirstEntryID != 0 {
			return fmt.Errorf("first ensemble starts at entry %d, not 0", s.FirstEntryID)
		}
		if i > 0 && s.FirstEntryID <= m.Ensembles[i-1].FirstEntryID {
			return fmt.Errorf("ensembles not in ascending order: entry %d after %d", s.FirstEntryID, m.Ensembles[i-1].FirstEntryID)
		}
		if len(s.Ensemble) != m.EnsembleSize {
			return fmt.Errorf("ensemble at entry %d has %d bookies, ensemble size is %d", s.FirstEntryID, len(s.Ensemble), m.EnsembleSize)
		}
		for _, b := range s.Ensemble {
			if err := ValidateBookieID(b); err != nil {
				return fmt.Errorf("ensemble at entry %d: %w", s.FirstEntryID, err)
			}
		}
	}
	if m.HasPassword {
		switch m.DigestType {
		case DigestCRC32, DigestHMAC, DigestCRC32C, DigestDummy:
		default:
			return fmt.Errorf("unknown digest type %d", int32(m.DigestType))
		}
	}
	return nil
}

// validateForWrite adds what a writer must guarantee on top of Validate:
// the password and digest are present (a Java rewrite of a value without
// them crashes, spec §1.4) and the close values are sane.
func (m *LedgerMetadata) validateForWrite() error {
	if err := m.Validate(); err != nil {
		return err
	}
	if !m.HasPassword {
		return errors.New("no password and digest type: Folio always writes both (set HasPassword)")
	}
	if m.State == LedgerClosed && (m.LastEntryID < -1 || m.Length < 0) {
		return fmt.Errorf("closed with lastEntryId %d, length %d", m.LastEntryID, m.Length)
	}
	return nil
}

// ValidateBookieID checks id as Java's BookieId does: only the characters of
// the regex `[a-zA-Z0-9:-_.\-]+`, in which `:-_` is the range 0x3A–0x5F, and
// not "readonly" in any case (it would collide with ZooKeeper's readonly
// node).
func ValidateBookieID(id BookieID) error {
	if id == "" {
		return errors.New("empty bookie id")
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c >= 0x3A && c <= 0x5F || c == '.' || c == '-'
		if !ok {
			return fmt.Errorf("bookie id %q: character %q not allowed", string(id), c)
		}
	}
	if strings.EqualFold(string(id), "readonly") {
		return fmt.Errorf("bookie id %q is reserved", string(id))
	}
	return nil
}
