package harness

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
)

// The interop scenarios, each a function of the cluster it runs on, so that
// the same checks run on Folio bookies (TestJavaClientInterop), on Java
// bookies (TestJavaBookieEnsemble) and on mixed ensembles.

// interopEnv is one cluster and protocol: Java programs reach it through
// uri; fc is a Folio client with the same protocol.
type interopEnv struct {
	classpath string
	uri       string
	mode      string // "v3" or "v2"
	fc        *client.Client
	// bookies are the bookies every ensemble is drawn from.
	bookies []string
	// where names the bookies in messages ("Folio bookies", "Java bookies").
	where string
	// folio is the folio binary.
	folio string
}

func allDigestNames() []string {
	var names []string
	for _, d := range digests {
		names = append(names, d.java)
	}
	return names
}

// javaWritesFolioReads: Java writes a ledger per digest type (E=3, Qw=2,
// Qa=2), the Folio client reads every entry byte-exact. It returns the ids.
func javaWritesFolioReads(t *testing.T, e interopEnv, seed int64, n int64) []int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ops := runDriver(t, e.classpath, e.uri, e.mode, "write", "--digest", strings.Join(allDigestNames(), ","),
		"--password", password, "--entries", fmt.Sprint(n), "--seed", fmt.Sprint(seed),
		"--ensemble", "3", "--write-quorum", "2", "--ack-quorum", "2",
		"--custom", "application=compat;seed="+fmt.Sprint(seed), "--store-ctime", "true")
	if len(ops) != len(digests) {
		t.Fatalf("java write: %d results, want %d: %v", len(ops), len(digests), ops)
	}
	var ids []int64
	for _, r := range ops {
		id := r.int("ledgerId")
		ids = append(ids, id)
		if !r["closed"].(bool) || r.int("lac") != n-1 {
			t.Errorf("java write %s on %s: %v", r.str("digest"), e.where, r)
		}
		lac, got := folioReadAll(ctx, t, e.fc, id, false)
		if lac != n-1 {
			t.Errorf("folio read of Java ledger %d (%s) on %s: LAC %d, want %d", id, r.str("digest"), e.where, lac, n-1)
		}
		checkPayloads(t, "folio read of Java "+r.str("digest")+" ledger on "+e.where, id, seed, got, n)
		javaMetadataInFolio(ctx, t, e, id, seed, n)
	}
	return ids
}

// javaMetadataInFolio: Folio's LedgerMetadata of a ledger Java wrote with
// custom metadata and storeSystemTimeAsLedgerCreationTime says what Java
// stored.
func javaMetadataInFolio(ctx context.Context, t *testing.T, e interopEnv, id, seed, n int64) {
	t.Helper()
	md, err := e.fc.LedgerMetadata(ctx, id)
	if err != nil {
		t.Errorf("folio metadata of Java ledger %d: %v", id, err)
		return
	}
	var total int64
	for i := range n {
		total += int64(len(payload(seed, i)))
	}
	custom := md.CustomMetadata()
	if !md.IsClosed() || md.LastEntryID() != n-1 || md.Length() != total || md.EnsembleSize() != 3 ||
		md.WriteQuorumSize() != 2 || md.AckQuorumSize() != 2 || !md.HasPassword() || md.FormatVersion() != 3 ||
		len(md.Ensembles()) != 1 || len(md.Ensembles()[0].Bookies) != 3 ||
		len(custom) != 2 || string(custom["application"]) != "compat" || string(custom["seed"]) != fmt.Sprint(seed) {
		t.Errorf("folio metadata of Java ledger %d: %v, custom %q; want closed at %d, length %d, custom application=compat seed=%d", id, md, custom, n-1, total, seed)
	}
	if ct := md.Ctime(); ct.IsZero() || time.Since(ct) > time.Hour || time.Until(ct) > time.Hour {
		t.Errorf("folio metadata of Java ledger %d: ctime %v, want the creation time Java stored", id, ct)
	}
}

