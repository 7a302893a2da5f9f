// Package index is the bookie's entry index and per-ledger state, in a
// Pebble database: (ledger id, entry id) → entry log location, and ledger
// id → state (master key, fenced, explicit LAC, deleted).
//
// # Durability
//
// The journal is the write-ahead log (DESIGN.md §4). Every write here uses
// pebble.NoSync: it is in Pebble's WAL buffer but may be lost by a crash.
// Sync makes every earlier write durable; the checkpoint calls it before it
// lets the journal drop the records these writes came from. Relocate (used
// by entry-log compaction, which then deletes the old log) is the exception:
// it syncs before returning, because nothing else could restore those keys.
//
// # Keys (format version 1)
//
// All integers are big-endian, so Pebble's byte order is numeric order and
// one ledger's entries are contiguous and ascending:
//
//	entry:   'e' | ledger id (8) | entry id (8)        → location value
//	state:   's' | ledger id (8)                       → state value
//	format:  "mformat"                                 → "1"
//	stamp:   "mstamp"                                  → stamp value
//
// Ledger and entry ids are non-negative int64s (BookKeeper's ids), so the
// key of ledger L+1 is computed without overflow even for L = 2^63-1.
// "Last entry of L" is one SeekLT to 'e'|L+1 inside bounds ['e'|L, 'e'|L+1).
//
// # Values
//
//	location: version=1 (1) | log id (8) | offset (8) | size (4)     21 bytes
//
//	state:    version=1 (1) | flags (1) | master key length (uvarint) |
//	          master key | explicit LAC length (uvarint) | explicit LAC |
//	          crc32c (4) of everything before it
//
//	flags:    bit 0 fenced, bit 1 deleted, bit 2 explicit LAC present
//
//	stamp:    version=1 (1) | store id (16) | shard (4) | shards (4) |
//	          crc32c (4) of everything before it                   29 bytes
//
// A value that does not decode (wrong length, version, flags or checksum)
// is a *CorruptionError naming the key; it is never read as "absent". The
// decoders accept exactly what the encoders write (minimal varints, no
// explicit LAC bytes without its flag), so a value that decodes re-encodes
// to the same bytes.
//
// # Stamp
//
// The stamp ties an index to the store that created it (the ledger store's
// store id, and the ledger directory's position among the store's ledger
// directories). The ledger store writes it, synced, before it records the
// store id anywhere else, and refuses to open a directory whose LAYOUT
// records a store id its index does not carry: that index was deleted and
// recreated (empty), or comes from elsewhere, and serving from it would
// answer "no such entry" for entries the bookie acknowledged and forget
// fences. Options.MustExist lets the caller refuse a missing index before
// Pebble creates an empty one.
//
// # Deleted ledgers
//
// DeleteLedger range-deletes the ledger's entries. An unfenced ledger's
// state is removed (the id may be created again, as in BookKeeper). A
// fenced ledger's state is kept with Deleted set and its master key, and
// without explicit LAC: a ledger that was fenced and then deleted stays
// fenced forever (spec/protocol.md §5, DESIGN.md §6.3), so a late add from
// the old writer is refused as fenced instead of re-creating the ledger.
package index

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	iofs "io/fs"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/storage/entrylog"
)

// Location and Placement are the entry log's types: the index stores what
// entrylog.Store.Flush and compaction produce.
type (
	Location   = entrylog.Location
	Placement  = entrylog.Placement
	Relocation = entrylog.Relocation
)

// Errors returned by this package. Match them with errors.Is.
var (
	// ErrNoEntry: the index has no such entry (the only component that may
	// say so, spec/protocol.md §5).
	ErrNoEntry = errors.New("index: no such entry")
	// ErrNoLedger: no state record for the ledger.
	ErrNoLedger = errors.New("index: no such ledger")
	// ErrInvalidID: a negative ledger or entry id.
	ErrInvalidID = errors.New("index: invalid ledger or entry id")
	// ErrCorrupt: matched by every *CorruptionError.
	ErrCorrupt = errors.New("index: corrupt value")
	// ErrNotExist: Options.MustExist was set and the directory holds no
	// index.
	ErrNotExist = errors.New("index: no index in the directory")
)

