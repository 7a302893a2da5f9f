// Package transport carries bookie requests over TCP: all of the client's
// socket I/O lives here (DESIGN.md §8). It keeps one connection (or a small
// pool) per bookie, connects lazily, matches responses to requests, times
// requests out and fails every request in flight when a connection is lost,
// as Java's PerChannelBookieClient does (spec/wire-protocol.md §1.4, §7).
//
// # Connections
//
// A bookie is addressed by its BookieID, which for Folio and default Java
// bookies is `host:port` (spec/wire-protocol.md §7.5). The first Send to a
// bookie starts a connection in the background; requests sent meanwhile are
// queued and written once it is up. Each connection has a writer goroutine,
// which writes every frame queued since its last write in one call
// (batching), and a reader goroutine, which decodes responses and runs their
// callbacks. A connection that fails (connect error, read or write error, a
// malformed frame) fails every request in flight on it with
// ErrBookieUnavailable; the next Send connects again. After a failed
// connect, Sends fail at once until a backoff (doubling from
// Config.ReconnectBackoff up to Config.MaxReconnectBackoff) has passed, so a
// dead bookie costs no dial per request.
//
// # Matching
//
// v3 responses are matched by (txnId, operation); txnIds come from one
// process-wide counter, as in Java.
//
// v2 responses carry no txnId. READ and ADD answers are matched by
// (ledgerId, entryId, operation), and identical outstanding requests are
// answered oldest first; BATCH_READ answers by their requestId, which Send
// takes from the txnId counter so that no two batch reads share one. A v2
// answer does not say which flags its request carried either, and the
// flags change what an answer means: a fencing READ is answered only once
// the fence is durable, while a plain READ's "no such entry" may come from a
// bookie that never fenced; a RECOVERY_ADD is stored on a fenced ledger,
// where a plain ADD gets EFENCED. Such answers must never be swapped.
//
// Contract: on one v2 connection, all outstanding requests that share a
// key are the same request on the wire, but for the HIGH_PRIORITY flag
// (which only schedules them at the bookie) and for what the caller puts
// in them: a fencing READ's master key (one ledger, one password: the
// client checks it against the metadata where the metadata has one) and
// an ADD's body (one entry; copies differ at most in the piggybacked LAC,
// and OK means "stored" either way). The transport keeps it by
// routing, with no waiting: every v2 request with recovery semantics (a
// READ or BATCH_READ with DO_FENCING, an ADD with RECOVERY_ADD) goes on a
// connection of its own to the bookie (the recovery lane, one per pool
// slot, opened on first use), everything else on the plain lane. So a
// plain-lane READ never fences (v2 drops the long-poll fields: a long poll
// is a plain READ on the wire) and a plain-lane ADD is never a recovery
// add; on the recovery lane every READ fences and every ADD is a recovery
// add. (The other v2 ops cannot collide: READ_LAC, the v3 op, is not
// encodable in v2, and a v2 LAC read is a READ of entry -1, plain or
// fencing, so the lanes separate those too.)
//
// Lanes rather than queueing the second request until the first is
// answered: a request that times out leaves its answer in flight, so a late
// plain answer would still complete a fencing READ sent after the timeout,
// unless the timed-out request held its key until its answer came, for ever
// if the bookie dropped it. Lanes need no waiting, so nothing can deadlock
// or leak: connection loss, timeouts and Close work on each lane exactly as
// on a single connection, and a lane's loss fails only its own requests.
//
// Why identical requests may share a key: oldest-first matching on one
// in-order connection gives the k-th answer to the k-th request, which the
// bookie had received before writing that answer, and every answer is one
// to the same request on the wire. Only after a timeout can a late answer
// complete a newer identical request and predate it (Java's v2 client does
// the same). For a fencing READ that is harmless: the answer was given after
// the bookie had durably fenced the ledger, so no writer's add reached it
// later and "no such entry" still proves that this bookie acknowledged no
// such add. For an ADD, OK still means the bookie stores the entry. For a
// plain READ the answer is an entry (immutable), a lower bound of the LAC,
// or a "no such entry" that may be older than the request: at worst a read
// reports ErrNoSuchEntry where a fresh answer would have found the entry,
// never wrong data, and recovery never counts plain answers.
//
// # TLS
//
// With Config.TLS a connection is upgraded before any request goes out, as
// Java's PerChannelBookieClient does (spec/security.md §1): a v3 START_TLS
// (also when the connection then speaks v2), an EOK answer, then the TLS
// handshake with the bookie as server, all within Config.StartTLSTimeout.
// Requests sent meanwhile wait in the queue. A bookie that answers EBADREQ
// (no TLS configured), any other status, or a failed handshake fails the
// connection with ErrTLS: the client never falls back to plaintext. A
// bookie that refuses the client's certificate after the handshake
// (BookieAuthZFactory: a START_TLS answer with EIO) fails the connection
// with ErrTLS and wire.ErrUnauthorized, the error Java's client reports
// for such a bookie's EUA answers.
//
// # Timeouts
//
// Every request has a deadline: Config.AddTimeout for ADD_ENTRY,
// Config.ReadTimeout for everything else (Java's addEntryTimeoutSec and
// readEntryTimeoutSec). A sweeper checks deadlines every Config.TimeoutTick
// and fails the expired requests with ErrTimeout; a late response is
// dropped.
//
// # Locks
//
// One mutex per bookie connection guards its request table and output
// buffer. Encoding happens under it (no I/O); reads, writes and dials happen
// outside it; callbacks are never run with it held.
package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/tlsconf"
	"github.com/foliodb/folio/internal/wire"
	"github.com/foliodb/folio/internal/wire/codec"
	v2 "github.com/foliodb/folio/internal/wire/v2"
	v3 "github.com/foliodb/folio/internal/wire/v3"
)

