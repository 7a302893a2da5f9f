package bookie

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"sort"
	"sync"

	"github.com/foliodb/folio/internal/storage"
)

// memStore is an in-memory storage.Store for the bookie's unit tests: it
// keeps the contract of storage.Store (keys, fences, fenced-and-deleted,
// known LAC, watches) and lets a test inject failures and hold adds back.
// The same tests also run against the real ledgerstore.
type memStore struct {
	mu      sync.Mutex
	ledgers map[int64]*memLedger
	// fencedDeleted remembers fenced ledgers that were deleted.
	fencedDeleted map[int64]bool

	// Fault injection.
	readErr  error // returned by ReadEntry when set
	lacErr   error // returned by ExplicitLAC when set
	holdAdds bool  // queue adds until release()
	held     []heldAdd

	failed chan struct{}
	err    error
}

type memLedger struct {
	key      []byte
	fenced   bool
	entries  map[int64][]byte
	explicit []byte
	lac      int64
	watches  []*memWatch
}

// memWatch is a WatchLAC registration; wake is nil once cancelled.
type memWatch struct{ wake func() }

type heldAdd struct {
	done storage.AddCompletion
	err  error
}

func newMemStore() *memStore {
	return &memStore{ledgers: map[int64]*memLedger{}, fencedDeleted: map[int64]bool{}, failed: make(chan struct{})}
}

// ledgerLocked gets or creates a ledger, checking the key.
func (s *memStore) ledgerLocked(ledgerID int64, key []byte) (*memLedger, error) {
	l := s.ledgers[ledgerID]
	if l == nil {
		l = &memLedger{key: bytes.Clone(key), entries: map[int64][]byte{}, lac: -1}
		s.ledgers[ledgerID] = l
		return l, nil
	}
	if !bytes.Equal(l.key, key) {
		return nil, storage.ErrUnauthorized
	}
	return l, nil
}

func (l *memLedger) raiseLAC(lac int64) {
	if lac > l.lac {
		l.lac = lac
		for _, w := range l.watches {
			if w.wake != nil {
				w.wake()
				w.wake = nil
			}
		}
		l.watches = nil
	}
}

func (s *memStore) AddEntry(ledgerID, entryID int64, masterKey, body []byte, opts storage.AddOptions, done storage.AddCompletion) {
	err := s.addEntry(ledgerID, entryID, masterKey, body, opts)
	s.mu.Lock()
	if s.holdAdds {
		s.held = append(s.held, heldAdd{done, err})
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	go done.AddComplete(err)
}

func (s *memStore) addEntry(ledgerID, entryID int64, masterKey, body []byte, opts storage.AddOptions) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.failed:
		return storage.ErrReadOnly
	default:
	}
	if s.fencedDeleted[ledgerID] {
		return storage.ErrFenced
	}
	l, err := s.ledgerLocked(ledgerID, masterKey)
	if err != nil {
		return err
	}
	if l.fenced && !opts.Recovery {
		return storage.ErrFenced
	}
	l.entries[entryID] = bytes.Clone(body)
	l.raiseLAC(int64(binary.BigEndian.Uint64(body[16:24])))
	return nil
}

// release completes the held adds.
func (s *memStore) release() {
	s.mu.Lock()
	held := s.held
	s.held, s.holdAdds = nil, false
	s.mu.Unlock()
	for _, h := range held {
		h.done.AddComplete(h.err)
	}
}

func (s *memStore) Fence(ctx context.Context, ledgerID int64, masterKey []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, err := s.ledgerLocked(ledgerID, masterKey)
	if err != nil {
		return err
	}
	l.fenced = true
	return nil
}

func (s *memStore) ReadEntry(ledgerID, entryID int64) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.readErr != nil {
		return nil, s.readErr
	}
	l := s.ledgers[ledgerID]
	if l == nil {
		return nil, storage.ErrNoLedger
	}
	if entryID == -1 {
		entryID = -1
		for id := range l.entries {
			entryID = max(entryID, id)
		}
	}
	b, ok := l.entries[entryID]
	if !ok {
		return nil, storage.ErrNoEntry
	}
	return bytes.Clone(b), nil
}

func (s *memStore) LastAddConfirmed(ledgerID int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.ledgers[ledgerID]
	if l == nil {
		return 0, storage.ErrNoLedger
	}
	return l.lac, nil
}

func (s *memStore) WatchLAC(ledgerID, previous int64, wake func()) (int64, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.ledgers[ledgerID]
	if l == nil {
		return 0, nil, storage.ErrNoLedger
	}
	if l.lac > previous {
		return l.lac, func() {}, nil
	}
	w := &memWatch{wake: wake}
	l.watches = append(l.watches, w)
	return l.lac, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		w.wake = nil
	}, nil
}

func (s *memStore) SetExplicitLAC(ctx context.Context, ledgerID int64, masterKey, body []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, err := s.ledgerLocked(ledgerID, masterKey)
	if err != nil {
		return err
	}
	l.explicit = bytes.Clone(body)
	if len(body) >= 16 {
		l.raiseLAC(int64(binary.BigEndian.Uint64(body[8:16])))
	}
	return nil
}

func (s *memStore) ExplicitLAC(ledgerID int64) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lacErr != nil {
		return nil, s.lacErr
	}
	l := s.ledgers[ledgerID]
	if l == nil {
		return nil, storage.ErrNoLedger
	}
	if l.explicit == nil {
		return nil, storage.ErrNoEntry
	}
	return bytes.Clone(l.explicit), nil
}

func (s *memStore) Force(ctx context.Context, ledgerID int64) error { return nil }

func (s *memStore) Entries(ledgerID int64, fn func(int64) bool) error {
	s.mu.Lock()
	l := s.ledgers[ledgerID]
	if l == nil {
		s.mu.Unlock()
		return storage.ErrNoLedger
	}
	ids := make([]int64, 0, len(l.entries))
	for id := range l.entries {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		if !fn(id) {
			break
		}
	}
	return nil
}

func (s *memStore) Ledgers(fn func(int64) bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.ledgers {
		if !fn(id) {
			break
		}
	}
	return nil
}

func (s *memStore) DeleteLedger(ctx context.Context, ledgerID int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.ledgers[ledgerID]; l != nil && l.fenced {
		s.fencedDeleted[ledgerID] = true
	}
	delete(s.ledgers, ledgerID)
	return nil
}

func (s *memStore) LedgerInfo(ledgerID int64) (storage.LedgerInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	info := storage.LedgerInfo{LastAddConfirmed: -1, LastEntryID: -1}
	l := s.ledgers[ledgerID]
	if l == nil {
		if s.fencedDeleted[ledgerID] {
			info.Fenced, info.Deleted = true, true
			return info, nil
		}
		return info, storage.ErrNoLedger
	}
	info.Fenced, info.LastAddConfirmed, info.HasExplicitLAC = l.fenced, l.lac, l.explicit != nil
	for id := range l.entries {
		info.LastEntryID = max(info.LastEntryID, id)
	}
	return info, nil
}

func (s *memStore) DiskUsage() (storage.DiskUsage, error) {
	return storage.DiskUsage{Total: 1000, Free: 400, Used: 600}, nil
}

func (s *memStore) Failed() <-chan struct{} { return s.failed }
func (s *memStore) Err() error              { return s.err }

// fail makes the store fail for good.
func (s *memStore) fail() {
	s.mu.Lock()
	s.err = errors.New("injected fsync failure")
	s.mu.Unlock()
	close(s.failed)
}
