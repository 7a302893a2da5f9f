package client

import (
	"errors"
	"fmt"
	"testing"

	"github.com/foliodb/folio/internal/ledger"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/transport"
	"github.com/foliodb/folio/internal/wire"
)

// TestErrorTable: internal errors, as the machines, the transport, bookies
// and the metadata store report them, become the public sentinel of the one
// table, keep their cause, and carry BookKeeper's return code.
func TestErrorTable(t *testing.T) {
	for _, tc := range []struct {
		internal error
		public   error
		code     int
	}{
		{wire.StatusFenced.Err(), ErrLedgerFenced, -101},
		{ledger.ErrLedgerClosed, ErrLedgerClosed, -11},
		{metadata.ErrNoSuchLedger, ErrNoSuchLedger, -7},
		{wire.StatusNoEntry.Err(), ErrNoSuchEntry, -13},
		{wire.StatusUnauthorized.Err(), ErrUnauthorized, -102},
		{fmt.Errorf("ensemble change: %w", ledger.ErrNotEnoughBookies), ErrNotEnoughBookies, -6},
		{transport.ErrTimeout, ErrTimeout, -23},
		{ledger.ErrTimeout, ErrTimeout, -23},
		{wire.StatusTooManyRequests.Err(), ErrTooManyRequests, -105},
		{ledger.ErrMetadataVersion, ErrMetadataVersion, -17},
		{metadata.ErrBadVersion, ErrMetadataVersion, -17},
		{ledger.ErrLedgerRecovery, ErrLedgerRecovery, -10},
		{ledger.ErrAddQuorumTimeout, ErrAddQuorumTimeout, -21},
		{ledger.ErrAddQuorumTimeout, ErrTimeout, -21},
		{ledger.ErrTooManyEnsembleChanges, ErrTooManyEnsembleChanges, -12},
		{metadata.ErrLedgerExists, ErrLedgerExists, -20},
		{ledger.ErrDuplicateEntryID, ErrDuplicateEntryID, -22},
		{ledger.ErrInvalidEntryID, ErrInvalidEntryID, -14},
	} {
		err := publicError(fmt.Errorf("ctx: %w", tc.internal))
		if !errors.Is(err, tc.public) || !errors.Is(err, tc.internal) {
			t.Errorf("%v: publicError gives %v, which does not match both %v and the cause", tc.internal, err, tc.public)
		}
		if got := Code(err); got != tc.code {
			t.Errorf("Code(%v) = %d, want %d", err, got, tc.code)
		}
	}
	if Code(ErrClientClosed) != -19 || Code(fmt.Errorf("%w: %w", ErrClientClosed, ErrLedgerClosed)) != -19 {
		t.Error("Code of ErrClientClosed (alone or with ErrLedgerClosed) is not -19, BKClientClosedException")
	}
	if Code(nil) != 0 || Code(ErrReadBeyondLAC) != -1 || Code(fmt.Errorf("x: %w", transport.ErrBookieUnavailable)) != -8 {
		t.Error("Code of nil, ErrReadBeyondLAC or a lost connection is wrong")
	}
	// A failed ensemble change carries both "closed" and "not enough
	// bookies": the more specific one wins.
	both := fmt.Errorf("%w: %w", ledger.ErrLedgerClosed, ledger.ErrNotEnoughBookies)
	if Code(publicError(both)) != -6 {
		t.Errorf("closed + not enough bookies: code %d", Code(publicError(both)))
	}
	// Each row's sentinel is distinct.
	seen := map[error]bool{}
	for _, row := range errorTable {
		if seen[row.err] {
			t.Errorf("%v appears twice in the table", row.err)
		}
		seen[row.err] = true
	}
}

// TestClosedErrorKeepsRealOutcome: after Client.Close, a failure that says
// nothing of its cause (a lost connection, a released driver) is given the
// meaning ErrClientClosed, while an answer with a meaning of its own (the
// ledger does not exist) stays what it is, with its own code.
func TestClosedErrorKeepsRealOutcome(t *testing.T) {
	c := &Client{}
	c.mu.closed = true
	for _, tc := range []struct {
		err        error
		wantClosed bool
		wantCode   int
	}{
		{publicError(fmt.Errorf("open: %w", metadata.ErrNoSuchLedger)), false, -7},
		{publicError(fmt.Errorf("read: %w", ledger.ErrUnauthorized)), false, -102},
		{fmt.Errorf("read: %w", transport.ErrBookieUnavailable), true, -19},
		{errors.New("etcd client is closed"), true, -19},
	} {
		got := c.closedError(tc.err)
		if errors.Is(got, ErrClientClosed) != tc.wantClosed || Code(got) != tc.wantCode || !errors.Is(got, tc.err) {
			t.Errorf("closedError(%v) = %v (code %d), want closed=%v code %d, still matching the cause",
				tc.err, got, Code(got), tc.wantClosed, tc.wantCode)
		}
	}
	c.mu.closed = false
	if err := errors.New("x"); c.closedError(err) != err {
		t.Error("closedError changed an error of an open client")
	}
}