// CorruptionError reports a stored value that does not decode.
type CorruptionError struct {
	// Key is the raw key; Desc names it in domain words.
	Key    []byte
	Desc   string
	Reason string
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("index: corrupt value for %s (key %s): %s", e.Desc, hex.EncodeToString(e.Key), e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) hold.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }

// State is a ledger's persistent state.
type State struct {
	// MasterKey is the ledger's master key (SHA1("ledger"+password)).
	MasterKey []byte
	// Fenced: the ledger refuses normal adds (recovery adds still pass).
	Fenced bool
	// Deleted: the ledger was deleted while fenced; only Fenced and
	// MasterKey are kept.
	Deleted bool
	// ExplicitLAC is the last explicit LAC body written, nil if none.
	ExplicitLAC []byte
}

// Options configure Open.
type Options struct {
	// CacheBytes is Pebble's block cache size. Default 32 MiB.
	CacheBytes int64
	// Logger receives Pebble's messages. Default: Info discarded, Errorf
	// discarded, Fatalf panics (internal/storage may not write to stderr
	// itself; pass a real logger in production).
	Logger pebble.Logger
	// DisableAutomaticCompactions turns off Pebble's automatic compactions
	// and its asynchronous table-statistics collection (the deterministic
	// simulator: no background work may change the files between its
	// steps). Memtable flushes still happen at Open and when a memtable
	// fills.
	DisableAutomaticCompactions bool
	// MustExist makes Open fail with ErrNotExist, without creating
	// anything, when dir holds no index (the ledger store sets it when it
	// has evidence that the index existed).
	MustExist bool
}

// Stamp ties an index to the store and ledger directory it belongs to (see
// the package comment).
type Stamp struct {
	// StoreID is the ledger store's random id; never all zeros.
	StoreID [16]byte
	// Shard is the ledger directory's position, Shards their number.
	Shard, Shards uint32
}

// Index is the Pebble-backed entry index and ledger state store. Methods
// are safe for concurrent use; writers are serialised so Relocate's
// compare-and-set is atomic with respect to PutLocations and DeleteLedger.
type Index struct {
	db      *pebble.DB
	cache   *pebble.Cache
	writeMu sync.Mutex
}

const formatVersion = 1

var (
	formatKey   = []byte("mformat")
	stampKey    = []byte("mstamp")
	castagnoli  = crc32.MakeTable(crc32.Castagnoli)
	errNotFound = pebble.ErrNotFound
)

const (
	prefixEntry = 'e'
	prefixState = 's'

	locationValueSize = 21
	stampValueSize    = 1 + 16 + 4 + 4 + 4

	flagFenced  = 1 << 0
	flagDeleted = 1 << 1
	flagLAC     = 1 << 2
	flagsKnown  = flagFenced | flagDeleted | flagLAC
)

type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Errorf("index: pebble fatal: "+format, args...))
}

// Open opens or creates the index in dir on fs.
func Open(fs vfs.FS, dir string, opts Options) (*Index, error) {
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = 32 << 20
	}
	if opts.Logger == nil {
		opts.Logger = quietLogger{}
	}
	if opts.MustExist {
		// Checked here as well as by Pebble's ErrorIfNotExists, which
		// would create the directory before it finds no database in it.
		if _, err := fs.Stat(dir); errors.Is(err, iofs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s does not exist", ErrNotExist, dir)
		} else if err != nil {
			return nil, fmt.Errorf("index: stat %s: %w", dir, err)
		}
	}
	cache := pebble.NewCache(opts.CacheBytes)
	popts := &pebble.Options{
		FS:                 fs,
		Cache:              cache,
		Logger:             opts.Logger,
		FormatMajorVersion: pebble.FormatTableFormatV6,

		DisableAutomaticCompactions: opts.DisableAutomaticCompactions,
		DisableTableStats:           opts.DisableAutomaticCompactions,
		ErrorIfNotExists:            opts.MustExist,
	}
	db, err := pebble.Open(dir, popts)
	if err != nil {
		cache.Unref()
		if errors.Is(err, pebble.ErrDBDoesNotExist) {
			return nil, fmt.Errorf("%w: %s holds no Pebble database", ErrNotExist, dir)
		}
		return nil, fmt.Errorf("index: open %s: %w", dir, err)
	}
	x := &Index{db: db, cache: cache}
	if err := x.checkFormat(); err != nil {
		x.Close()
		return nil, err
	}
	return x, nil
}

