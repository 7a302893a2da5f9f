package bookie

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/storage"
	"github.com/foliodb/folio/internal/wire"
)

// Responder receives the one response to a request.
//
// Contract (both sides rely on it):
//   - Handle calls Respond exactly once per request, possibly before Handle
//     returns, possibly later from another goroutine.
//   - Until Respond is called the Bookie may use the request and every byte
//     slice it aliases (the frame buffer): the caller must keep them valid
//     and unmodified. Once Respond has been called the Bookie no longer
//     touches the request.
//   - Respond must encode or copy what it needs before it returns: the
//     Bookie reuses resp and may reuse the slices it references afterwards.
//   - Respond must not block for long: it runs on storage completion
//     goroutines (a slow Respond stalls the journal's callbacks).
type Responder interface {
	Respond(resp *wire.Response)
}

// Metrics receives the bookie's measurements. Part of the bookie process
// (the HTTP admin server) implements it with Prometheus collectors; the
// default does nothing. Methods are called concurrently and must be cheap.
type Metrics interface {
	// RequestCompleted is called once per request, just before its response
	// is handed to the Responder: the kind of request, the status answered
	// and the time since Handle was called (on the bookie's Clock).
	RequestCompleted(kind RequestKind, status wire.Status, latency time.Duration)
	// ReadOnlyChanged is called when the bookie's effective read-only state
	// changes (manual switch or a failed store).
	ReadOnlyChanged(readOnly bool)
	// EntryBytes is called with the size of each entry body handed to the
	// store by an add (written) and of each entry read from it (BookKeeper's
	// WRITE_BYTES and READ_BYTES).
	EntryBytes(written bool, n int)
}

// NopMetrics is the Metrics that records nothing.
type NopMetrics struct{}

func (NopMetrics) RequestCompleted(RequestKind, wire.Status, time.Duration) {}
func (NopMetrics) ReadOnlyChanged(bool)                                     {}
func (NopMetrics) EntryBytes(bool, int)                                     {}

// RequestKind classifies requests for metrics, finer than wire.Op: reads are
// split by what they do. String returns BookKeeper's request stat name
// (BookKeeperServerStats), so "bookie_" + kind.String() gives the metric
// names existing dashboards know.
type RequestKind uint8

const (
	KindAdd RequestKind = iota
	KindRecoveryAdd
	KindRead
	KindFenceRead
	KindLongPollRead
	KindBatchRead
	KindWriteLAC
	KindReadLAC
	KindForceLedger
	KindGetBookieInfo
	KindGetListOfEntries
	KindAuth
	KindOther // START_TLS, unsupported and malformed requests, bad versions
	numKinds
)

var kindNames = [numKinds]string{
	KindAdd:              "ADD_ENTRY_REQUEST",
	KindRecoveryAdd:      "RECOVERY_ADD_ENTRY_REQUEST",
	KindRead:             "READ_ENTRY_REQUEST",
	KindFenceRead:        "READ_ENTRY_FENCE_REQUEST",
	KindLongPollRead:     "READ_ENTRY_LONG_POLL_REQUEST",
	KindBatchRead:        "BATCH_READ_ENTRY_REQUEST",
	KindWriteLAC:         "WRITE_LAC_REQUEST",
	KindReadLAC:          "READ_LAC_REQUEST",
	KindForceLedger:      "FORCE_LEDGER_REQUEST",
	KindGetBookieInfo:    "GET_BOOKIE_INFO_REQUEST",
	KindGetListOfEntries: "GET_LIST_OF_ENTRIES_OF_LEDGER_REQUEST",
	KindAuth:             "AUTH_REQUEST",
	KindOther:            "OTHER_REQUEST",
}

func (k RequestKind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return "UNKNOWN_REQUEST"
}