// Errors given to callbacks. Each is wrapped with the bookie and the cause.
var (
	// ErrBookieUnavailable: the request could not be sent, or its connection
	// was lost before the answer came (Java's BookieHandleNotAvailable, -8).
	// The outcome of the request is unknown.
	ErrBookieUnavailable = errors.New("bookie not available")
	// ErrTimeout: no answer within the request's timeout (Java's
	// TimeoutException, -23). The outcome is unknown.
	ErrTimeout = errors.New("bookie request timed out")
	// ErrClosed: the transport was closed.
	ErrClosed = errors.New("transport closed")
	// ErrTLS: the connection could not be secured as configured (see TLS
	// in the package doc); it comes wrapped with ErrBookieUnavailable.
	ErrTLS = errors.New("bookie connection security failed")
)

// Defaults of Config (Java's ClientConfiguration defaults where it has one).
const (
	DefaultConnectTimeout      = 10 * time.Second
	DefaultAddTimeout          = 5 * time.Second
	DefaultReadTimeout         = 5 * time.Second
	DefaultReconnectBackoff    = 100 * time.Millisecond
	DefaultMaxReconnectBackoff = 5 * time.Second
	DefaultTimeoutTick         = 100 * time.Millisecond
	// DefaultStartTLSTimeout is Java's startTLSTimeoutSecs.
	DefaultStartTLSTimeout = 10 * time.Second
)

// Config configures a Transport. Zero values take the defaults above.
type Config struct {
	// Protocol is the encoding every connection speaks: wire.ProtocolV3
	// (the default, as in Java) or wire.ProtocolV2 (useV2WireProtocol).
	Protocol wire.Protocol
	// Dialer opens connections; nil means a net.Dialer. Tests use it to cut
	// the client off from chosen bookies.
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)
	// ConnectTimeout bounds one dial (Java's clientConnectTimeoutMillis).
	ConnectTimeout time.Duration
	// AddTimeout bounds an ADD_ENTRY; ReadTimeout every other request.
	AddTimeout, ReadTimeout time.Duration
	// ConnectionsPerBookie is the pool size per bookie (Java's
	// numChannelsPerBookie, default 1); requests pick a connection by the
	// key given to Send (the ledger id), so one ledger's requests stay on
	// one connection in order.
	ConnectionsPerBookie int
	// ReconnectBackoff is the wait after a failed connect before the next
	// attempt; it doubles per consecutive failure up to MaxReconnectBackoff.
	ReconnectBackoff, MaxReconnectBackoff time.Duration
	// TimeoutTick is how often deadlines are checked (Java's
	// timeoutMonitorIntervalSec); a request times out up to one tick late.
	TimeoutTick time.Duration
	// Logger receives connection events; nil discards them.
	Logger *slog.Logger
	// TLS, if set, secures every connection (see TLS in the package doc).
	// Each connection uses tlsconf.ForHost(TLS, host of the address dialled).
	TLS *tls.Config
	// StartTLSTimeout bounds the START_TLS exchange and the handshake
	// (Java's startTLSTimeoutSecs).
	StartTLSTimeout time.Duration
	// MaxFrameSize is the largest frame sent or accepted, length prefix
	// included (Java's nettyMaxFrameSizeBytes; 0: wire.MaxFrameSize). A
	// request over it fails before it is sent, with wire.ErrFrameTooLarge;
	// an answer over it closes the connection.
	MaxFrameSize int
	// Resolve maps a bookie id to the host:port to dial; it is called at
	// every connect (so a bookie that moved is found at its new address
	// on reconnect), with the connect's context. Nil: the id is the
	// address (host:port), as for every bookie without a custom id. An
	// error fails the connect like a refused dial (ErrBookieUnavailable).
	Resolve func(ctx context.Context, bookie string) (string, error)
	// Clock reads the time for request deadlines and the reconnect
	// backoff, and ticks the timeout sweeper (every TimeoutTick on it);
	// nil means the wall clock. So a test with a clock.Manual decides when
	// a request times out (or, with a TimeoutTick it never reaches, sweeps
	// itself). Dial and write deadlines are on the wall clock (they are the
	// socket's).
	Clock clock.Clock
}

