package client

import (
	"testing"

	"github.com/foliodb/folio/internal/metadata"
)

// TestAdoptClosedIsFinal: once a handle holds CLOSED metadata, an older
// OPEN copy (a metadata read that finished after the one that saw the
// close) never replaces it, and no LAC learnt later raises the handle's LAC
// past the end (issue 16 review: IsClosed went back to false and a long
// poll's LAC was adopted past the end).
func TestAdoptClosedIsFinal(t *testing.T) {
	open := &metadata.LedgerMetadata{State: metadata.LedgerOpen, LastEntryID: -1}
	closed := &metadata.LedgerMetadata{State: metadata.LedgerClosed, LastEntryID: 9}
	r := &ReadHandle{}
	r.mu.md, r.mu.lac = open, 14 // a LAC seen before the close, above the end

	if lac := r.adopt(closed, -1); lac != 9 {
		t.Fatalf("LAC after adopting the close = %d, want 9", lac)
	}
	if lac := r.adopt(open, 15); lac != 9 || !r.IsClosed() {
		t.Fatalf("after a late OPEN copy and LAC 15: LAC %d, closed %v; want 9, true", lac, r.IsClosed())
	}
	if lac := r.adopt(nil, 20); lac != 9 {
		t.Fatalf("after LAC 20: %d, want 9", lac)
	}
}

// The cached length only moves forward while the ledger is open; once it
// is CLOSED it is the metadata's.
func TestAdoptLength(t *testing.T) {
	open := &metadata.LedgerMetadata{State: metadata.LedgerOpen, LastEntryID: -1}
	r := &ReadHandle{}
	r.mu.md, r.mu.lac = open, -1
	r.adoptLength(100)
	r.adoptLength(40) // an older answer
	if n := r.Length(); n != 100 {
		t.Fatalf("length %d, want 100", n)
	}
	r.adopt(&metadata.LedgerMetadata{State: metadata.LedgerClosed, LastEntryID: 3, Length: 90}, -1)
	if n, lac := r.Length(), r.LastAddConfirmed(); n != 90 || lac != 3 {
		t.Fatalf("closed: length %d LAC %d, want the metadata's 90 and 3", n, lac)
	}
}