// Config configures a Bookie. Clock is required; every other field has a
// default.
type Config struct {
	// Clock is the time source (required): clock.Real in production (the
	// same value the store takes), a clock.Manual in tests, the
	// simulator's virtual clock in the simulator. Long-poll timeOuts
	// (AfterFunc timers) and request latencies use it.
	Clock clock.Clock
	// Logger receives structured logs (ledger and entry ids as attributes).
	// Default slog.Default().
	Logger *slog.Logger
	// Metrics receives measurements. Default NopMetrics.
	Metrics Metrics
	// MaxInFlight bounds the requests the bookie works on at once, long
	// polls excluded; a request over the bound is answered at once with
	// ETOOMANYREQUESTS. It bounds the goroutines and the memory the bookie
	// holds for requests. Default 10000.
	MaxInFlight int
	// MaxLongPolls bounds the long-poll reads waiting at once (each holds a
	// storage watch and a timer, no goroutine); over it, ETOOMANYREQUESTS.
	// Default 10000.
	MaxLongPolls int
	// MaxLongPollTimeout caps the timeOut a long-poll read may ask for. The
	// Java client gives up after its read timeout (5 s) whatever it asked,
	// so waiting longer only wastes a slot. Default 30 s.
	MaxLongPollTimeout time.Duration
	// MaxBatchReadSize caps the frame of a v2 BATCH_READ response, length
	// prefix included (Java's maxBatchReadSize). Default wire.MaxFrameSize.
	MaxBatchReadSize int64
	// RejectBatchRead answers every v2 BATCH_READ_ENTRY with EBADREQ, as
	// a bookie that does not serve batch reads: clients' tests of their
	// fallback to single reads use it. Default false.
	RejectBatchRead bool
	// Go runs fn on a new goroutine. The simulator replaces it to schedule
	// work itself. Default: the go statement.
	Go func(fn func())
	// OnReadOnlyChange, if set, is called when the effective read-only
	// state changes, so the process can move its registration. A store
	// failure is noticed (and reported here) by the first request or
	// ReadOnly/StoreFailed call after it, on that caller's goroutine: the
	// bookie starts no goroutine of its own (the bookie process also
	// watches the store and calls SetReadOnly). It must not block.
	OnReadOnlyChange func(readOnly bool)
}

const (
	defaultMaxInFlight        = 10000
	defaultMaxLongPolls       = 10000
	defaultMaxLongPollTimeout = 30 * time.Second
)

// Bookie serves the requests of any number of connections against one
// store. Its methods are safe for concurrent use.
type Bookie struct {
	store   storage.Store
	clock   clock.Clock
	log     *slog.Logger
	metrics Metrics
	cfg     Config
	spawn   func(func())

	// ctx is cancelled by Close: storage calls in progress give up, and
	// long polls answer at once.
	ctx    context.Context
	cancel context.CancelFunc

	inFlight  atomic.Int64 // requests accepted and not yet answered (long polls excluded)
	longPolls atomic.Int64 // long polls accepted and not yet answered
	polls     pollSet      // long polls waiting on a watch or a timer
	closed    atomic.Bool

	// manualReadOnly is the switch of SetReadOnly; storeFailed is set once
	// when the store reports a permanent failure. Read-only is either.
	manualReadOnly atomic.Bool
	storeFailed    atomic.Bool
	roMu           sync.Mutex // serialises read-only transitions and their callbacks
	roReported     bool       // guarded by roMu: the last state reported
}