func (c *Config) setDefaults() {
	if c.Protocol == 0 {
		c.Protocol = wire.ProtocolV3
	}
	if c.Dialer == nil {
		var d net.Dialer
		c.Dialer = d.DialContext
	}
	setDuration(&c.ConnectTimeout, DefaultConnectTimeout)
	setDuration(&c.AddTimeout, DefaultAddTimeout)
	setDuration(&c.ReadTimeout, DefaultReadTimeout)
	setDuration(&c.ReconnectBackoff, DefaultReconnectBackoff)
	setDuration(&c.MaxReconnectBackoff, DefaultMaxReconnectBackoff)
	setDuration(&c.TimeoutTick, DefaultTimeoutTick)
	setDuration(&c.StartTLSTimeout, DefaultStartTLSTimeout)
	if c.ConnectionsPerBookie <= 0 {
		c.ConnectionsPerBookie = 1
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
}

func setDuration(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

// ResponseFunc receives the answer to one request: exactly one call, with
// either a response or an error (ErrBookieUnavailable, ErrTimeout,
// ErrClosed or an encoding error, wrapped). resp and every byte slice in it
// are valid only during the call: copy what you keep. The call runs on the
// connection's reader goroutine, the sweeper, or, for a request that fails
// before it is queued, the goroutine calling Send. It must not block.
type ResponseFunc func(resp *wire.Response, err error)

// Handler receives answers like a ResponseFunc, with the bookie the request
// went to and the tag given to SendTagged: one Handler (a long-lived value,
// typically a pointer) serves many requests, so a caller that sends many
// requests needs no closure per request. Its contract is ResponseFunc's.
type Handler interface {
	HandleResponse(bookie string, tag int64, resp *wire.Response, err error)
}

// txnIDs is the process-wide v3 txnId counter (Java's static
// PerChannelBookieClient.txnIdGenerator).
var txnIDs atomic.Uint64

// Transport is a set of connections to bookies. It is safe for concurrent
// use.
type Transport struct {
	cfg Config
	log *slog.Logger

	mu struct {
		sync.Mutex
		peers  map[peerKey]*peer
		closed bool
	}
	stop chan struct{}
	wg   sync.WaitGroup
}

type peerKey struct {
	addr string
	slot int
	lane lane
}

// lane separates the v2 requests whose answers must not be matched to each
// other (see Matching in the package doc).
type lane uint8

const (
	lanePlain lane = iota
	// laneRecovery carries the v2 fencing reads and recovery adds.
	laneRecovery
)

// laneOf returns the lane req travels on. Under v3 every request is on the
// plain lane: txnIds match answers whatever the flags.
func laneOf(proto wire.Protocol, req *wire.Request) lane {
	if proto != wire.ProtocolV2 {
		return lanePlain
	}
	switch req.Header.Op {
	case wire.OpReadEntry:
		if req.Read.Flag == wire.ReadFlagFenceLedger {
			return laneRecovery
		}
	case wire.OpBatchReadEntry:
		if req.BatchRead.Fence {
			return laneRecovery
		}
	case wire.OpAddEntry:
		if req.Add.Flag == wire.AddFlagRecoveryAdd {
			return laneRecovery
		}
	}
	return lanePlain
}

// New returns a Transport; it starts its timeout sweeper.
func New(cfg Config) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	t := &Transport{cfg: cfg, log: cfg.Logger, stop: make(chan struct{})}
	t.mu.peers = map[peerKey]*peer{}
	t.wg.Add(1)
	go t.sweepLoop()
	return t, nil
}

// Validate reports the first setting New cannot work with: a protocol
// other than v2 or v3 (0 is the default, v3), a negative duration or
// pool size, or a MaxFrameSize outside wire's limits (0 is the default).
// Zero values take their defaults.
func (c Config) Validate() error {
	if c.Protocol != 0 && c.Protocol != wire.ProtocolV2 && c.Protocol != wire.ProtocolV3 {
		return fmt.Errorf("transport: Config.Protocol %v: want v2 or v3", c.Protocol)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"ConnectTimeout", c.ConnectTimeout}, {"AddTimeout", c.AddTimeout}, {"ReadTimeout", c.ReadTimeout},
		{"ReconnectBackoff", c.ReconnectBackoff}, {"MaxReconnectBackoff", c.MaxReconnectBackoff},
		{"TimeoutTick", c.TimeoutTick}, {"StartTLSTimeout", c.StartTLSTimeout},
	} {
		if d.v < 0 {
			return fmt.Errorf("transport: Config.%s %v is negative", d.name, d.v)
		}
	}
	if c.ConnectionsPerBookie < 0 {
		return fmt.Errorf("transport: Config.ConnectionsPerBookie %d is negative", c.ConnectionsPerBookie)
	}
	if c.MaxFrameSize != 0 {
		if err := wire.CheckFrameLimit(c.MaxFrameSize); err != nil {
			return fmt.Errorf("transport: Config.MaxFrameSize: %w", err)
		}
	}
	return nil
}

// Protocol returns the protocol the connections speak.
func (t *Transport) Protocol() wire.Protocol { return t.cfg.Protocol }

// Close fails every outstanding request with ErrClosed, closes every
// connection and waits for the sweeper. Sends after Close fail with
// ErrClosed. Idempotent.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		return nil
	}
	t.mu.closed = true
	peers := make([]*peer, 0, len(t.mu.peers))
	for _, p := range t.mu.peers {
		peers = append(peers, p)
	}
	t.mu.Unlock()
	close(t.stop)
	for _, p := range peers {
		p.close()
	}
	t.wg.Wait()
	return nil
}

// Send sends req to bookie (a BookieID, `host:port`) and calls cb with the
// answer. key chooses the connection of the pool (pass the ledger id); over
// v2, fencing reads and recovery adds take a connection of their own (see
// Matching in the package doc), so only requests of one kind stay in order.
// Send sets req.Header's version and, for v3 and for a v2 BATCH_READ's
// requestId, its txnId; the request is
// encoded before Send returns, so req and the slices in it may be reused at
// once. cb may run before Send returns.
func (t *Transport) Send(bookie string, key int64, req *wire.Request, cb ResponseFunc) {
	for {
		p, err := t.peer(bookie, key, laneOf(t.cfg.Protocol, req))
		if err != nil {
			cb(nil, err)
			return
		}
		if p.send(req, cb, nil, 0) {
			return
		}
		// Prune retired p between peer and send: the next peer call makes
		// a fresh one. The loop ends: each retry follows a Prune that
		// removed the peer this Send had looked up, and Prunes come from
		// the caller's membership changes, a handful per bookie joining
		// or leaving; a peer retires only while it has no request
		// outstanding, so a Send cannot livelock against Prunes unless
		// they run back to back for ever.
	}
}

