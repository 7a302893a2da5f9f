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
