package server

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/storage"
)

// ledgerTarget is an AdminTarget with a fixed ledger table.
type ledgerTarget struct {
	id      metadata.BookieID
	ledgers map[int64]storage.LedgerInfo
}

func (t *ledgerTarget) ID() metadata.BookieID             { return t.id }
func (t *ledgerTarget) Info() (BookieInfo, error)         { return BookieInfo{}, nil }
func (t *ledgerTarget) State() BookieState                { return BookieState{Running: true} }
func (t *ledgerTarget) SetReadOnly(ro bool) (bool, error) { return ro, nil }
func (t *ledgerTarget) TriggerGC()                        {}
func (t *ledgerTarget) GCRunning() bool                   { return false }
func (t *ledgerTarget) LedgerInfo(id int64) (storage.LedgerInfo, error) {
	if info, ok := t.ledgers[id]; ok {
		return info, nil
	}
	return storage.LedgerInfo{LastAddConfirmed: -1, LastEntryID: -1}, storage.ErrNoLedger
}

func TestLedgerInfoEndpoint(t *testing.T) {
	a := &ledgerTarget{id: "127.0.0.1:3181", ledgers: map[int64]storage.LedgerInfo{
		5: {Fenced: true, LastAddConfirmed: 8, LastEntryID: 9, HasExplicitLAC: true},
	}}
	b := &ledgerTarget{id: "127.0.0.1:3182", ledgers: map[int64]storage.LedgerInfo{5: {LastAddConfirmed: 7, LastEntryID: 9}}}
	srv := httptest.NewServer(NewAdminHandler(prometheus.NewRegistry(), func() []AdminTarget { return []AdminTarget{a, b} }, AdminOptions{}))
	defer srv.Close()
	get := func(q string) (int, LedgerInfoBody) {
		t.Helper()
		code, body := httpDo(t, "GET", srv.URL+"/api/v1/bookie/ledger/info"+q, "")
		var v LedgerInfoBody
		if code == 200 {
			if err := json.Unmarshal([]byte(body), &v); err != nil {
				t.Fatalf("%s: %v: %s", q, err, body)
			}
		}
		return code, v
	}
	if code, v := get("?ledger_id=5&bookie=127.0.0.1:3181"); code != 200 ||
		v != (LedgerInfoBody{Bookie: "127.0.0.1:3181", LedgerID: 5, Found: true, Fenced: true, LastAddConfirmed: 8, LastEntryID: 9, ExplicitLAC: true}) {
		t.Errorf("bookie a: %d %+v", code, v)
	}
	if code, v := get("?ledger=5&bookie=127.0.0.1:3182"); code != 200 || !v.Found || v.Fenced || v.LastAddConfirmed != 7 {
		t.Errorf("bookie b: %d %+v", code, v)
	}
	if code, v := get("?ledger_id=6&bookie=127.0.0.1:3182"); code != 200 || v.Found || v.Fenced || v.LastEntryID != -1 || v.LedgerID != 6 {
		t.Errorf("unknown ledger: %d %+v", code, v)
	}
	for q, want := range map[string]int{
		"?ledger_id=5":                        400, // two bookies: which?
		"?ledger_id=x&bookie=127.0.0.1:3181":  400,
		"?ledger_id=-1&bookie=127.0.0.1:3181": 400,
		"?bookie=127.0.0.1:3181":              400,
		"?ledger_id=5&bookie=127.0.0.1:9":     404,
	} {
		if code, _ := get(q); code != want {
			t.Errorf("%s: %d, want %d", q, code, want)
		}
	}
	if code, _ := httpDo(t, "PUT", srv.URL+"/api/v1/bookie/ledger/info?ledger_id=5&bookie=127.0.0.1:3181", ""); code != 405 {
		t.Errorf("PUT: %d, want 405", code)
	}
}

func (t *ledgerTarget) Ready() (bool, string)                   { return true, "" }
func (t *ledgerTarget) LastLogMarks() []LogMark                 { return nil }
func (t *ledgerTarget) DiskFiles() (map[string][]string, error) { return nil, nil }
func (t *ledgerTarget) GCDetails() GCStatus                     { return GCStatus{} }
func (t *ledgerTarget) SuspendCompaction(major, minor bool)     {}
func (t *ledgerTarget) ResumeCompaction(major, minor bool)      {}
func (t *ledgerTarget) CompactionSuspended() (bool, bool)       { return false, false }
func (t *ledgerTarget) ExpandStorage(context.Context) error     { return nil }
func (t *ledgerTarget) ServerConfig() map[string]string         { return nil }