// SendTagged is Send with an answer to h instead of a callback: h gets
// exactly one HandleResponse call with bookie and tag, as cb would get its
// call. It allocates nothing per request in the steady state (the request
// record is pooled), which matters on the add path (issue #22).
func (t *Transport) SendTagged(bookie string, key int64, req *wire.Request, h Handler, tag int64) {
	for {
		p, err := t.peer(bookie, key, laneOf(t.cfg.Protocol, req))
		if err != nil {
			h.HandleResponse(bookie, tag, nil, err)
			return
		}
		if p.send(req, nil, h, tag) {
			return
		}
		// Retired by a concurrent Prune: retry on a fresh peer (see Send
		// for why this ends).
	}
}

// errRetired ends the connection of a peer Prune retired.
var errRetired = errors.New("connection closed: the bookie left the cluster and the client has no request outstanding on it")

// Prune forgets every connection slot (and its reconnect backoff) of the
// bookies keep reports false for, closing its connection, provided no
// request is outstanding on it and its reconnect backoff is not in use; a
// slot kept for either reason is taken by a later Prune once its requests
// are answered or timed out and its backoff is idle. It returns the number
// of slots forgotten. A later Send to a pruned bookie connects afresh, as
// the first Send did, so Prune never fails a request: it bounds the
// per-bookie state of a client that talked to bookies that are gone (issue
// #22 §4; with Kubernetes, ids change with addresses). keep is called with
// the transport's lock held: it must not call back into the Transport.
//
// A slot's backoff is in use while its next connect is not yet allowed
// (a Send fails fast instead of dialing), or while its connects are
// failing (failures > 0) and it was sent to since the previous Prune: a
// dead bookie that readers still ask (a read handle, a recovery, a long
// poll) keeps failing fast, and its backoff keeps growing, whatever the
// membership does. A failing slot nobody asks any more goes at a later
// Prune (the first that finds its wait over and it not sent to since the
// previous one that looked at it), so dead bookies do not accumulate.
func (t *Transport) Prune(keep func(bookie string) bool) int {
	now := t.cfg.Clock.Now()
	t.mu.Lock()
	var retired []*session
	n := 0
	for k, p := range t.mu.peers {
		if keep(k.addr) {
			continue
		}
		s, ok := p.retire(now)
		if !ok {
			continue
		}
		delete(t.mu.peers, k)
		n++
		if s != nil {
			retired = append(retired, s)
		}
	}
	t.mu.Unlock()
	for _, s := range retired {
		s.fail(errRetired, false) // no request outstanding: fails nothing
	}
	return n
}

// Registered tells the transport that bookie has registered (again): the
// reconnect backoff of its connection slots, kept from connects that
// failed while it was away, is dropped, so the next Send dials at once.
// Registration is the bookie's own word that it serves: without this a
// bookie back from a restart would fail fast for what is left of a
// backoff (up to MaxReconnectBackoff) that its absence earned, and
// writers would replace it meanwhile.
func (t *Transport) Registered(bookie string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, p := range t.mu.peers {
		if k.addr != bookie {
			continue
		}
		p.mu.Lock()
		p.failures, p.retryAt = 0, time.Time{}
		p.mu.Unlock()
	}
}

// Bookies returns the bookies the transport holds connection state for,
// sorted (tests of Prune).
func (t *Transport) Bookies() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for k := range t.mu.peers {
		out = append(out, k.addr)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// retire marks p retired if no request is outstanding on it and its
// reconnect backoff is not in use at now (see Prune), and returns its live
// session (to close) and true; false leaves p as it was, save that the
// sent-since-Prune mark is cleared. A send that finds p retired (it took p
// from the map before Prune removed it) reports false, and Transport.Send
// asks for a fresh peer. Lock order: Transport.mu, then peer.mu (nothing
// takes them the other way round).
func (p *peer) retire(now time.Time) (*session, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sent := p.sentSincePrune
	p.sentSincePrune = false
	if s := p.sess; s != nil && len(s.pending) > 0 {
		return nil, false
	}
	if now.Before(p.retryAt) || p.failures > 0 && sent {
		return nil, false
	}
	p.retired = true
	return p.sess, true
}

func (t *Transport) peer(bookie string, key int64, ln lane) (*peer, error) {
	slot := 0
	if n := t.cfg.ConnectionsPerBookie; n > 1 {
		slot = int(uint64(key) % uint64(n))
	}
	pk := peerKey{bookie, slot, ln}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return nil, ErrClosed
	}
	if p := t.mu.peers[pk]; p != nil {
		return p, nil
	}
	// Without a resolver the BookieID is the address (spec/wire-protocol.md
	// §7.5): check it once, so that a bad id fails here and not in a dial
	// loop.
	if _, _, err := net.SplitHostPort(bookie); err != nil && t.cfg.Resolve == nil {
		return nil, fmt.Errorf("%w: %s: bookie id is not host:port: %v", ErrBookieUnavailable, bookie, err)
	}
	p := &peer{t: t, addr: bookie}
	t.mu.peers[pk] = p
	return p, nil
}

func (t *Transport) sweepLoop() {
	defer t.wg.Done()
	tick := t.cfg.Clock.NewTicker(t.cfg.TimeoutTick)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C():
			t.sweep(t.cfg.Clock.Now())
		}
	}
}

