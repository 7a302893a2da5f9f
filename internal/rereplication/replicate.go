package rereplication

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"golang.org/x/time/rate"

	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/ledger/quorum"
	"github.com/foliodb/folio/internal/ledgerexec"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/wire"
)

// Re-replication of ledger fragments (spec/protocol.md §6.6, §6.7): the
// piece shared by AutoRecovery's replication worker and manual recovery.
//
// Safety (DESIGN.md §6): an entry is copied byte for byte as a surviving
// replica stores it, after its digest is verified, with RECOVERY_ADD (so a
// fenced ledger can be repaired); the ensemble is changed only after every
// entry the lost bookie should hold is on the replacement, by a CAS on the
// version read, and only if the segment still has the same range and still
// names the lost bookie. Nothing acknowledged is ever dropped: a failure
// leaves the metadata as it was.

// ErrNoPassword: the ledger's metadata stores no password, which
// re-replication needs to verify and store entries (admin.RecoverLedger
// returns it too, for a legacy ledger recovered without one).
var ErrNoPassword = errors.New("ledger metadata stores no password")

// ErrEntryUnreadable: no surviving replica returned an entry that the lost
// bookie should hold; the fragment is not copied.
var ErrEntryUnreadable = errors.New("entry unreadable from every surviving replica")

// ErrFragmentChanged: the ledger changed under the copy (the segment's
// range moved); copy again from the new metadata.
var ErrFragmentChanged = errors.New("ledger fragment changed during re-replication")

// Fragment is one ensemble segment of a ledger: entries [First, Last]
// (Last < First when it holds no entries).
type Fragment struct {
	Segment     int
	First, Last int64
	Ensemble    []metadata.BookieID
}

// ClosedFragments returns the fragments whose range is final: every
// segment of a CLOSED ledger, and every segment but the last of one that
// is not (its entries are below the key of the next segment, which a
// writer only opens after they were acknowledged).
func ClosedFragments(m *metadata.LedgerMetadata) []Fragment {
	var out []Fragment
	for i, seg := range m.Ensembles {
		f := Fragment{Segment: i, First: seg.FirstEntryID, Ensemble: seg.Ensemble}
		switch {
		case i+1 < len(m.Ensembles):
			f.Last = m.Ensembles[i+1].FirstEntryID - 1
		case m.IsClosed():
			f.Last = m.LastEntryID
		default:
			continue
		}
		out = append(out, f)
	}
	return out
}

// ReplicateResult says what one fragment repair did.
type ReplicateResult struct {
	Segment int
	From    metadata.BookieID
	To      metadata.BookieID
	Entries int
	// Bytes is the stored bodies' total size of the entries copied.
	Bytes int64
	// Version is the ledger metadata version after the ensemble update.
	Version metadata.Version
	// Skipped: the segment no longer names From (someone else repaired
	// it); nothing was written.
	Skipped bool
}