// folioWrite writes n entries of seed to a new closed ledger with digest d.
func folioWrite(ctx context.Context, t *testing.T, e interopEnv, d client.DigestType, seed, n int64) int64 {
	t.Helper()
	w, err := e.fc.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2,
		DigestType: d, Password: []byte(password)})
	if err != nil {
		t.Fatalf("folio create (%v) on %s: %v", d, e.where, err)
	}
	for i := range n {
		if _, err := w.Append(ctx, payload(seed, i)); err != nil {
			t.Fatalf("folio append %d on %s: %v", i, e.where, err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatalf("folio close on %s: %v", e.where, err)
	}
	return w.ID()
}

// folioWritesJavaReads: the Folio client writes a ledger per digest type,
// Java reads every entry byte-exact (autodetecting the digest from the
// metadata). It returns the ids, in the order of digests.
func folioWritesJavaReads(t *testing.T, e interopEnv, seed int64, n int64) []int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var ids []int64
	var args []string
	for _, d := range digests {
		id := folioWrite(ctx, t, e, d.folio, seed, n)
		ids = append(ids, id)
		args = append(args, fmt.Sprint(id))
	}
	ops := runDriver(t, e.classpath, e.uri, e.mode, "read", "--ledger", strings.Join(args, ","), "--password", password)
	if len(ops) != len(digests) {
		t.Fatalf("java read: %d results, want %d", len(ops), len(digests))
	}
	for i, r := range ops {
		if r.str("digest") != digests[i].java || !r["closed"].(bool) || r.int("lac") != n-1 {
			t.Errorf("java read of Folio %v ledger on %s: %v", digests[i].folio, e.where, r)
		}
		checkPayloads(t, "java read of Folio "+digests[i].java+" ledger on "+e.where, r.int("ledgerId"), seed, javaEntries(t, r), n)
	}
	return ids
}

// javaSeesFolioMetadata: Java's ledger listing contains ids (so Folio's
// etcd keys are Java's), and Java's view of each ledger's metadata is what
// Folio wrote (n entries of seed, digests in order).
func javaSeesFolioMetadata(t *testing.T, e interopEnv, ids []int64, seed, n int64) {
	t.Helper()
	listed := runDriver(t, e.classpath, e.uri, e.mode, "list")[0]
	var javaIDs []int64
	for _, v := range listed["ledgers"].([]any) {
		id, _ := v.(json.Number).Int64()
		javaIDs = append(javaIDs, id)
	}
	for _, id := range ids {
		if !slices.Contains(javaIDs, id) {
			t.Errorf("Java's ledger listing %v lacks Folio ledger %d", javaIDs, id)
		}
	}
	var total int64
	for i := range n {
		total += int64(len(payload(seed, i)))
	}
	var idList []string
	for _, id := range ids {
		idList = append(idList, fmt.Sprint(id))
	}
	mds := runDriver(t, e.classpath, e.uri, e.mode, "meta", "--ledger", strings.Join(idList, ","))
	if len(mds) != len(ids) {
		t.Fatalf("java meta: %d results for %d ledgers", len(mds), len(ids))
	}
	for i, md := range mds {
		id := ids[i]
		want := map[string]any{"ledgerId": id, "ensembleSize": 3, "writeQuorum": 2, "ackQuorum": 2,
			"state": "CLOSED", "lastEntryId": n - 1, "length": total, "digest": digests[i].java,
			"hasPassword": true, "password": hex.EncodeToString([]byte(password)), "formatVersion": 3}
		for k, v := range want {
			if n, ok := md[k].(json.Number); ok {
				md[k] = n.String()
				v = fmt.Sprint(v)
			}
			if md[k] != v {
				t.Errorf("Java's metadata of Folio ledger %d: %s = %v, want %v", id, k, md[k], v)
			}
		}
		ens, _ := md["ensembles"].(map[string]any)
		first, _ := ens["0"].([]any)
		if len(ens) != 1 || len(first) != 3 {
			t.Errorf("Java's metadata of Folio ledger %d: ensembles %v", id, md["ensembles"])
		}
		for _, b := range first {
			if !slices.Contains(e.bookies, b.(string)) {
				t.Errorf("Java's metadata of Folio ledger %d: bookie %v is not one of %v", id, b, e.bookies)
			}
		}
		// Folio stores the creation time (Java's
		// storeSystemTimeAsLedgerCreationTime): Java reads the same value.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		fm, err := e.fc.LedgerMetadata(ctx, id)
		cancel()
		if err != nil {
			t.Errorf("Folio's metadata of ledger %d: %v", id, err)
		} else if ct := fmt.Sprint(md["ctime"]); fm.CtimeMillis() <= 0 || ct != fmt.Sprint(fm.CtimeMillis()) {
			t.Errorf("Java's ctime of Folio ledger %d: %s, Folio stored %d", id, ct, fm.CtimeMillis())
		}
	}
}

