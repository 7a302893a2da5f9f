package ledger

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/wire"
)

// fullMetadata is E = Qw = 3, Qa = 2 (batch reads apply), one ensemble.
func fullMetadata() *metadata.LedgerMetadata {
	return &metadata.LedgerMetadata{EnsembleSize: 3, WriteQuorum: 3, AckQuorum: 2, State: metadata.LedgerOpen, LastEntryID: -1,
		Ensembles: []metadata.Segment{{FirstEntryID: 0, Ensemble: []metadata.BookieID{"b1", "b2", "b3"}}}}
}

func batchDigester(t *testing.T) *digest.Digester {
	t.Helper()
	dig, err := digest.New(digest.CRC32C, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	return dig
}

// bodies returns the stored bodies of entries first … first+n-1 of ledger 7.
func bodies(dig *digest.Digester, first int64, n int) [][]byte {
	var out [][]byte
	for i := range int64(n) {
		id := first + i
		out = append(out, dig.AppendEntry(nil, 7, id, id-1, (id+1)*10, []byte(fmt.Sprintf("e%d", id))))
	}
	return out
}

func newBatch(t *testing.T, mod func(*BatchReadConfig)) (*BatchRead, *digest.Digester) {
	t.Helper()
	dig := batchDigester(t)
	cfg := BatchReadConfig{LedgerID: 7, Metadata: fullMetadata(), Verifier: dig, First: 4, MaxCount: 3, MaxSize: 1 << 20}
	if mod != nil {
		mod(&cfg)
	}
	b, err := NewBatchRead(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.Start()
	return b, dig
}

func batchSends(effs []Effect) []SendBatchRead {
	var out []SendBatchRead
	for _, e := range effs {
		if s, ok := e.(SendBatchRead); ok {
			out = append(out, s)
		}
	}
	return out
}

func batchResult(t *testing.T, b *BatchRead) BatchReadComplete {
	t.Helper()
	effs := b.Ready()
	if !b.Done() || len(effs) == 0 {
		t.Fatalf("not done: %v", effs)
	}
	res, ok := effs[len(effs)-1].(BatchReadComplete)
	if !ok {
		t.Fatalf("last effect %v", effs[len(effs)-1])
	}
	return res
}

func entryIDs(es []digest.Entry) []int64 {
	var out []int64
	for _, e := range es {
		out = append(out, e.EntryID)
	}
	return out
}

// One request to the first replica of the first entry's write set; its
// verified answer is the result, bodies past MaxCount ignored.
func TestBatchReadOneRequest(t *testing.T) {
	b, dig := newBatch(t, nil)
	s := batchSends(b.Ready())
	// Entry 4's write set starts at index 4 % 3 = 1.
	if len(s) != 1 || s[0] != (SendBatchRead{Bookie: "b2", StartEntryID: 4, MaxCount: 3, MaxSize: 1 << 20}) {
		t.Fatalf("sends %v", s)
	}
	b.Step(BatchReadResponse{Bookie: "b2", StartEntryID: 4, Bodies: bodies(dig, 4, 5)})
	res := batchResult(t, b)
	if res.Err != nil || fmt.Sprint(entryIDs(res.Entries)) != "[4 5 6]" || string(res.Entries[2].Payload) != "e6" || res.Entries[2].LAC != 5 {
		t.Fatalf("result %+v", res)
	}
	// Late answers are ignored.
	b.Step(BatchReadResponse{Bookie: "b2", StartEntryID: 4, Bodies: bodies(dig, 4, 1)})
	if effs := b.Ready(); len(effs) != 0 {
		t.Fatalf("after the end: %v", effs)
	}
}

// Fewer bodies than asked (the bookie stops at an entry it lacks, or at
// the size bound): the result is what came, at least one entry.
func TestBatchReadShortAnswer(t *testing.T) {
	b, dig := newBatch(t, nil)
	b.Ready()
	b.Step(BatchReadResponse{Bookie: "b2", StartEntryID: 4, Bodies: bodies(dig, 4, 1)})
	if res := batchResult(t, b); res.Err != nil || fmt.Sprint(entryIDs(res.Entries)) != "[4]" {
		t.Fatalf("result %+v", res)
	}
}

// A later body that fails verification ends the batch before it; a first
// body that fails makes the answer that replica's error.
func TestBatchReadVerification(t *testing.T) {
	b, dig := newBatch(t, nil)
	b.Ready()
	bs := bodies(dig, 4, 3)
	bs[1][len(bs[1])-1] ^= 1
	b.Step(BatchReadResponse{Bookie: "b2", StartEntryID: 4, Bodies: bs})
	if res := batchResult(t, b); res.Err != nil || fmt.Sprint(entryIDs(res.Entries)) != "[4]" {
		t.Fatalf("corrupt second entry: %+v", res)
	}

	b, dig = newBatch(t, nil)
	b.Ready()
	bs = bodies(dig, 4, 3)
	bs[0][len(bs[0])-1] ^= 1
	b.Step(BatchReadResponse{Bookie: "b2", StartEntryID: 4, Bodies: bs})
	s := batchSends(b.Ready())
	if len(s) != 1 || s[0].Bookie != "b3" || b.Done() {
		t.Fatalf("after a corrupt first entry: sends %v done %v", s, b.Done())
	}
	// An entry of another ledger (wrong id) also fails verification.
	b.Step(BatchReadResponse{Bookie: "b3", StartEntryID: 4, Bodies: bodies(dig, 5, 2)})
	s = batchSends(b.Ready())
	if len(s) != 1 || s[0].Bookie != "b1" {
		t.Fatalf("after entries with the wrong ids: sends %v", s)
	}
	b.Step(BatchReadResponse{Bookie: "b1", StartEntryID: 4, Bodies: bodies(dig, 4, 2)})
	res := batchResult(t, b)
	if res.Err != nil || fmt.Sprint(entryIDs(res.Entries)) != "[4 5]" || fmt.Sprint(res.Failed) != "[b2 b3]" {
		t.Fatalf("result %+v", res)
	}
}

// Every replica unable to serve the batch (EBADREQ, a lost connection):
// the read fails with Fallback, so the shell reads single entries.
func TestBatchReadFallback(t *testing.T) {
	b, _ := newBatch(t, nil)
	b.Ready()
	b.Step(BatchReadResponse{Bookie: "b2", StartEntryID: 4, Err: fmt.Errorf("%w: %w", ErrBatchReadUnsupported, wire.ErrBadRequest)})
	b.Ready()
	b.Step(BatchReadResponse{Bookie: "b3", StartEntryID: 4, Err: ErrTimeout})
	b.Ready()
	b.Step(BatchReadResponse{Bookie: "b1", StartEntryID: 4, Err: errors.New("connection lost")})
	res := batchResult(t, b)
	if res.Err == nil || !res.Fallback || !errors.Is(res.Err, ErrBatchReadUnsupported) {
		t.Fatalf("result %+v", res)
	}
}

// Qw − Qa + 1 explicit negatives for the first entry: ErrNoSuchEntry, no
// fallback. Fewer (the rest unknown): fallback, never "no such entry".
func TestBatchReadNegatives(t *testing.T) {
	noEntry := wire.StatusNoEntry.Err()
	b, _ := newBatch(t, nil)
	b.Ready()
	b.Step(BatchReadResponse{Bookie: "b2", StartEntryID: 4, Err: noEntry})
	b.Ready()
	b.Step(BatchReadResponse{Bookie: "b3", StartEntryID: 4, Err: noEntry})
	b.Ready()
	b.Step(BatchReadResponse{Bookie: "b1", StartEntryID: 4, Err: ErrTimeout})
	res := batchResult(t, b)
	if !errors.Is(res.Err, ErrNoSuchEntry) || res.Fallback {
		t.Fatalf("two negatives of Qw=3, Qa=2: %+v", res)
	}

	b, _ = newBatch(t, nil)
	b.Ready()
	b.Step(BatchReadResponse{Bookie: "b2", StartEntryID: 4, Err: noEntry})
	b.Ready()
	b.Step(BatchReadResponse{Bookie: "b3", StartEntryID: 4, Err: ErrTimeout})
	b.Ready()
	b.Step(BatchReadResponse{Bookie: "b1", StartEntryID: 4, Err: ErrTimeout})
	res = batchResult(t, b)
	if errors.Is(res.Err, ErrNoSuchEntry) || !res.Fallback {
		t.Fatalf("one negative: %+v", res)
	}
}

// EUA fails at once: another replica would refuse the key too.
func TestBatchReadUnauthorized(t *testing.T) {
	b, _ := newBatch(t, nil)
	b.Ready()
	b.Step(BatchReadResponse{Bookie: "b2", StartEntryID: 4, Err: wire.StatusUnauthorized.Err()})
	if res := batchResult(t, b); !errors.Is(res.Err, ErrUnauthorized) || res.Fallback {
		t.Fatalf("result %+v", res)
	}
}

// A Tick with the replica silent asks the next one (BookieSlow for the
// silent one); either answer is accepted; the intervals back off.
func TestBatchReadSpeculativeBackoff(t *testing.T) {
	b, dig := newBatch(t, func(c *BatchReadConfig) {
		c.Speculation = Speculation{First: 10 * time.Millisecond, Max: 25 * time.Millisecond, Multiplier: 2}
	})
	b.Ready()
	var intervals []time.Duration
	intervals = append(intervals, b.TickInterval())
	b.Step(Tick{})
	effs := b.Ready()
	if s := batchSends(effs); len(s) != 1 || s[0].Bookie != "b3" || effs[len(effs)-1] != (BookieSlow{Bookie: "b2"}) {
		t.Fatalf("speculation: %v", effs)
	}
	intervals = append(intervals, b.TickInterval())
	b.Step(Tick{})
	b.Ready()
	intervals = append(intervals, b.TickInterval())
	b.Step(Tick{}) // every replica asked: nothing more
	if effs := b.Ready(); len(effs) != 0 {
		t.Fatalf("nothing left to ask: %v", effs)
	}
	intervals = append(intervals, b.TickInterval())
	if fmt.Sprint(intervals) != "[10ms 20ms 25ms 25ms]" {
		t.Fatalf("intervals %v", intervals)
	}
	b.Step(BatchReadResponse{Bookie: "b2", StartEntryID: 4, Bodies: bodies(dig, 4, 3)})
	if res := batchResult(t, b); res.Err != nil || len(res.Entries) != 3 {
		t.Fatalf("the first replica's late answer: %+v", res)
	}
}

// Sticky: the sticky bookie is asked first whatever the entry.
func TestBatchReadSticky(t *testing.T) {
	b, _ := newBatch(t, func(c *BatchReadConfig) { c.Sticky, c.StickyIndex = true, 0 })
	if s := batchSends(b.Ready()); len(s) != 1 || s[0].Bookie != "b1" {
		t.Fatalf("sends %v", s)
	}
}

func TestBatchReadBadConfig(t *testing.T) {
	dig := batchDigester(t)
	for _, cfg := range []BatchReadConfig{
		{First: -1, MaxCount: 1, MaxSize: 1},
		{First: 0, MaxCount: 0, MaxSize: 1},
		{First: 0, MaxCount: 1 << 31, MaxSize: 1},
		{First: 0, MaxCount: 1, MaxSize: 0},
	} {
		cfg.LedgerID, cfg.Metadata, cfg.Verifier = 7, fullMetadata(), dig
		if _, err := NewBatchRead(cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

// A speculative replica that fails fast does not stop the speculation: the
// next Tick asks the third replica while none asked has answered with a
// verified batch (Java's maybeSendSpeculativeRead), rather than waiting for
// the silent first replica's transport timeout.
func TestBatchReadSpeculationAfterSpeculativeError(t *testing.T) {
	b, dig := newBatch(t, func(c *BatchReadConfig) {
		c.Speculation = Speculation{First: 10 * time.Millisecond}
	})
	first := batchSends(b.Ready())
	b.Step(Tick{})
	second := batchSends(b.Ready())
	if len(first) != 1 || len(second) != 1 {
		t.Fatalf("sends %v then %v", first, second)
	}
	b.Step(BatchReadResponse{Bookie: second[0].Bookie, StartEntryID: 4, Err: ErrTimeout})
	if effs := b.Ready(); len(effs) != 0 {
		t.Fatalf("the speculative replica's error with the first still out: %v", effs)
	}
	b.Step(Tick{})
	effs := b.Ready()
	third := batchSends(effs)
	if len(third) != 1 || third[0].Bookie == first[0].Bookie || third[0].Bookie == second[0].Bookie {
		t.Fatalf("after the speculative replica failed, a Tick sent %v, want the third replica", effs)
	}
	if effs[len(effs)-1] != (BookieSlow{Bookie: first[0].Bookie}) {
		t.Fatalf("effects %v, want the still silent %s reported slow", effs, first[0].Bookie)
	}
	b.Step(BatchReadResponse{Bookie: third[0].Bookie, StartEntryID: 4, Bodies: bodies(dig, 4, 3)})
	if res := batchResult(t, b); res.Err != nil || fmt.Sprint(entryIDs(res.Entries)) != "[4 5 6]" {
		t.Fatalf("result %+v", res)
	}
}