// sweep fails the requests whose deadline has passed.
func (t *Transport) sweep(now time.Time) {
	t.mu.Lock()
	peers := make([]*peer, 0, len(t.mu.peers))
	for _, p := range t.mu.peers {
		peers = append(peers, p)
	}
	t.mu.Unlock()
	var expired []*request
	for _, p := range peers {
		expired = p.expire(now, expired[:0])
		for _, r := range expired {
			r.finish(p.addr, nil, fmt.Errorf("%w: %s %v after %v", ErrTimeout, p.addr, r.key.op, t.timeout(r.key.op)))
		}
	}
}

func (t *Transport) timeout(op wire.Op) time.Duration {
	if op == wire.OpAddEntry {
		return t.cfg.AddTimeout
	}
	return t.cfg.ReadTimeout
}

// reqKey identifies a response: (txnId, op) for v3, (ledgerId, entryId, op)
// for v2 (batch reads: (requestId, 0, op)).
type reqKey struct {
	a, b int64
	op   wire.Op
}

// request is one outstanding request.
//
// Lifetime (records are pooled, reqPool): send takes a record from the
// pool and links it into its session's table (pending) under the peer's
// mutex. It leaves the table exactly once, under that same mutex, by
// takeLocked (its answer came), removeLocked (expire: it timed out) or
// drainLocked (the session failed); whoever unlinked it owns it alone from
// then on, calls finish (which runs the callback once and puts the record
// back into the pool) and never touches it again. The session's deadline
// queues do not own records: they hold (record, gen) pairs, and unlinking
// bumps gen under the mutex, so an entry whose gen no longer matches is a
// record that has left the table (and may already serve another request,
// even on another peer) and is skipped without reading anything else of
// it. A matching gen, read under the mutex, means the record is still in
// this session's table, where nobody else can take it while the mutex is
// held.
type request struct {
	key reqKey
	// The answer goes to cb, or, when cb is nil, to h with tag.
	cb  ResponseFunc
	h   Handler
	tag int64
	// next chains v2 requests with the same key, oldest first.
	next *request
	// gen counts the times the record left a table (see above); written
	// under the owning peer's mutex, atomic because a stale deadline
	// entry of another peer may read it under that other peer's mutex.
	gen atomic.Uint64
}

// reqPool recycles request records (see request for their lifetime).
var reqPool = sync.Pool{New: func() any { return new(request) }}

// newRequest returns a zeroed record from the pool.
func newRequest(key reqKey, cb ResponseFunc, h Handler, tag int64) *request {
	r := reqPool.Get().(*request)
	r.key, r.cb, r.h, r.tag, r.next = key, cb, h, tag, nil
	return r
}

// unlinkedLocked marks r as out of its table: its deadline entries go
// stale. Called under the peer's mutex by whoever unlinked r.
func (r *request) unlinkedLocked() {
	r.next = nil
	r.gen.Add(1)
}

// finish delivers the answer of r, which the caller unlinked and so owns,
// and recycles r. The record's fields are read before the callback runs
// and the record goes back to the pool first: nothing reads it afterwards,
// and a callback that sends again (re-entrant sends) may get it back.
func (r *request) finish(bookie string, resp *wire.Response, err error) {
	cb, h, tag := r.cb, r.h, r.tag
	r.cb, r.h = nil, nil
	reqPool.Put(r)
	if cb != nil {
		cb(resp, err)
		return
	}
	h.HandleResponse(bookie, tag, resp, err)
}

// deadlineEntry is a request in its session's deadline queue: valid while
// r.gen is still gen (see request).
type deadlineEntry struct {
	r        *request
	gen      uint64
	deadline time.Time
}

// peer is one pooled connection slot to a bookie; it holds the current
// session (connection) if any.
type peer struct {
	t    *Transport
	addr string

	mu sync.Mutex
	// sess is the live session (connecting or connected), nil if none.
	sess *session
	// failures counts consecutive failed connects; retryAt is when the
	// next connect may start.
	failures int
	retryAt  time.Time
	closed   bool
	// retired: Prune removed p from the transport's map; sends go to a
	// fresh peer instead (send reports false).
	retired bool
	// sentSincePrune: a send came since the last Prune that looked at p
	// without keep (it keeps a failing slot that is still asked, see
	// Prune).
	sentSincePrune bool
}

// session is one TCP connection's lifetime. Fields are guarded by peer.mu
// except where noted.
type session struct {
	p       *peer
	enc     *codec.ClientCodec
	pending map[reqKey]*request
	// queues hold requests in deadline order per timeout class (add, other),
	// completed ones included until the sweeper pops them.
	queues [2]fifo
	out    []byte
	conn   net.Conn
	closed bool
	// noBatch: the bookie answered a BATCH_READ_ENTRY on this connection
	// with EBADREQ (it does not serve batch reads); later ones fail at once
	// without being sent. A new connection asks again (the bookie may have
	// been upgraded meanwhile).
	noBatch bool
	// wake (capacity 1) tells the writer there is output; done is closed
	// when the session ends.
	wake chan struct{}
	done chan struct{}
}