// ReplicateFragment copies every entry of fragment f of ledger id (metadata
// m, at version v) that bookie index bad should hold from the surviving
// replicas (not in lost) to target with RECOVERY_ADD, then replaces the bad
// bookie by target in that segment by CAS (re-reading on a version
// conflict). It needs the ledger's password from its metadata.
//
// The bookie being replaced is a source only when lost does not name it (a
// healthy bookie moved for placement), and then only after the other
// replicas failed: a lost bookie, or one whose copy is bad (pass it in
// lost), is never read.
//
// limit, if not nil, is waited on for each copied entry's bytes (the
// re-replication rate limit).
func (b *Bookies) ReplicateFragment(ctx context.Context, md metadata.LedgerManager, id int64, m *metadata.LedgerMetadata,
	f Fragment, bad int, target metadata.BookieID, lost []metadata.BookieID, limit *rate.Limiter) (ReplicateResult, error) {
	res := ReplicateResult{Segment: f.Segment, From: f.Ensemble[bad], To: target}
	if !m.HasPassword {
		return res, fmt.Errorf("ledger %d: %w: re-replication needs it to verify and store entries", id, ErrNoPassword)
	}
	dig, err := digest.New(digest.Type(m.DigestType), m.Password)
	if err != nil {
		return res, fmt.Errorf("ledger %d: %w", id, err)
	}
	mk := digest.MasterKey(m.Password)
	p := quorum.Params{EnsembleSize: m.EnsembleSize, WriteQuorum: m.WriteQuorum, AckQuorum: m.AckQuorum}
	var ws []int
	for e := f.First; e <= f.Last; e++ {
		ws = p.AppendWriteSet(ws[:0], e)
		if !slices.Contains(ws, bad) {
			continue
		}
		body, err := b.readVerified(ctx, id, e, f.Ensemble, ws, bad, lost, dig)
		if err != nil {
			return res, err
		}
		if limit != nil {
			if err := limit.WaitN(ctx, min(len(body), limit.Burst())); err != nil {
				return res, err
			}
		}
		req := ledgerexec.AddRequest(id, e, mk[:], body, ledgerexec.AddRecovery)
		if err := b.Call(ctx, string(target), id, &req, func(r *wire.Response) error { return r.Add.Status.Err() }); err != nil {
			return res, fmt.Errorf("ledger %d entry %d: recovery add to %s: %w", id, e, target, err)
		}
		res.Entries++
		res.Bytes += int64(len(body))
	}
	// All copied: swap the bookie in the segment by CAS.
	for {
		cur, v, err := md.ReadLedger(ctx, id)
		if err != nil {
			return res, fmt.Errorf("ledger %d: re-reading metadata: %w", id, err)
		}
		var now *Fragment
		for _, g := range ClosedFragments(cur) {
			if g.Segment < len(cur.Ensembles) && g.First == f.First {
				now = &g
				break
			}
		}
		if now == nil || now.Last != f.Last {
			return res, fmt.Errorf("ledger %d segment at entry %d: %w", id, f.First, ErrFragmentChanged)
		}
		if now.Ensemble[bad] != res.From {
			res.Skipped, res.Version = true, v
			return res, nil
		}
		if slices.Contains(now.Ensemble, target) {
			return res, fmt.Errorf("ledger %d segment at entry %d already holds %s: %w", id, f.First, target, ErrFragmentChanged)
		}
		nm := cur.Clone()
		nm.Ensembles[now.Segment].Ensemble[bad] = target
		nv, err := md.WriteLedger(ctx, id, nm, v)
		if errors.Is(err, metadata.ErrBadVersion) {
			continue
		}
		if err != nil {
			return res, fmt.Errorf("ledger %d: updating the ensemble: %w", id, err)
		}
		res.Version = nv
		return res, nil
	}
}

// readVerified reads entry e from the write set's other members (skipping
// lost bookies), verifies its digest, and returns a copy of the stored body.
// The member at bad is tried last, and only if lost does not name it.
func (b *Bookies) readVerified(ctx context.Context, id, e int64, ensemble []metadata.BookieID, ws []int, bad int,
	lost []metadata.BookieID, dig *digest.Digester) ([]byte, error) {
	var errs []error
	order := make([]int, 0, len(ws))
	for _, i := range ws {
		if i != bad {
			order = append(order, i)
		}
	}
	order = append(order, bad)
	for _, i := range order {
		src := ensemble[i]
		if slices.Contains(lost, src) {
			continue
		}
		var body []byte
		req := ledgerexec.ReadRequest(id, e)
		err := b.Call(ctx, string(src), id, &req, func(r *wire.Response) error {
			if err := r.Read.Status.Err(); err != nil {
				return err
			}
			if _, err := dig.VerifyEntry(r.Read.Body, id, e); err != nil {
				return err
			}
			body = slices.Clone(r.Read.Body)
			return nil
		})
		if err == nil {
			return body, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		errs = append(errs, fmt.Errorf("%s: %w", src, err))
	}
	return nil, fmt.Errorf("ledger %d entry %d: %w: %w", id, e, ErrEntryUnreadable, errors.Join(errs...))
}
