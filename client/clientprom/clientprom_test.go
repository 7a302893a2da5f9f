package clientprom_test

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/client/clientprom"
)

// TestNames: New registers BookKeeper's client stats (both success labels
// of each present from the start) and Folio's entries counter, and records
// into the right series.
func TestNames(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := clientprom.New(reg)
	m.Operation(client.OpAddEntry, 3*time.Millisecond, nil)
	m.Operation(client.OpAddEntry, time.Millisecond, errors.New("fenced"))
	m.Operation(client.OpLedgerOpen, 2*time.Millisecond, nil)
	m.Operation(client.Op(99), time.Millisecond, nil) // unknown: dropped
	m.EntriesRead(5)

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*dto.MetricFamily{}
	for _, f := range families {
		got[f.GetName()] = f
	}
	for _, op := range []string{"ADD_ENTRY", "READ_ENTRY", "LEDGER_CREATE", "LEDGER_OPEN", "LEDGER_DELETE"} {
		f := got["bookkeeper_client_"+op]
		if f == nil {
			t.Errorf("bookkeeper_client_%s not registered", op)
			continue
		}
		if f.GetType() != dto.MetricType_SUMMARY || len(f.GetMetric()) != 2 {
			t.Errorf("bookkeeper_client_%s: type %v with %d series, want a summary with success=false and true", op, f.GetType(), len(f.GetMetric()))
		}
	}
	count := func(name, success string) (uint64, float64) {
		for _, mt := range got[name].GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "success" && l.GetValue() == success {
					return mt.GetSummary().GetSampleCount(), mt.GetSummary().GetSampleSum()
				}
			}
		}
		t.Fatalf("%s{success=%q} missing", name, success)
		return 0, 0
	}
	if n, sum := count("bookkeeper_client_ADD_ENTRY", "true"); n != 1 || sum != 3 {
		t.Errorf("ADD_ENTRY success: %d samples summing %v ms, want 1 of 3", n, sum)
	}
	if n, _ := count("bookkeeper_client_ADD_ENTRY", "false"); n != 1 {
		t.Errorf("ADD_ENTRY failure: %d samples, want 1", n)
	}
	if n, _ := count("bookkeeper_client_LEDGER_OPEN", "true"); n != 1 {
		t.Errorf("LEDGER_OPEN success: %d samples, want 1", n)
	}
	if n, _ := count("bookkeeper_client_READ_ENTRY", "true"); n != 0 {
		t.Errorf("READ_ENTRY: %d samples, want 0", n)
	}
	if f := got["folio_client_read_entries_total"]; f == nil || f.GetMetric()[0].GetCounter().GetValue() != 5 {
		t.Errorf("folio_client_read_entries_total: %v, want 5", f)
	}
}

// TestNilRegisterer: with no registerer nothing is registered, and the
// Metrics is a collector to register later.
func TestNilRegisterer(t *testing.T) {
	m := clientprom.New(nil)
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(m); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(clientprom.New(nil)); err == nil {
		t.Error("a second client's metrics registered on the same registry without a distinguishing label")
	}
}