// send queues req; its answer goes to cb, or with cb nil to h with tag. It
// reports false, having done nothing, if p is retired (Prune).
func (p *peer) send(req *wire.Request, cb ResponseFunc, h Handler, tag int64) bool {
	t := p.t
	now := t.cfg.Clock.Now()
	// fail answers a request that never got a record.
	fail := func(err error) {
		if cb != nil {
			cb(nil, err)
		} else {
			h.HandleResponse(p.addr, tag, nil, err)
		}
	}
	p.mu.Lock()
	if p.retired {
		p.mu.Unlock()
		return false
	}
	if p.closed {
		p.mu.Unlock()
		fail(ErrClosed)
		return true
	}
	p.sentSincePrune = true
	s := p.sess
	if s == nil {
		if now.Before(p.retryAt) {
			wait := p.retryAt.Sub(now)
			p.mu.Unlock()
			fail(fmt.Errorf("%w: %s: connect failed, next attempt in %v", ErrBookieUnavailable, p.addr, wait.Round(time.Millisecond)))
			return true
		}
		s = p.newSessionLocked()
	}
	if req.Header.Op == wire.OpBatchReadEntry && s.noBatch {
		p.mu.Unlock()
		fail(fmt.Errorf("%s: %w: the bookie answered EBADREQ to a batch read on this connection", p.addr, wire.ErrBadRequest))
		return true
	}
	if t.cfg.Protocol == wire.ProtocolV3 {
		req.Header.Version = wire.VersionThree
		req.Header.TxnID = txnIDs.Add(1)
	} else {
		req.Header.Version = v2.CurrentVersion
		if req.Header.Op == wire.OpBatchReadEntry {
			// The requestId is the batch read's whole key: never let a
			// caller's reuse of one make two answers interchangeable.
			req.Header.TxnID = txnIDs.Add(1)
		}
	}
	out, err := s.enc.EncodeRequest(s.out, req)
	if err != nil {
		p.mu.Unlock()
		fail(fmt.Errorf("%s: encode %v: %w", p.addr, req.Header.Op, err))
		return true
	}
	s.out = out
	s.addLocked(newRequest(requestKey(t.cfg.Protocol, req), cb, h, tag), now.Add(t.timeout(req.Header.Op)))
	p.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return true
}

func requestKey(proto wire.Protocol, req *wire.Request) reqKey {
	op := req.Header.Op
	if proto == wire.ProtocolV3 {
		return reqKey{a: int64(req.Header.TxnID), op: op}
	}
	switch op {
	case wire.OpAddEntry:
		return reqKey{req.Add.LedgerID, req.Add.EntryID, op}
	case wire.OpReadEntry:
		return reqKey{req.Read.LedgerID, req.Read.EntryID, op}
	case wire.OpBatchReadEntry:
		return reqKey{a: int64(req.Header.TxnID), op: op}
	}
	return reqKey{op: op}
}

func responseKey(resp *wire.Response) reqKey {
	op := resp.Header.Op
	if resp.Protocol == wire.ProtocolV3 {
		return reqKey{a: int64(resp.Header.TxnID), op: op}
	}
	switch op {
	case wire.OpAddEntry:
		return reqKey{resp.Add.LedgerID, resp.Add.EntryID, op}
	case wire.OpReadEntry:
		return reqKey{resp.Read.LedgerID, resp.Read.EntryID, op}
	case wire.OpBatchReadEntry:
		return reqKey{a: int64(resp.Header.TxnID), op: op}
	}
	return reqKey{op: op}
}

func (p *peer) newSessionLocked() *session {
	enc, err := codec.NewClientCodec(p.t.cfg.Protocol, false)
	if err != nil {
		panic(fmt.Sprintf("transport: %v", err)) // unreachable: New validated Config.Protocol
	}
	enc.SetMaxFrameSize(p.t.cfg.MaxFrameSize)
	s := &session{
		p:       p,
		enc:     enc,
		pending: map[reqKey]*request{},
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	p.sess = s
	p.t.wg.Add(1)
	go s.run()
	return s
}

func (s *session) addLocked(r *request, deadline time.Time) {
	if s.p.t.cfg.Protocol == wire.ProtocolV3 {
		// v3 keys hold a txnId from the process-wide counter: never two
		// outstanding with one key, so no chain to look up (a map read
		// per request saved on the add path).
		s.pending[r.key] = r
	} else if prev := s.pending[r.key]; prev != nil {
		for prev.next != nil {
			prev = prev.next
		}
		prev.next = r
	} else {
		s.pending[r.key] = r
	}
	s.queues[class(r.key.op)].push(deadlineEntry{r: r, gen: r.gen.Load(), deadline: deadline})
}

// takeLocked removes and returns the oldest request with key k.
func (s *session) takeLocked(k reqKey) *request {
	r := s.pending[k]
	if r == nil {
		return nil
	}
	if r.next != nil {
		s.pending[k] = r.next
	} else {
		delete(s.pending, k)
	}
	r.unlinkedLocked()
	return r
}

// removeLocked unlinks r (which is outstanding) from the table.
func (s *session) removeLocked(r *request) {
	head := s.pending[r.key]
	switch {
	case head == r:
		if r.next != nil {
			s.pending[r.key] = r.next
		} else {
			delete(s.pending, r.key)
		}
	case head != nil:
		for prev := head; prev.next != nil; prev = prev.next {
			if prev.next == r {
				prev.next = r.next
				break
			}
		}
	}
	r.unlinkedLocked()
}

func class(op wire.Op) int {
	if op == wire.OpAddEntry {
		return 0
	}
	return 1
}

// expire collects the live session's expired requests into dst, removing
// them from the table, and drops completed requests from the queue heads.
func (p *peer) expire(now time.Time, dst []*request) []*request {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.sess
	if s == nil {
		return dst
	}
	for i := range s.queues {
		q := &s.queues[i]
		for q.len() > 0 {
			e := q.peek()
			live := e.r.gen.Load() == e.gen // still in the table (see request)
			if live && e.deadline.After(now) {
				break
			}
			q.pop()
			if live {
				s.removeLocked(e.r)
				dst = append(dst, e.r)
			}
		}
	}
	return dst
}

// run dials, then writes until the session ends.
func (s *session) run() {
	p, t := s.p, s.p.t
	defer t.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), t.cfg.ConnectTimeout)
	go func() {
		select {
		case <-s.done:
			cancel() // the transport closed while dialing
		case <-ctx.Done():
		}
	}()
	addr := p.addr
	if t.cfg.Resolve != nil {
		a, err := t.cfg.Resolve(ctx, p.addr)
		if err != nil {
			cancel()
			s.fail(fmt.Errorf("resolve the bookie id: %w", err), true)
			return
		}
		addr = a
	}
	conn, err := t.cfg.Dialer(ctx, "tcp", addr)
	cancel()
	if err != nil {
		if addr != p.addr {
			err = fmt.Errorf("%s: %w", addr, err)
		}
		s.fail(fmt.Errorf("connect: %w", err), true)
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	p.mu.Lock()
	if s.closed {
		p.mu.Unlock()
		conn.Close()
		return
	}
	// s.conn stays the socket: fail closes it, which also ends a TLS
	// exchange in progress (and sends no close_notify that could block).
	s.conn = conn
	p.mu.Unlock()
	stream := conn
	if t.cfg.TLS != nil {
		tc, err := s.startTLS(conn, addr)
		if err != nil {
			s.fail(err, true)
			return
		}
		stream = tc
	}
	p.mu.Lock()
	p.failures = 0
	p.mu.Unlock()
	t.log.Debug("connected to bookie", "bookie", p.addr, "protocol", t.cfg.Protocol, "tls", t.cfg.TLS != nil)
	t.wg.Add(1)
	go s.readLoop(stream)
	s.writeLoop(stream)
}