// New returns a bookie serving store. It turns read-only when the store
// fails (store.Failed() is checked by every request that asks whether the
// bookie is read-only). Close it when done (it does not close the store).
// A configuration Validate refuses is returned as its error.
func New(store storage.Store, cfg Config) (*Bookie, error) {
	if store == nil {
		return nil, errors.New("bookie.New: no store")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NopMetrics{}
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = defaultMaxInFlight
	}
	if cfg.MaxLongPolls <= 0 {
		cfg.MaxLongPolls = defaultMaxLongPolls
	}
	if cfg.MaxLongPollTimeout <= 0 {
		cfg.MaxLongPollTimeout = defaultMaxLongPollTimeout
	}
	if cfg.MaxBatchReadSize <= 0 || cfg.MaxBatchReadSize > wire.MaxFrameSize {
		cfg.MaxBatchReadSize = wire.MaxFrameSize
	}
	if cfg.Go == nil {
		cfg.Go = func(fn func()) { go fn() }
	}
	b := &Bookie{
		store:   store,
		clock:   cfg.Clock,
		log:     cfg.Logger,
		metrics: cfg.Metrics,
		cfg:     cfg,
		spawn:   cfg.Go,
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	return b, nil
}

// Validate reports a configuration New cannot work with: Clock is
// required. Zero and negative limits take their defaults.
func (c Config) Validate() error {
	if c.Clock == nil {
		return errors.New("bookie: Config.Clock is required")
	}
	return nil
}

// checkStore notes a store that has failed for good: the first caller to
// see store.Failed() closed turns the bookie read-only and reports it.
func (b *Bookie) checkStore() bool {
	if b.storeFailed.Load() {
		return true
	}
	select {
	case <-b.store.Failed():
	default:
		return false
	}
	if b.storeFailed.CompareAndSwap(false, true) {
		b.log.Error("storage failed: the bookie is read-only from now on", "err", b.store.Err())
		b.reportReadOnly()
	}
	return true
}

// SetReadOnly switches the bookie to read-only mode (normal adds and
// WRITE_LAC get EREADONLY; reads, fences and recovery adds still work) or
// back. A failed store keeps the bookie read-only whatever this switch says.
// Part of the bookie process decides when (admin request, disk usage).
func (b *Bookie) SetReadOnly(readOnly bool) {
	b.manualReadOnly.Store(readOnly)
	b.checkStore()
	b.reportReadOnly()
}

// ReadOnly reports whether the bookie refuses normal writes.
func (b *Bookie) ReadOnly() bool {
	return b.checkStore() || b.manualReadOnly.Load()
}

// StoreFailed reports whether the store has failed for good (the bookie is
// read-only and cannot be switched back).
func (b *Bookie) StoreFailed() bool { return b.checkStore() }

func (b *Bookie) reportReadOnly() {
	b.roMu.Lock()
	defer b.roMu.Unlock()
	// The atomics, not ReadOnly: checkStore calls this function, and
	// noticing the failure here would take roMu again.
	ro := b.manualReadOnly.Load() || b.storeFailed.Load()
	if ro == b.roReported {
		return
	}
	b.roReported = ro
	b.log.Info("bookie read-only state changed", "readOnly", ro, "storeFailed", b.storeFailed.Load())
	b.metrics.ReadOnlyChanged(ro)
	if b.cfg.OnReadOnlyChange != nil {
		b.cfg.OnReadOnlyChange(ro)
	}
}

// InFlight returns the number of requests being worked on (long polls
// excluded) and the number of long polls waiting: gauges for metrics.
func (b *Bookie) InFlight() (requests, longPolls int64) {
	return b.inFlight.Load(), b.longPolls.Load()
}

// Close stops the bookie: waiting long polls are answered at once, storage
// calls in progress are told to give up, and requests handled from now on
// are answered EIO. Adds already queued in the store are answered when the
// store completes them. Close does not wait and does not close the store.
func (b *Bookie) Close() {
	if b.closed.Swap(true) {
		return
	}
	b.cancel()
	b.firePolls()
}

// Handle serves one request and answers it through respond (see Responder
// for the contract on req's lifetime). It does not block on I/O, apart from
// the store's bounded wait when its add queue is full.
func (b *Bookie) Handle(req *wire.Request, respond Responder) {
	start := b.clock.Now()
	if b.closed.Load() {
		b.answerStatus(req, respond, kindOf(req), wire.StatusIOError, start)
		return
	}
	if req.Protocol == wire.ProtocolV2 {
		b.handleV2(req, respond, start)
		return
	}
	b.handleV3(req, respond, start)
}

func (b *Bookie) handleV3(req *wire.Request, respond Responder, start time.Time) {
	op := req.Header.Op
	switch op {
	case wire.OpAuth:
		// Answered whatever the version, as Java's BookieRequestProcessor
		// does before any processor sees the request.
		b.answerAuth(req, respond, start)
		return
	case wire.OpStartTLS:
		// The upgrade is the listener's (bookie/server, tls.go): a
		// START_TLS that reaches the bookie comes from a listener without
		// TLS, or is not its connection's first frame. EBADREQ, the
		// request header echoed, as Java's bookie without TLS.
		b.answerEcho(req, respond, KindOther, wire.StatusBadRequest, start)
		return
	}
	body, ok := wire.BodyOf(op)
	if !ok || op == wire.OpBatchReadEntry || op == wire.OpRangeReadEntry || op == wire.OpRangeAddEntry {
		// Known to the enum, not served over v3 (spec §2.5, §2.5.10).
		b.answerEcho(req, respond, KindOther, wire.StatusBadRequest, start)
		return
	}
	if req.Header.Version != wire.VersionThree {
		b.answerStatus(req, respond, kindOf(req), wire.StatusBadVersion, start)
		return
	}
	if req.Has&body == 0 {
		// Java would process default values; a missing sub-message is a
		// bad request.
		b.answerEcho(req, respond, kindOf(req), wire.StatusBadRequest, start)
		return
	}
	b.dispatch(req, respond, start)
}

func (b *Bookie) handleV2(req *wire.Request, respond Responder, start time.Time) {
	switch req.Header.Op {
	case wire.OpAuth:
		b.answerAuth(req, respond, start)
		return
	case wire.OpAddEntry, wire.OpReadEntry, wire.OpBatchReadEntry:
	default:
		// The v2 decoder refuses other opcodes; nothing else can arrive.
		b.answerStatus(req, respond, KindOther, wire.StatusBadRequest, start)
		return
	}
	if !v2SupportedVersion(req.Header.Version) {
		b.answerStatus(req, respond, kindOf(req), wire.StatusBadVersion, start)
		return
	}
	b.dispatch(req, respond, start)
}

// v2SupportedVersion: the Java bookie serves v2 packet versions 0 to 2
// (wire/v2.SupportedVersion; not imported, the bookie layer sees only wire).
func v2SupportedVersion(v int32) bool { return v >= 0 && v <= 2 }

// dispatch runs a well-formed request of a supported operation.
func (b *Bookie) dispatch(req *wire.Request, respond Responder, start time.Time) {
	if req.Header.Op == wire.OpReadEntry && isLongPoll(&req.Read) && req.Protocol == wire.ProtocolV3 {
		b.startLongPoll(req, respond, start)
		return
	}
	if n := b.inFlight.Add(1); n > int64(b.cfg.MaxInFlight) {
		b.inFlight.Add(-1)
		b.answerStatus(req, respond, kindOf(req), wire.StatusTooManyRequests, start)
		return
	}
	if req.Header.Op == wire.OpAddEntry {
		b.add(req, respond, start)
		return
	}
	b.spawn(func() { b.serve(req, respond, start) })
}

// serve runs one non-add request on its own goroutine.
func (b *Bookie) serve(req *wire.Request, respond Responder, start time.Time) {
	resp := &wire.Response{}
	kind := kindOf(req)
	switch req.Header.Op {
	case wire.OpReadEntry:
		b.read(req, resp)
	case wire.OpBatchReadEntry:
		if b.cfg.RejectBatchRead {
			b.fillStatus(req, resp, wire.StatusBadRequest)
			break
		}
		b.batchRead(req, resp)
	case wire.OpWriteLAC:
		b.writeLAC(req, resp)
	case wire.OpReadLAC:
		b.readLAC(req, resp)
	case wire.OpForceLedger:
		b.forceLedger(req, resp)
	case wire.OpGetBookieInfo:
		b.getBookieInfo(req, resp)
	case wire.OpGetListOfEntriesOfLedger:
		b.listEntries(req, resp)
	default:
		b.fillStatus(req, resp, wire.StatusBadRequest)
	}
	b.finish(kind, resp, respond, start, true)
}

// finish records the request and hands its response over. counted says the
// request holds an in-flight slot.
func (b *Bookie) finish(kind RequestKind, resp *wire.Response, respond Responder, start time.Time, counted bool) {
	b.metrics.RequestCompleted(kind, resp.Status, b.clock.Now().Sub(start))
	respond.Respond(resp)
	if counted {
		b.inFlight.Add(-1)
	}
}

// kindOf classifies a request for metrics.
func kindOf(req *wire.Request) RequestKind {
	switch req.Header.Op {
	case wire.OpAddEntry:
		if req.Add.Flag == wire.AddFlagRecoveryAdd {
			return KindRecoveryAdd
		}
		return KindAdd
	case wire.OpReadEntry:
		switch {
		case req.Read.Flag == wire.ReadFlagFenceLedger:
			return KindFenceRead
		case req.Protocol == wire.ProtocolV3 && isLongPoll(&req.Read):
			return KindLongPollRead
		}
		return KindRead
	case wire.OpBatchReadEntry:
		return KindBatchRead
	case wire.OpWriteLAC:
		return KindWriteLAC
	case wire.OpReadLAC:
		return KindReadLAC
	case wire.OpForceLedger:
		return KindForceLedger
	case wire.OpGetBookieInfo:
		return KindGetBookieInfo
	case wire.OpGetListOfEntriesOfLedger:
		return KindGetListOfEntries
	case wire.OpAuth:
		return KindAuth
	}
	return KindOther
}