func (x *Index) checkFormat() error {
	v, closer, err := x.db.Get(formatKey)
	if errors.Is(err, errNotFound) {
		if err := x.db.Set(formatKey, []byte{'0' + formatVersion}, pebble.Sync); err != nil {
			return fmt.Errorf("index: write format version: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("index: read format version: %w", err)
	}
	defer closer.Close()
	if !bytes.Equal(v, []byte{'0' + formatVersion}) {
		return fmt.Errorf("index: unsupported format version %q", v)
	}
	return nil
}

// Exists reports whether dir holds an index (a Pebble database), without
// opening or changing anything.
func Exists(fs vfs.FS, dir string) (bool, error) {
	if _, err := fs.Stat(dir); errors.Is(err, iofs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("index: stat %s: %w", dir, err)
	}
	desc, err := pebble.Peek(dir, fs)
	if err != nil {
		return false, fmt.Errorf("index: look for an index in %s: %w", dir, err)
	}
	return desc.Exists, nil
}

// Stamp returns the index's stamp; ok is false if it has none (an index
// created before stamps existed, or one not yet stamped).
func (x *Index) Stamp() (st Stamp, ok bool, err error) {
	v, closer, err := x.db.Get(stampKey)
	if errors.Is(err, errNotFound) {
		return Stamp{}, false, nil
	}
	if err != nil {
		return Stamp{}, false, fmt.Errorf("index: read stamp: %w", err)
	}
	defer closer.Close()
	st, err = decodeStamp(v)
	return st, err == nil, err
}

// SetStamp writes the stamp and syncs it before returning.
func (x *Index) SetStamp(st Stamp) error {
	if st.StoreID == ([16]byte{}) {
		return errors.New("index: a stamp needs a non-zero store id")
	}
	x.writeMu.Lock()
	defer x.writeMu.Unlock()
	if err := x.db.Set(stampKey, encodeStamp(st), pebble.Sync); err != nil {
		return fmt.Errorf("index: write stamp: %w", err)
	}
	return nil
}

func encodeStamp(st Stamp) []byte {
	v := make([]byte, 0, stampValueSize)
	v = append(v, 1)
	v = append(v, st.StoreID[:]...)
	v = binary.BigEndian.AppendUint32(v, st.Shard)
	v = binary.BigEndian.AppendUint32(v, st.Shards)
	return binary.BigEndian.AppendUint32(v, crc32.Checksum(v, castagnoli))
}

func decodeStamp(v []byte) (Stamp, error) {
	bad := func(reason string) (Stamp, error) {
		return Stamp{}, &CorruptionError{Key: bytes.Clone(stampKey), Desc: "the index stamp", Reason: reason}
	}
	if len(v) != stampValueSize {
		return bad(fmt.Sprintf("stamp value is %d bytes, want %d", len(v), stampValueSize))
	}
	if crc32.Checksum(v[:stampValueSize-4], castagnoli) != binary.BigEndian.Uint32(v[stampValueSize-4:]) {
		return bad("stamp checksum mismatch")
	}
	if v[0] != 1 {
		return bad(fmt.Sprintf("unknown stamp version %d", v[0]))
	}
	var st Stamp
	copy(st.StoreID[:], v[1:17])
	st.Shard = binary.BigEndian.Uint32(v[17:21])
	st.Shards = binary.BigEndian.Uint32(v[21:25])
	if st.StoreID == ([16]byte{}) {
		return bad("zero store id")
	}
	if st.Shard >= st.Shards {
		return bad(fmt.Sprintf("shard %d of %d", st.Shard, st.Shards))
	}
	return st, nil
}

// Close closes the database. Writes since the last Sync may be lost, as
// after a crash. No method may be called after Close (Pebble panics).
func (x *Index) Close() error {
	err := x.db.Close()
	x.cache.Unref()
	return err
}

// Sync makes every write made before it durable. The checkpoint calls it.
func (x *Index) Sync() error {
	if err := x.db.LogData(nil, pebble.Sync); err != nil {
		return fmt.Errorf("index: sync: %w", err)
	}
	return nil
}

func entryKey(ledgerID, entryID int64) []byte {
	k := make([]byte, 17)
	k[0] = prefixEntry
	binary.BigEndian.PutUint64(k[1:9], uint64(ledgerID))
	binary.BigEndian.PutUint64(k[9:17], uint64(entryID))
	return k
}

// ledgerEntryBounds returns ['e'|L, 'e'|L+1). L+1 is computed in uint64, so
// L = 2^63-1 gives 'e'|0x8000000000000000, above every valid key.
func ledgerEntryBounds(ledgerID int64) (lo, hi []byte) {
	lo = make([]byte, 9)
	lo[0] = prefixEntry
	binary.BigEndian.PutUint64(lo[1:], uint64(ledgerID))
	hi = make([]byte, 9)
	hi[0] = prefixEntry
	binary.BigEndian.PutUint64(hi[1:], uint64(ledgerID)+1)
	return lo, hi
}

func stateKey(ledgerID int64) []byte {
	k := make([]byte, 9)
	k[0] = prefixState
	binary.BigEndian.PutUint64(k[1:], uint64(ledgerID))
	return k
}

func checkIDs(ledgerID, entryID int64) error {
	if ledgerID < 0 || entryID < 0 {
		return fmt.Errorf("%w: ledger %d entry %d", ErrInvalidID, ledgerID, entryID)
	}
	return nil
}

func encodeLocation(dst []byte, l Location) []byte {
	dst = append(dst, 1)
	dst = binary.BigEndian.AppendUint64(dst, l.LogID)
	dst = binary.BigEndian.AppendUint64(dst, uint64(l.Offset))
	return binary.BigEndian.AppendUint32(dst, l.Size)
}

func decodeLocation(key, v []byte) (Location, error) {
	bad := func(reason string) (Location, error) {
		l, e := int64(binary.BigEndian.Uint64(key[1:9])), int64(binary.BigEndian.Uint64(key[9:17]))
		return Location{}, &CorruptionError{Key: bytes.Clone(key), Desc: fmt.Sprintf("ledger %d entry %d", l, e), Reason: reason}
	}
	if len(v) != locationValueSize {
		return bad(fmt.Sprintf("location value is %d bytes, want %d", len(v), locationValueSize))
	}
	if v[0] != 1 {
		return bad(fmt.Sprintf("unknown location version %d", v[0]))
	}
	off := binary.BigEndian.Uint64(v[9:17])
	if off > 1<<62 {
		return bad(fmt.Sprintf("offset %d out of range", off))
	}
	return Location{LogID: binary.BigEndian.Uint64(v[1:9]), Offset: int64(off), Size: binary.BigEndian.Uint32(v[17:21])}, nil
}

func encodeState(st State) []byte {
	var flags byte
	if st.Fenced {
		flags |= flagFenced
	}
	if st.Deleted {
		flags |= flagDeleted
	}
	if st.ExplicitLAC != nil {
		flags |= flagLAC
	}
	v := make([]byte, 0, 2+2*binary.MaxVarintLen64+len(st.MasterKey)+len(st.ExplicitLAC)+4)
	v = append(v, 1, flags)
	v = binary.AppendUvarint(v, uint64(len(st.MasterKey)))
	v = append(v, st.MasterKey...)
	v = binary.AppendUvarint(v, uint64(len(st.ExplicitLAC)))
	v = append(v, st.ExplicitLAC...)
	return binary.BigEndian.AppendUint32(v, crc32.Checksum(v, castagnoli))
}

func decodeState(ledgerID int64, key, v []byte) (State, error) {
	bad := func(reason string) (State, error) {
		return State{}, &CorruptionError{Key: bytes.Clone(key), Desc: fmt.Sprintf("state of ledger %d", ledgerID), Reason: reason}
	}
	if len(v) < 2+1+1+4 {
		return bad(fmt.Sprintf("state value is %d bytes", len(v)))
	}
	body, sum := v[:len(v)-4], binary.BigEndian.Uint32(v[len(v)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return bad("state checksum mismatch")
	}
	if body[0] != 1 {
		return bad(fmt.Sprintf("unknown state version %d", body[0]))
	}
	flags := body[1]
	if flags&^flagsKnown != 0 {
		return bad(fmt.Sprintf("unknown state flags %#x", flags))
	}
	rest := body[2:]
	field := func(name string) ([]byte, string) {
		n, w := binary.Uvarint(rest)
		if w <= 0 || n > uint64(len(rest)-w) {
			return nil, "bad " + name + " length"
		}
		if w != uvarintLen(n) {
			return nil, "non-minimal " + name + " length"
		}
		f := bytes.Clone(rest[w : w+int(n)])
		rest = rest[w+int(n):]
		return f, ""
	}
	var st State
	var reason string
	if st.MasterKey, reason = field("master key"); reason != "" {
		return bad(reason)
	}
	if st.ExplicitLAC, reason = field("explicit LAC"); reason != "" {
		return bad(reason)
	}
	if len(rest) != 0 {
		return bad("trailing bytes")
	}
	if len(st.MasterKey) == 0 {
		st.MasterKey = nil
	}
	if flags&flagLAC == 0 {
		if len(st.ExplicitLAC) != 0 {
			return bad("explicit LAC bytes without the explicit-LAC flag")
		}
		st.ExplicitLAC = nil
	} else if st.ExplicitLAC == nil {
		st.ExplicitLAC = []byte{}
	}
	st.Fenced = flags&flagFenced != 0
	st.Deleted = flags&flagDeleted != 0
	return st, nil
}

func uvarintLen(n uint64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], n)
}

// PutLocations records flushed entries in one batch, without sync (the
// journal covers them until the next Sync). Use it as, or inside, the apply
// function of entrylog.Store.Flush.
func (x *Index) PutLocations(ps []Placement) error {
	b := x.db.NewBatchWithSize(len(ps) * (17 + locationValueSize + 8))
	defer b.Close()
	var val [locationValueSize]byte
	for _, p := range ps {
		if err := checkIDs(p.LedgerID, p.EntryID); err != nil {
			return err
		}
		if err := b.Set(entryKey(p.LedgerID, p.EntryID), encodeLocation(val[:0], p.Loc), nil); err != nil {
			return fmt.Errorf("index: batch: %w", err)
		}
	}
	x.writeMu.Lock()
	defer x.writeMu.Unlock()
	if err := x.db.Apply(b, pebble.NoSync); err != nil {
		return fmt.Errorf("index: put %d locations: %w", len(ps), err)
	}
	return nil
}

// Get returns the location of an entry, or ErrNoEntry.
func (x *Index) Get(ledgerID, entryID int64) (Location, error) {
	if err := checkIDs(ledgerID, entryID); err != nil {
		return Location{}, err
	}
	k := entryKey(ledgerID, entryID)
	v, closer, err := x.db.Get(k)
	if errors.Is(err, errNotFound) {
		return Location{}, fmt.Errorf("%w: ledger %d entry %d", ErrNoEntry, ledgerID, entryID)
	}
	if err != nil {
		return Location{}, fmt.Errorf("index: get ledger %d entry %d: %w", ledgerID, entryID, err)
	}
	defer closer.Close()
	return decodeLocation(k, v)
}

// LastEntry returns the highest entry id of the ledger in the index and
// its location, or ErrNoEntry if it has none. It is one SeekLT, bounded to
// the ledger, so entries of neighbouring ledgers are never seen.
func (x *Index) LastEntry(ledgerID int64) (int64, Location, error) {
	if err := checkIDs(ledgerID, 0); err != nil {
		return 0, Location{}, err
	}
	lo, hi := ledgerEntryBounds(ledgerID)
	it, err := x.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, Location{}, fmt.Errorf("index: iterator: %w", err)
	}
	defer it.Close()
	if !it.SeekLT(hi) {
		if err := it.Error(); err != nil {
			return 0, Location{}, fmt.Errorf("index: last entry of ledger %d: %w", ledgerID, err)
		}
		return 0, Location{}, fmt.Errorf("%w: ledger %d has no entries", ErrNoEntry, ledgerID)
	}
	k := it.Key()
	if len(k) != 17 {
		return 0, Location{}, &CorruptionError{Key: bytes.Clone(k), Desc: fmt.Sprintf("entry key of ledger %d", ledgerID), Reason: "bad key length"}
	}
	v, err := it.ValueAndErr()
	if err != nil {
		return 0, Location{}, fmt.Errorf("index: last entry of ledger %d: %w", ledgerID, err)
	}
	loc, err := decodeLocation(k, v)
	if err != nil {
		return 0, Location{}, err
	}
	return int64(binary.BigEndian.Uint64(k[9:17])), loc, nil
}