// javaRecoversFolioWriter: Java opens with recovery a ledger a Folio writer
// is still appending to: the writer gets ErrLedgerFenced, the recovered
// ledger holds every entry it had acknowledged, both read them byte-exact.
func javaRecoversFolioWriter(t *testing.T, e interopEnv, seed int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := e.fc.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2,
		DigestType: client.DigestCRC32C, Password: []byte(password)})
	if err != nil {
		t.Fatal(err)
	}
	acked := int64(-1)
	var writeErr error
	var wg sync.WaitGroup
	started := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := int64(0); ; i++ {
			if i == 20 {
				close(started)
			}
			id, err := w.Append(ctx, payload(seed, i))
			if err != nil {
				writeErr = err
				if i < 20 {
					close(started)
				}
				return
			}
			acked = id
			time.Sleep(2 * time.Millisecond)
		}
	}()
	<-started
	r := runDriver(t, e.classpath, e.uri, e.mode, "read", "--ledger", fmt.Sprint(w.ID()), "--password", password, "--recovery")[0]
	wg.Wait()
	if !errors.Is(writeErr, client.ErrLedgerFenced) {
		t.Errorf("folio writer after Java's recovery (%s): %v, want ErrLedgerFenced", e.where, writeErr)
	}
	lac := r.int("lac")
	if !r["closed"].(bool) || lac < acked {
		t.Errorf("Java recovery closed at %d (closed %v); the Folio writer had acknowledged up to %d (%s)", lac, r["closed"], acked, e.where)
	}
	checkPayloads(t, "java recovery read of Folio ledger on "+e.where, w.ID(), seed, javaEntries(t, r), lac+1)
	flac, got := folioReadAll(ctx, t, e.fc, w.ID(), false)
	if flac != lac {
		t.Errorf("folio sees LAC %d after Java's recovery closed at %d (%s)", flac, lac, e.where)
	}
	checkPayloads(t, "folio read after Java recovery on "+e.where, w.ID(), seed, got, lac+1)
	t.Logf("%s: Folio writer acknowledged 0..%d, Java recovery closed at %d", e.where, acked, lac)
}

// folioRecoversJavaWriter is the mirror: a Java writer appends, the Folio
// client opens with recovery; the Java writer gets LedgerFencedException
// (-101) and every entry it had acknowledged is readable by both.
func folioRecoversJavaWriter(t *testing.T, e interopEnv, seed int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := startDriver(t, e.classpath, e.uri, e.mode, "write", "--digest", "CRC32C", "--password", password,
		"--entries", "100000", "--seed", fmt.Sprint(seed), "--until-error", "--close", "false", "--pause-ms", "2")
	created := p.next(30 * time.Second)
	id := created.int("created")
	if id == 0 {
		t.Fatalf("java write: first line %v", created)
	}
	for acks := 0; acks < 20; {
		if _, ok := p.next(30 * time.Second)["ack"]; ok {
			acks++
		}
	}
	lac, got := folioReadAll(ctx, t, e.fc, id, true)
	ops := p.wait()
	if len(ops) != 1 {
		t.Fatalf("java writer results: %v", ops)
	}
	wr := ops[0]
	if wr.int("error") != -101 {
		t.Errorf("java writer after Folio's recovery (%s): error %d (%s), want -101 (LedgerFencedException)", e.where, wr.int("error"), wr.str("message"))
	}
	if wr.int("lastAck") > lac {
		t.Errorf("Folio recovery closed at %d; the Java writer had acknowledged up to %d (%s)", lac, wr.int("lastAck"), e.where)
	}
	checkPayloads(t, "folio recovery read of Java ledger on "+e.where, id, seed, got, lac+1)
	jr := runDriver(t, e.classpath, e.uri, e.mode, "read", "--ledger", fmt.Sprint(id), "--password", password)[0]
	if jr.int("lac") != lac || !jr["closed"].(bool) {
		t.Errorf("Java sees %v after Folio's recovery closed at %d (%s)", jr, lac, e.where)
	}
	checkPayloads(t, "java read after Folio recovery on "+e.where, id, seed, javaEntries(t, jr), lac+1)
	t.Logf("%s: Java writer acknowledged 0..%d, Folio recovery closed at %d", e.where, wr.int("lastAck"), lac)
}

