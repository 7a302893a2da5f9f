// Package memory is an in-memory metadata driver for unit tests and the
// simulator (DESIGN.md §3, §7). It keeps what a real store keeps — ledger
// values as serialized bytes, cookies, registrations under leases, the
// layout and instance id — and adds injectable faults:
//
//   - a Hook called before and after every operation, which can fail it,
//     delay it (block), or run a competing write first (a CAS conflict); an
//     error after the operation models an ambiguous commit (done, but the
//     caller sees a failure);
//   - lost sessions: SuspendKeepAlive (the lease expires TTL later on the
//     store's clock) and ExpireSession (at once).
//
// Time is the injected Clock's; nothing here reads the wall clock or sleeps.
// Leases are checked at every operation, and a suspended lease expires by a
// timer of the clock (during a manual clock's Advance past its TTL).
//
// Versions are a store-wide revision counter, bumped by every mutation, as
// etcd's mod_revision: a key's version strictly increases over its life,
// also across delete and re-create.
//
// Several drivers (handles) can share one Store, as processes share an etcd
// cluster; closing a handle ends its sessions and watches, not the Store.
// `memory://name/scope` URIs open handles on a process-wide Store per name
// once a test has called Register; importing the package registers nothing.
package memory

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/metadata"
)

// Clock gives the store's time (leases); only Now is used.
type Clock = clock.Clock

// Op names an operation, as passed to a Hook.
type Op string

const (
	OpCreateLedger     Op = "CreateLedgerMetadata" // also each attempt of CreateLedger
	OpReadLedger       Op = "ReadLedger"
	OpWriteLedger      Op = "WriteLedger"
	OpDeleteLedger     Op = "DeleteLedger"
	OpListLedgers      Op = "ListLedgers"
	OpWatchLedger      Op = "WatchLedger"
	OpGenerateLedgerID Op = "GenerateLedgerID"
	OpOpenSession      Op = "OpenSession"
	OpRegisterBookie   Op = "RegisterBookie"
	OpUnregisterBookie Op = "UnregisterBookie"
	OpListBookies      Op = "ListBookies"
	OpWatchBookies     Op = "WatchBookies"
	OpReadCookie       Op = "ReadCookie"
	OpWriteCookie      Op = "WriteCookie"
	OpDeleteCookie     Op = "DeleteCookie"
	OpListCookies      Op = "ListCookies"
	OpInitCluster      Op = "InitNewCluster"
	OpFormat           Op = "Format"
	OpReadCluster      Op = "ReadCluster" // ReadInstanceID, ReadLayout
)

// Phase says when a Hook is called.
type Phase int

const (
	// Before the operation: an error fails it with no effect.
	Before Phase = iota
	// After the operation took effect (only for mutations that succeeded):
	// an error is returned to the caller although the change stays, as
	// when an etcd reply is lost after commit.
	After
)

// Hook observes operations. It runs without the store's lock, so it may
// block (a delay) or call the store (e.g. a competing write through another
// handle, to force ErrBadVersion). key is the operation's key in the etcd
// layout's shape (e.g. "/ledgers/ledgers/00000000-0000-0000-0000-000000000001"),
// or "" for whole-store operations.
type Hook func(ctx context.Context, op Op, key string, phase Phase) error

// Options configure a Store.
type Options struct {
	// Scope prefixes key names in errors; default "/ledgers".
	Scope string
	// Clock drives leases; default the wall clock.
	Clock Clock
	// Rand supplies instance ids; default crypto/rand.
	Rand io.Reader
}

// Layout is the layout value the memory driver stores (the etcd driver's,
// so tools print the same thing).
const Layout = "2\norg.apache.bookkeeper.metadata.etcd.EtcdLedgerManagerFactory:0"

const numBuckets = 128

// Store is one in-memory metadata store.
type Store struct {
	scope string
	clock Clock
	rand  io.Reader

	mu struct {
		sync.Mutex
		hook     Hook
		rev      int64
		cluster  *clusterInfo
		ledgers  map[int64]*kv
		cookies  map[metadata.BookieID]*kv
		writable map[metadata.BookieID]*session
		readOnly map[metadata.BookieID]*session
		buckets  [numBuckets]int64
		sessions map[*session]struct{}

		ledgerWatchers map[int64][]*watcher[metadata.LedgerEvent]
		bookieWatchers []*watcher[metadata.BookiesEvent]

		ar arState // AutoRecovery (autorecovery.go)
	}
}

type kv struct {
	value []byte
	ver   metadata.Version
}

type clusterInfo struct {
	instanceID string
	layout     string
}

// NewStore returns an empty, uninitialised store.
func NewStore(opts Options) *Store {
	s := &Store{scope: opts.Scope, clock: opts.Clock, rand: opts.Rand}
	if s.scope == "" {
		s.scope = "/ledgers"
	}
	if s.clock == nil {
		s.clock = clock.Real{}
	}
	if s.rand == nil {
		s.rand = rand.Reader
	}
	s.mu.ledgers = map[int64]*kv{}
	s.mu.cookies = map[metadata.BookieID]*kv{}
	s.mu.writable = map[metadata.BookieID]*session{}
	s.mu.readOnly = map[metadata.BookieID]*session{}
	s.mu.sessions = map[*session]struct{}{}
	s.mu.ledgerWatchers = map[int64][]*watcher[metadata.LedgerEvent]{}
	return s
}

// SetHook installs h (nil removes it).
func (s *Store) SetHook(h Hook) {
	s.mu.Lock()
	s.mu.hook = h
	s.mu.Unlock()
}