// Entries calls fn for each entry of the ledger with id ≥ fromEntryID, in
// ascending order, until fn returns false. Values are decoded before fn
// sees them, so a corrupt one stops the walk with its error.
func (x *Index) Entries(ledgerID, fromEntryID int64, fn func(entryID int64, loc Location) bool) error {
	if err := checkIDs(ledgerID, fromEntryID); err != nil {
		return err
	}
	lo, hi := ledgerEntryBounds(ledgerID)
	it, err := x.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("index: iterator: %w", err)
	}
	defer it.Close()
	for ok := it.SeekGE(entryKey(ledgerID, fromEntryID)); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != 17 {
			return &CorruptionError{Key: bytes.Clone(k), Desc: fmt.Sprintf("entry key of ledger %d", ledgerID), Reason: "bad key length"}
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("index: entries of ledger %d: %w", ledgerID, err)
		}
		loc, err := decodeLocation(k, v)
		if err != nil {
			return err
		}
		if !fn(int64(binary.BigEndian.Uint64(k[9:17])), loc) {
			return nil
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("index: entries of ledger %d: %w", ledgerID, err)
	}
	return nil
}

// LedgerState returns the ledger's state, or ErrNoLedger.
func (x *Index) LedgerState(ledgerID int64) (State, error) {
	if err := checkIDs(ledgerID, 0); err != nil {
		return State{}, err
	}
	k := stateKey(ledgerID)
	v, closer, err := x.db.Get(k)
	if errors.Is(err, errNotFound) {
		return State{}, fmt.Errorf("%w: ledger %d", ErrNoLedger, ledgerID)
	}
	if err != nil {
		return State{}, fmt.Errorf("index: state of ledger %d: %w", ledgerID, err)
	}
	defer closer.Close()
	return decodeState(ledgerID, k, v)
}

