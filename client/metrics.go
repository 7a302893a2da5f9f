package client

import (
	"strconv"
	"time"
)

// Op is a kind of client operation, as Metrics records it.
type Op int

// The operations the client records; String gives BookKeeper's name of
// each client stat (its Prometheus provider exports bookkeeper_client_<name>).
const (
	// OpAddEntry: an append, from AppendAsync to its acknowledgement (or
	// failure).
	OpAddEntry Op = iota
	// OpReadEntry: a read operation (one per chunk of a Read, as Java
	// counts one per readEntries call).
	OpReadEntry
	// OpLedgerCreate: CreateLedger.
	OpLedgerCreate
	// OpLedgerOpen: OpenLedger (with recovery when asked).
	OpLedgerOpen
	// OpLedgerDelete: DeleteLedger.
	OpLedgerDelete
)

// String returns BookKeeper's stat name of op: ADD_ENTRY, READ_ENTRY,
// LEDGER_CREATE, LEDGER_OPEN or LEDGER_DELETE.
func (op Op) String() string {
	switch op {
	case OpAddEntry:
		return "ADD_ENTRY"
	case OpReadEntry:
		return "READ_ENTRY"
	case OpLedgerCreate:
		return "LEDGER_CREATE"
	case OpLedgerOpen:
		return "LEDGER_OPEN"
	case OpLedgerDelete:
		return "LEDGER_DELETE"
	}
	return "Op(" + strconv.Itoa(int(op)) + ")"
}

// Metrics receives what the client measures (Config.Metrics). The client
// calls it from many goroutines at once, on its own paths (an append's
// acknowledgement, a read's completion): an implementation must be safe
// for concurrent use and must not block.
//
// The client package depends on no metrics library; package clientprom
// implements Metrics with Prometheus under BookKeeper's names
// (bookkeeper_client_ADD_ENTRY, …).
type Metrics interface {
	// Operation records one operation of kind op that took latency; err
	// is its outcome (nil: success).
	Operation(op Op, latency time.Duration, err error)
	// EntriesRead records n entries read and verified (by Read, Entries,
	// ReadUnconfirmed or a tail).
	EntriesRead(n int)
}

// NopMetrics records nothing: the client's Metrics when Config.Metrics is
// nil.
type NopMetrics struct{}

// Operation implements Metrics; it does nothing.
func (NopMetrics) Operation(Op, time.Duration, error) {}

// EntriesRead implements Metrics; it does nothing.
func (NopMetrics) EntriesRead(int) {}

// clientMetrics is the client's recording side of its Metrics: one
// recorder per operation kind.
type clientMetrics struct {
	m                            Metrics
	add, read, create, open, del opMetric
	entriesRead                  entriesCounter
}

func newMetrics(m Metrics) *clientMetrics {
	if m == nil {
		m = NopMetrics{}
	}
	return &clientMetrics{
		m:           m,
		add:         opMetric{m, OpAddEntry},
		read:        opMetric{m, OpReadEntry},
		create:      opMetric{m, OpLedgerCreate},
		open:        opMetric{m, OpLedgerOpen},
		del:         opMetric{m, OpLedgerDelete},
		entriesRead: entriesCounter{m},
	}
}

// opMetric records the operations of one kind.
type opMetric struct {
	m  Metrics
	op Op
}

// entriesCounter counts entries read.
type entriesCounter struct{ m Metrics }

// Add records n entries read.
func (e entriesCounter) Add(n float64) { e.m.EntriesRead(int(n)) }

// observe records one operation that started at start.
func observe(o opMetric, start time.Time, err error) {
	o.m.Operation(o.op, time.Since(start), err)
}