// javaTailsFolioLedger: Java tails with readLastAddConfirmedAndEntry while
// the Folio client appends. With v3 every poll is a long poll that waits for
// the next entry, so the number of polls is bounded; v2 has no long poll.
func javaTailsFolioLedger(t *testing.T, e interopEnv, seed int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 20
	w, err := e.fc.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2,
		DigestType: client.DigestCRC32C, Password: []byte(password)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	p := startDriver(t, e.classpath, e.uri, e.mode, "tail", "--ledger", fmt.Sprint(w.ID()), "--password", password,
		"--count", fmt.Sprint(n), "--timeout-ms", "40000")
	if r := p.next(30 * time.Second); r["ready"] != true {
		t.Fatalf("java tail: %v", r)
	}
	// Entry i becomes visible to readers with entry i+1 (its LAC): n+1
	// appends let the tailer see entries 0..n-1.
	for i := range int64(n + 1) {
		if _, err := w.Append(ctx, payload(seed, i)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ops := p.wait()
	p.mu.Lock()
	var got [][]byte
	for _, r := range p.all {
		if h, ok := r["data"].(string); ok {
			if r.int("entry") != int64(len(got)) {
				t.Errorf("java tail on %s: entry %d, want %d", e.where, r.int("entry"), len(got))
			}
			b, _ := hex.DecodeString(h)
			got = append(got, b)
		}
	}
	p.mu.Unlock()
	if len(ops) != 1 || ops[0].int("error") != 0 {
		t.Fatalf("java tail on %s: %v", e.where, ops)
	}
	checkPayloads(t, "java tail of Folio ledger on "+e.where, w.ID(), seed, got, n)
	op := ops[0]
	t.Logf("java tail on %s (%s): %d entries in %d polls (%d retries before the first entry, %d LAC reads, last LAC from a poll %d)",
		e.where, e.mode, op.int("seen"), op.int("polls"), op.int("retries"), op.int("lacReads"), op.int("lastPollLac"))
	if e.mode == "v3" && op.int("polls") > 2*n+5 {
		t.Errorf("java tail (v3) on %s: %d polls for %d entries: the long polls did not wait", e.where, op.int("polls"), n)
	}
}

// folioTailsJavaLedger: the Folio client tails (ReadHandle.Tail: long polls
// with v3, polling with v2) a ledger a Java writer appends to and then
// closes; it sees every entry, byte-exact, in order, and ends at the close.
func folioTailsJavaLedger(t *testing.T, e interopEnv, seed int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 30
	p := startDriver(t, e.classpath, e.uri, e.mode, "write", "--digest", "CRC32", "--password", password,
		"--entries", fmt.Sprint(n), "--seed", fmt.Sprint(seed), "--pause-ms", "30")
	created := p.next(30 * time.Second)
	id := created.int("created")
	if id == 0 {
		t.Fatalf("java write: first line %v", created)
	}
	r, err := e.fc.OpenLedger(ctx, id, client.OpenOptions{Password: []byte(password)})
	if err != nil {
		t.Fatalf("folio open of the Java ledger being written (%s): %v", e.where, err)
	}
	start := time.Now()
	var got [][]byte
	var firstAt time.Duration
	for entry, err := range r.Tail(ctx, 0) {
		if err != nil {
			t.Fatalf("folio tail of Java ledger %d on %s after %d entries: %v", id, e.where, len(got), err)
		}
		if entry.ID != int64(len(got)) {
			t.Fatalf("folio tail on %s: entry %d, want %d", e.where, entry.ID, len(got))
		}
		if len(got) == 0 {
			firstAt = time.Since(start)
		}
		got = append(got, entry.Payload)
	}
	if ctx.Err() != nil {
		t.Fatalf("folio tail of Java ledger %d on %s: not ended by the close within a minute (%d entries)", id, e.where, len(got))
	}
	ops := p.wait()
	if len(ops) != 1 || ops[0].int("error") != 0 || !ops[0]["closed"].(bool) {
		t.Fatalf("java writer: %v", ops)
	}
	checkPayloads(t, "folio tail of Java ledger on "+e.where, id, seed, got, n)
	t.Logf("folio tail on %s (%s): %d entries, the first after %v, all in %v", e.where, e.mode, len(got),
		firstAt.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}