// PutState writes the ledger's whole state, without sync (the journal
// holds master keys, fences and explicit LACs until the next Sync). The
// caller serialises read-modify-write cycles per ledger (the ledger store's
// per-ledger lock).
func (x *Index) PutState(ledgerID int64, st State) error {
	if err := checkIDs(ledgerID, 0); err != nil {
		return err
	}
	x.writeMu.Lock()
	defer x.writeMu.Unlock()
	if err := x.db.Set(stateKey(ledgerID), encodeState(st), pebble.NoSync); err != nil {
		return fmt.Errorf("index: put state of ledger %d: %w", ledgerID, err)
	}
	return nil
}

// DeleteLedger range-deletes the ledger's entries and updates its state in
// one batch, without sync: a fenced ledger keeps {Fenced, Deleted,
// MasterKey}; any other ledger's state is removed. Deleting an unknown
// ledger is not an error. Call entrylog.Store.DropLedger first.
func (x *Index) DeleteLedger(ledgerID int64) error {
	if err := checkIDs(ledgerID, 0); err != nil {
		return err
	}
	x.writeMu.Lock()
	defer x.writeMu.Unlock()
	st, err := x.LedgerState(ledgerID)
	exists := true
	if errors.Is(err, ErrNoLedger) {
		exists, err = false, nil
	} else if err != nil {
		return err
	}
	b := x.db.NewBatch()
	defer b.Close()
	lo, hi := ledgerEntryBounds(ledgerID)
	if err := b.DeleteRange(lo, hi, nil); err != nil {
		return fmt.Errorf("index: batch: %w", err)
	}
	switch {
	case exists && st.Fenced:
		err = b.Set(stateKey(ledgerID), encodeState(State{MasterKey: st.MasterKey, Fenced: true, Deleted: true}), nil)
	case exists:
		err = b.Delete(stateKey(ledgerID), nil)
	}
	if err != nil {
		return fmt.Errorf("index: batch: %w", err)
	}
	if err := x.db.Apply(b, pebble.NoSync); err != nil {
		return fmt.Errorf("index: delete ledger %d: %w", ledgerID, err)
	}
	return nil
}

