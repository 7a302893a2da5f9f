package entrylog

import (
	iofs "io/fs"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// verdictThenNoSpace is the disk checker's "full" verdict for the own
// directory landing while a flush writes there, the write (or fsync) then
// failing with ENOSPC.
type verdictThenNoSpace struct {
	armed atomic.Bool
	kind  errorfs.OpKind
	s     atomic.Pointer[Store]
}

func (n *verdictThenNoSpace) MaybeError(op errorfs.Op) error {
	if n.armed.Load() && op.Kind == n.kind && strings.HasPrefix(op.Path, "own/") {
		n.s.Load().SetDirFull(0, true) // the bookie's SetLedgerDirFull
		return &iofs.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
	}
	return nil
}

func (n *verdictThenNoSpace) String() string { return "verdictThenNoSpace" }

// TestSpillNoSpaceAfterVerdict: a directory the disk checker marked full
// between the flush picking it and the ENOSPC is still retried away from
// (the flush used to return the error, and the ledger store fails on a
// flush error, though another directory had room).
func TestSpillNoSpaceAfterVerdict(t *testing.T) {
	for _, kind := range []errorfs.OpKind{errorfs.OpFileWrite, errorfs.OpFileSync} {
		fs := newFreeFS()
		ns := &verdictThenNoSpace{kind: kind}
		s := openSpill(t, errorfs.Wrap(fs, ns))
		ns.s.Store(s)
		x := newFakeIndex()
		flushEntries(t, s, x, 1, 0, 5) // the current log is in own
		ns.armed.Store(true)
		for e := int64(0); e < 5; e++ {
			if err := s.Add(2, e, body(2, e, 100)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Flush(x.put); err != nil {
			t.Fatalf("op %v: another directory is writable, yet Flush failed: %v", kind, err)
		}
		for e := int64(0); e < 5; e++ {
			loc, ok := x.get(2, e)
			if !ok {
				t.Fatalf("op %v: entry %d not indexed", kind, e)
			}
			if dir, _ := s.LogDir(loc.LogID); strings.HasPrefix(dir, "own") {
				t.Fatalf("op %v: entry %d indexed in %s, the full directory", kind, e, dir)
			}
		}
		s.Close()
	}
}
