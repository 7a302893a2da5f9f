package admin

import (
	"bytes"
	"context"
	"fmt"

	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/ledgerexec"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/rereplication"
	"github.com/foliodb/folio/internal/wire"
)

// SanityResult is the outcome of BookieSanity.
type SanityResult struct {
	Bookie         string `json:"bookie"`
	LedgerID       int64  `json:"ledgerId"`
	EntriesWritten int    `json:"entriesWritten"`
	EntriesRead    int    `json:"entriesRead"`
	OK             bool   `json:"ok"`
	Error          string `json:"error,omitempty"`
}

// BookieSanity is BookKeeper's bookiesanity against one bookie: it creates
// a ledger whose ensemble is that bookie alone (E = Qw = Qa = 1), adds
// entries to the bookie directly, reads them back and compares, then
// deletes the ledger's metadata (the bookie garbage-collects the entries).
// It tests the bookie's write and read paths without the client's
// ensemble choice. The error is also recorded in the result.
func BookieSanity(ctx context.Context, md metadata.LedgerManager, bk *rereplication.Bookies, bookie string, entries int) (res SanityResult, err error) {
	res = SanityResult{Bookie: bookie, LedgerID: -1}
	defer func() {
		res.OK = err == nil
		if err != nil {
			res.Error = err.Error()
		}
	}()
	password := []byte{}
	m := &metadata.LedgerMetadata{
		EnsembleSize: 1, WriteQuorum: 1, AckQuorum: 1, State: metadata.LedgerOpen, LastEntryID: -1,
		Ensembles:   []metadata.Segment{{FirstEntryID: 0, Ensemble: []metadata.BookieID{metadata.BookieID(bookie)}}},
		HasPassword: true, DigestType: metadata.DigestType(digest.CRC32C), Password: password, Ctime: -1,
	}
	id, _, err := md.CreateLedger(ctx, m)
	if err != nil {
		return res, fmt.Errorf("creating the test ledger: %w", err)
	}
	res.LedgerID = id
	defer func() {
		if derr := md.DeleteLedger(ctx, id, metadata.VersionAny); derr != nil && err == nil {
			err = fmt.Errorf("deleting the test ledger %d: %w", id, derr)
		}
	}()
	dig, err := digest.New(digest.CRC32C, password)
	if err != nil {
		return res, err
	}
	mk := digest.MasterKey(password)
	var length int64
	for e := range int64(entries) {
		payload := simpleTestPayload(int(e), 64)
		length += int64(len(payload))
		body := dig.AppendEntry(nil, id, e, e-1, length, payload)
		req := ledgerexec.AddRequest(id, e, mk[:], body, 0)
		if err := bk.Call(ctx, bookie, id, &req, func(r *wire.Response) error { return r.Add.Status.Err() }); err != nil {
			return res, fmt.Errorf("bookie %s: adding entry %d of ledger %d: %w", bookie, e, id, err)
		}
		res.EntriesWritten++
	}
	for e := range int64(entries) {
		req := ledgerexec.ReadRequest(id, e)
		err := bk.Call(ctx, bookie, id, &req, func(r *wire.Response) error {
			if err := r.Read.Status.Err(); err != nil {
				return err
			}
			got, err := dig.VerifyEntry(r.Read.Body, id, e)
			if err != nil {
				return err
			}
			if !bytes.Equal(got.Payload, simpleTestPayload(int(e), 64)) {
				return fmt.Errorf("payload differs from what was written")
			}
			return nil
		})
		if err != nil {
			return res, fmt.Errorf("bookie %s: reading entry %d of ledger %d: %w", bookie, e, id, err)
		}
		res.EntriesRead++
	}
	return res, nil
}