// startTLS upgrades a new connection to addr (see TLS in the package doc) and
// returns the TLS session. Errors wrap ErrTLS.
func (s *session) startTLS(conn net.Conn, addr string) (net.Conn, error) {
	t := s.p.t
	_ = conn.SetDeadline(time.Now().Add(t.cfg.StartTLSTimeout))
	txn := txnIDs.Add(1)
	req := wire.Request{Protocol: wire.ProtocolV3, Has: wire.BodyStartTLS,
		Header: wire.Header{Version: wire.VersionThree, Op: wire.OpStartTLS, TxnID: txn}}
	enc, _ := codec.NewClientCodec(wire.ProtocolV3, false)
	out, err := enc.EncodeRequest(nil, &req)
	if err != nil {
		return nil, fmt.Errorf("%w: encode START_TLS: %w", ErrTLS, err)
	}
	if _, err := conn.Write(out); err != nil {
		return nil, fmt.Errorf("%w: send START_TLS: %w", ErrTLS, err)
	}
	br := bufio.NewReaderSize(conn, 4096)
	payload, err := wire.NewFrameReader(br).Next()
	if err != nil {
		return nil, fmt.Errorf("%w: no answer to START_TLS: %w", ErrTLS, err)
	}
	var resp wire.Response
	if err := v3.DecodeResponse(payload, &resp); err != nil {
		return nil, fmt.Errorf("%w: the answer to START_TLS is not a v3 response: %w", ErrTLS, err)
	}
	if resp.Header.Op != wire.OpStartTLS || resp.Header.TxnID != txn {
		return nil, fmt.Errorf("%w: expected the answer to START_TLS (txn %d), got %v txn %d", ErrTLS, txn, resp.Header.Op, resp.Header.TxnID)
	}
	switch resp.Status {
	case wire.StatusOK:
	case wire.StatusBadRequest:
		return nil, fmt.Errorf("%w: the bookie does not have TLS configured (it answered START_TLS with EBADREQ); refusing to continue in plaintext", ErrTLS)
	default:
		return nil, fmt.Errorf("%w: the bookie refused START_TLS with %v", ErrTLS, resp.Status)
	}
	// The host verified is the one dialled (for a custom bookie id, the
	// host of its resolved address).
	host, _, _ := net.SplitHostPort(addr)
	// Bytes after the answer, if the bookie sent any, belong to TLS.
	tc := tls.Client(&bufferedConn{Conn: conn, r: br}, tlsconf.ForHost(t.cfg.TLS, host))
	if err := tc.Handshake(); err != nil {
		return nil, fmt.Errorf("%w: TLS handshake: %w", ErrTLS, err)
	}
	_ = conn.SetDeadline(time.Time{})
	return tc, nil
}