// FailOps is a Hook that fails every listed operation before it runs.
func FailOps(errs map[Op]error) Hook {
	return func(_ context.Context, op Op, _ string, phase Phase) error {
		if phase == Before {
			return errs[op]
		}
		return nil
	}
}

func (s *Store) hook(ctx context.Context, op Op, key string, phase Phase) error {
	s.mu.Lock()
	h := s.mu.hook
	s.mu.Unlock()
	if h == nil {
		return nil
	}
	return h(ctx, op, key, phase)
}

// begin runs the Before hook and the context check.
func (s *Store) begin(ctx context.Context, op Op, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.hook(ctx, op, key, Before)
}

// end runs the After hook of a mutation that succeeded.
func (s *Store) end(ctx context.Context, op Op, key string, err error) error {
	if err != nil {
		return err
	}
	return s.hook(ctx, op, key, After)
}

// ledgerKey names a ledger's key as the etcd driver does.
func (s *Store) ledgerKey(id int64) string {
	return fmt.Sprintf("%s/ledgers/00000000-0000-0000-%04x-%012x", s.scope, uint64(id)>>48, uint64(id)&(1<<48-1))
}

func (s *Store) cookieKey(id metadata.BookieID) string { return s.scope + "/cookies/" + string(id) }

func (s *Store) bookieKey(id metadata.BookieID, readOnly bool) string {
	if readOnly {
		return s.scope + "/bookies/readonly/" + string(id)
	}
	return s.scope + "/bookies/writable/" + string(id)
}

// nextRevLocked bumps and returns the store revision.
func (s *Store) nextRevLocked() metadata.Version {
	s.mu.rev++
	return metadata.Version(s.mu.rev)
}

// PutLedgerRaw stores value as ledger id's metadata without validation
// (metadatatest.RawWriter): for planting corrupt values. It returns the key.
func (s *Store) PutLedgerRaw(_ context.Context, id int64, value []byte) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.putLedgerLocked(id, append([]byte{}, value...))
	return s.ledgerKey(id), nil
}

func (s *Store) putLedgerLocked(id int64, value []byte) metadata.Version {
	v := s.nextRevLocked()
	s.mu.ledgers[id] = &kv{value: value, ver: v}
	s.notifyLedgerLocked(id)
	return v
}

// notifyLedgerLocked tells id's watchers its new state.
func (s *Store) notifyLedgerLocked(id int64) {
	ws := s.mu.ledgerWatchers[id]
	if len(ws) == 0 {
		return
	}
	ev := s.ledgerEventLocked(id)
	live := ws[:0]
	for _, w := range ws {
		if w.push(ev) && !ev.Deleted && ev.Err == nil {
			live = append(live, w)
		}
	}
	if len(live) == 0 {
		delete(s.mu.ledgerWatchers, id)
	} else {
		s.mu.ledgerWatchers[id] = live
	}
}

func (s *Store) ledgerEventLocked(id int64) metadata.LedgerEvent {
	e, ok := s.mu.ledgers[id]
	if !ok {
		return metadata.LedgerEvent{Deleted: true}
	}
	md, err := metadata.ParseLedgerMetadata(e.value)
	if err != nil {
		return metadata.LedgerEvent{Err: metadata.Corrupt(s.ledgerKey(id), err)}
	}
	return metadata.LedgerEvent{Metadata: md, Version: e.ver}
}

func (s *Store) notifyBookiesLocked() {
	if len(s.mu.bookieWatchers) == 0 {
		return
	}
	live := s.mu.bookieWatchers[:0]
	for _, w := range s.mu.bookieWatchers {
		if w.push(s.bookiesEventLocked()) {
			live = append(live, w)
		}
	}
	s.mu.bookieWatchers = live
}

func (s *Store) bookiesEventLocked() metadata.BookiesEvent {
	return metadata.BookiesEvent{Writable: sortedIDs(s.mu.writable), ReadOnly: sortedIDs(s.mu.readOnly)}
}

func sortedIDs[V any](m map[metadata.BookieID]V) []metadata.BookieID {
	ids := make([]metadata.BookieID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

func (s *Store) newInstanceID() (string, error) {
	var b [16]byte
	if _, err := io.ReadFull(s.rand, b[:]); err != nil {
		return "", err
	}
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

var named struct {
	sync.Mutex
	stores map[string]*Store
}

// Named returns the process-wide Store called name, creating it on first
// use with default options; `memory://name/scope` opens handles on it.
func Named(name string) *Store {
	named.Lock()
	defer named.Unlock()
	if named.stores == nil {
		named.stores = map[string]*Store{}
	}
	st := named.stores[name]
	if st == nil {
		st = NewStore(Options{})
		named.stores[name] = st
	}
	return st
}

// ForgetNamed drops the named store (tests call it in cleanup).
func ForgetNamed(name string) {
	named.Lock()
	delete(named.stores, name)
	named.Unlock()
}

// Register makes metadata.Open accept `memory://name/scope` URIs, each a
// handle on the process-wide Store of that name (Named). The scheme is for
// tests only, so importing the package does not register it: a test that
// opens memory:// URIs calls Register from a _test.go file, and the shipped
// binary and the public client never accept it (docs/design/layout.md).
// Calling it again does nothing.
func Register() {
	registerOnce.Do(func() {
		metadata.RegisterDriver("memory", func(_ context.Context, u *metadata.URI, opts metadata.Options) (metadata.Driver, error) {
			if !opts.Security.IsZero() {
				return nil, fmt.Errorf("%w: the memory driver has no TLS or authentication", metadata.ErrBadSecurity)
			}
			name := ""
			if len(u.Hosts) > 0 {
				name = u.Hosts[0]
			}
			return Named(name).Open(), nil
		})
	})
}

var registerOnce sync.Once
