package harness

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
)

// Explicit entry ids and chosen ledger ids (Java's WriteAdvHandle and
// CreateAdvBuilder.withLedgerId) both ways. Entries are written out of
// order: each window of advWindow ids in reverse, all in flight at once.
const advWindow = 16

// advLedgerID is the chosen ledger id of a scenario: above the ids the
// generator hands out in these tests, distinct per seed.
func advLedgerID(seed int64) int64 { return 1<<41 + seed }

// javaWritesAdvFolioReads: Java's LedgerHandleAdv (createLedgerAdv with
// withLedgerId) writes n entries out of order under a chosen id; the Folio
// client reads every entry byte-exact and finds the metadata closed at n-1
// with the sum of the lengths. Java's own errors for a duplicate entry id
// and a taken ledger id are the codes Folio's sentinels give, and Folio's
// CreateLedgerAdv of the same id fails with ErrLedgerExists.
func javaWritesAdvFolioReads(t *testing.T, e interopEnv, seed, n int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := advLedgerID(seed)
	ops := runDriver(t, e.classpath, e.uri, e.mode, "writeadv", "--ledger-id", fmt.Sprint(id),
		"--password", password, "--entries", fmt.Sprint(n), "--seed", fmt.Sprint(seed), "--window", fmt.Sprint(advWindow))
	if len(ops) != 1 {
		t.Fatalf("java writeadv: %d results, want 1: %v", len(ops), ops)
	}
	r := ops[0]
	if r.int("ledgerId") != id || !r["closed"].(bool) || r.int("lac") != n-1 {
		t.Fatalf("java writeadv on %s: %v; want ledger %d closed with LAC %d", e.where, r, id, n-1)
	}
	if got := r.int("duplicateError"); got != int64(client.Code(client.ErrDuplicateEntryID)) {
		t.Errorf("java rewrite of entry 0: code %d, Folio's ErrDuplicateEntryID is %d", got, client.Code(client.ErrDuplicateEntryID))
	}
	if got := r.int("existsError"); got != int64(client.Code(client.ErrLedgerExists)) {
		t.Errorf("java create of taken ledger %d: code %d, Folio's ErrLedgerExists is %d", id, got, client.Code(client.ErrLedgerExists))
	}
	lac, got := folioReadAll(ctx, t, e.fc, id, false)
	if lac != n-1 {
		t.Errorf("folio read of Java adv ledger %d on %s: LAC %d, want %d", id, e.where, lac, n-1)
	}
	checkPayloads(t, "folio read of Java adv ledger on "+e.where, id, seed, got, n)
	md, err := e.fc.LedgerMetadata(ctx, id)
	if err != nil {
		t.Fatalf("folio metadata of Java adv ledger %d: %v", id, err)
	}
	if md.LastEntryID() != n-1 || md.Length() != payloadsLength(seed, n) {
		t.Errorf("folio metadata of Java adv ledger %d: %v; want closed at %d, length %d", id, md, n-1, payloadsLength(seed, n))
	}
	_, err = e.fc.CreateLedgerAdv(ctx, client.LedgerOptions{LedgerID: id, Password: []byte(password)})
	if !errors.Is(err, client.ErrLedgerExists) {
		t.Errorf("folio CreateLedgerAdv of Java's ledger %d: %v, want ErrLedgerExists", id, err)
	}
}

// folioWritesAdvJavaReads: the mirror: Folio's WriteAdvHandle writes n
// entries out of order under a chosen id, Java reads every entry
// byte-exact with the metadata Java expects, and Java's createLedgerAdv of
// the same id fails with LedgerExistException (-20).
func folioWritesAdvJavaReads(t *testing.T, e interopEnv, seed, n int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := advLedgerID(seed)
	w, err := e.fc.CreateLedgerAdv(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2,
		Password: []byte(password), LedgerID: id})
	if err != nil {
		t.Fatalf("folio CreateLedgerAdv %d on %s: %v", id, e.where, err)
	}
	for lo := int64(0); lo < n; lo += advWindow {
		var fs []*client.AppendFuture
		for i := min(n, lo+advWindow) - 1; i >= lo; i-- {
			fs = append(fs, w.WriteAtAsync(i, payload(seed, i)))
		}
		for _, f := range fs {
			if _, err := f.Wait(ctx); err != nil {
				t.Fatalf("folio WriteAt on %s: %v", e.where, err)
			}
		}
	}
	if err := w.WriteAt(ctx, 0, []byte{1}); !errors.Is(err, client.ErrDuplicateEntryID) {
		t.Errorf("folio rewrite of entry 0: %v, want ErrDuplicateEntryID", err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatalf("folio close on %s: %v", e.where, err)
	}
	ops := runDriver(t, e.classpath, e.uri, e.mode, "read", "--ledger", fmt.Sprint(id), "--password", password)
	if len(ops) != 1 {
		t.Fatalf("java read: %d results, want 1", len(ops))
	}
	r := ops[0]
	if !r["closed"].(bool) || r.int("lac") != n-1 || r.int("lastEntryId") != n-1 || r.int("length") != payloadsLength(seed, n) {
		t.Errorf("java read of Folio adv ledger %d on %s: %v; want closed at %d, length %d", id, e.where, r, n-1, payloadsLength(seed, n))
	}
	checkPayloads(t, "java read of Folio adv ledger on "+e.where, id, seed, javaEntries(t, r), n)
	p := startDriver(t, e.classpath, e.uri, e.mode, "writeadv", "--ledger-id", fmt.Sprint(id), "--password", password, "--entries", "1")
	ops = p.wait()
	if len(ops) != 1 || ops[0].int("error") != int64(client.Code(client.ErrLedgerExists)) {
		t.Errorf("java createLedgerAdv of Folio's ledger %d: %v, want error %d (LedgerExistException)", id, ops, client.Code(client.ErrLedgerExists))
	}
}

// payloadsLength is the ledger length of entries 0..n-1 of seed.
func payloadsLength(seed, n int64) int64 {
	var total int64
	for i := range n {
		total += int64(len(payload(seed, i)))
	}
	return total
}