// bufferedConn is a net.Conn whose reads come through a bufio.Reader that
// may hold bytes already read from it.
type bufferedConn struct {
	net.Conn
	r io.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

func (s *session) writeLoop(conn net.Conn) {
	p := s.p
	var buf []byte
	for {
		select {
		case <-s.done:
			return
		case <-s.wake:
		}
		p.mu.Lock()
		if s.closed {
			p.mu.Unlock()
			return
		}
		buf, s.out = s.out, buf[:0]
		p.mu.Unlock()
		if len(buf) == 0 {
			continue
		}
		// A bookie that stops reading (SIGSTOP, full buffers) must not hang
		// the writer forever: bound each write by the add timeout.
		_ = conn.SetWriteDeadline(time.Now().Add(p.t.cfg.AddTimeout))
		if _, err := conn.Write(buf); err != nil {
			s.fail(fmt.Errorf("write: %w", err), false)
			return
		}
		if cap(buf) > 4<<20 {
			buf = nil // do not keep a burst's buffer for ever
		}
	}
}

func (s *session) readLoop(conn net.Conn) {
	p := s.p
	defer p.t.wg.Done()
	fr := wire.NewFrameReaderMax(bufio.NewReaderSize(conn, 64<<10), p.t.cfg.MaxFrameSize)
	// With TLS, a START_TLS answer (v3, also on a v2 connection) can
	// still come: the bookie's refusal of this client after the handshake.
	dec, err := codec.NewClientCodec(p.t.cfg.Protocol, p.t.cfg.TLS != nil)
	if err != nil {
		panic(fmt.Sprintf("transport: %v", err)) // unreachable: New validated Config.Protocol
	}
	var resp wire.Response
	for {
		payload, err := fr.Next()
		if err != nil {
			var oe *net.OpError
			if errors.As(err, &oe) && oe.Op == "remote error" {
				// A TLS alert: the bookie refused the session (a
				// TLS 1.3 server checks the client's certificate
				// after the client has finished its handshake).
				s.fail(fmt.Errorf("%w: the bookie refused the TLS session: %w", ErrTLS, err), true)
				return
			}
			s.fail(fmt.Errorf("read: %w", err), false)
			return
		}
		resp = wire.Response{}
		if err := dec.DecodeResponse(payload, &resp); err != nil {
			// A frame we cannot decode puts the stream out of step: Java
			// closes the channel, and so do we.
			s.fail(fmt.Errorf("decode response: %w", err), false)
			return
		}
		if resp.Header.Op == wire.OpStartTLS && p.t.cfg.TLS != nil {
			s.fail(fmt.Errorf("%w: %w: the bookie refused this client after the TLS handshake (START_TLS answered %v): its certificate is not authorized there (BookieAuthZFactory roles)",
				ErrTLS, wire.ErrUnauthorized, resp.Status), true)
			return
		}
		k := responseKey(&resp)
		p.mu.Lock()
		var r *request
		if !s.closed {
			r = s.takeLocked(k)
			if r != nil && k.op == wire.OpBatchReadEntry && (resp.Status == wire.StatusBadRequest || resp.BatchRead.Status == wire.StatusBadRequest) {
				s.noBatch = true
			}
		}
		p.mu.Unlock()
		if r == nil {
			continue // timed out already, or unknown: dropped, as in Java
		}
		r.finish(p.addr, &resp, nil)
	}
}

// fail ends the session: every outstanding request fails with
// ErrBookieUnavailable. connectFailed starts (or extends) the reconnect
// backoff.
func (s *session) fail(cause error, connectFailed bool) {
	p := s.p
	p.mu.Lock()
	if s.closed {
		p.mu.Unlock()
		return
	}
	s.closed = true
	close(s.done)
	if p.sess == s {
		p.sess = nil
	}
	var backoff time.Duration
	if connectFailed {
		p.failures++
		backoff = p.t.cfg.ReconnectBackoff << min(p.failures-1, 16)
		backoff = min(backoff, p.t.cfg.MaxReconnectBackoff)
		p.retryAt = p.t.cfg.Clock.Now().Add(backoff)
	}
	failed := s.drainLocked()
	conn := s.conn
	p.mu.Unlock()
	if conn != nil {
		conn.Close()
	}
	if errors.Is(cause, errRetired) {
		p.t.log.Debug("bookie connection closed", "bookie", p.addr, "reason", cause)
	} else if !errors.Is(cause, ErrClosed) {
		p.t.log.Info("bookie connection failed", "bookie", p.addr, "err", cause, "failed_requests", len(failed), "reconnect_backoff", backoff)
	}
	err := fmt.Errorf("%w: %s: %v", ErrBookieUnavailable, p.addr, cause)
	switch {
	case errors.Is(cause, ErrClosed):
		err = ErrClosed
	case errors.Is(cause, ErrTLS):
		// Keep the security cause matchable (ErrTLS, and
		// wire.ErrUnauthorized for a refused certificate).
		err = fmt.Errorf("%w: %s: %w", ErrBookieUnavailable, p.addr, cause)
	}
	for _, r := range failed {
		r.finish(p.addr, nil, err)
	}
}

func (s *session) drainLocked() []*request {
	var out []*request
	for _, head := range s.pending {
		for r := head; r != nil; {
			next := r.next
			r.unlinkedLocked()
			out = append(out, r)
			r = next
		}
	}
	s.pending = nil
	s.queues = [2]fifo{}
	return out
}

func (p *peer) close() {
	p.mu.Lock()
	p.closed = true
	s := p.sess
	p.mu.Unlock()
	if s != nil {
		s.fail(ErrClosed, false)
	}
}

// fifo is a queue of deadline entries on a slice used as a ring-less
// buffer: pops advance head, and the slice is compacted when half of it is
// dead.
type fifo struct {
	items []deadlineEntry
	head  int
}

func (q *fifo) push(e deadlineEntry) { q.items = append(q.items, e) }
func (q *fifo) len() int             { return len(q.items) - q.head }
func (q *fifo) peek() deadlineEntry  { return q.items[q.head] }
func (q *fifo) pop() {
	q.items[q.head] = deadlineEntry{}
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	} else if q.head > 1024 && q.head*2 > len(q.items) {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
}