// Ledgers calls fn for every ledger with a state record (deleted-but-fenced
// ones included, with Deleted set), ascending by id, until fn returns false.
func (x *Index) Ledgers(fn func(ledgerID int64, st State) bool) error {
	it, err := x.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixState}, UpperBound: []byte{prefixState + 1}})
	if err != nil {
		return fmt.Errorf("index: iterator: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != 9 {
			return &CorruptionError{Key: bytes.Clone(k), Desc: "state key", Reason: "bad key length"}
		}
		id := int64(binary.BigEndian.Uint64(k[1:]))
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("index: state of ledger %d: %w", id, err)
		}
		st, err := decodeState(id, k, v)
		if err != nil {
			return err
		}
		if !fn(id, st) {
			return nil
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("index: ledgers: %w", err)
	}
	return nil
}

// Relocate applies compaction relocations: each entry whose location is
// still Old is set to New; others (deleted, re-written) are left alone. It
// syncs before returning, because the caller deletes the old entry log
// next. It returns how many were applied. Use it as the apply function of
// entrylog.Store.GC and CompactLog.
func (x *Index) Relocate(rs []Relocation) (int, error) {
	x.writeMu.Lock()
	defer x.writeMu.Unlock()
	b := x.db.NewBatch()
	defer b.Close()
	var val [locationValueSize]byte
	n := 0
	for _, r := range rs {
		cur, err := x.Get(r.LedgerID, r.EntryID)
		if errors.Is(err, ErrNoEntry) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if cur != r.Old {
			continue
		}
		if err := b.Set(entryKey(r.LedgerID, r.EntryID), encodeLocation(val[:0], r.New), nil); err != nil {
			return 0, fmt.Errorf("index: batch: %w", err)
		}
		n++
	}
	// Sync even when nothing changed: earlier NoSync writes that made
	// these relocations unnecessary (deletes, re-writes) must be durable
	// before the old log goes.
	if b.Empty() {
		return 0, x.Sync()
	}
	if err := x.db.Apply(b, pebble.Sync); err != nil {
		return 0, fmt.Errorf("index: relocate %d entries: %w", n, err)
	}
	return n, nil
}
