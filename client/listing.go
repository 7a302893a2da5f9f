package client

import (
	"context"
	"fmt"
	"iter"
)

// listPageSize is how many ledger ids ListLedgers asks the metadata store
// for at a time: the most ids a listing holds in memory.
const listPageSize = 1000

// ledgerLister is the part of the metadata driver a listing uses.
type ledgerLister interface {
	ListLedgers(ctx context.Context, startID int64, limit int) ([]int64, error)
}

// ListLedgers yields the id of every ledger in the cluster in ascending
// order (Java's BookKeeper.newListLedgersOp, BookKeeperAdmin.listLedgers,
// LedgerManager.getLedgerRanges).
// It streams: ids are read from the metadata store in pages of a thousand
// (an etcd range with a limit; ZooKeeper's hierarchical layout walked one
// level at a time), so a cluster of millions of ledgers is listed in
// bounded memory. The listing is not a snapshot: a ledger created or
// deleted while it runs may or may not be yielded.
//
// On a store error (or ctx ending) it yields the error once and stops; a
// key in the ledger range that is not a ledger id is such an error
// (ErrCorruptMetadata), as it stops Java's garbage collector too.
func (c *Client) ListLedgers(ctx context.Context) iter.Seq2[int64, error] {
	return func(yield func(int64, error) bool) {
		if c.isClosed() {
			yield(0, ErrClientClosed)
			return
		}
		for id, err := range listLedgers(ctx, c.md, listPageSize) {
			if err != nil {
				err = publicError(fmt.Errorf("client: list ledgers: %w", err))
			}
			if !yield(id, err) || err != nil {
				return
			}
		}
	}
}

// listLedgers pages through l, asking for pageSize ids at a time, and asks
// for the next page only when the consumer has taken the last one.
func listLedgers(ctx context.Context, l ledgerLister, pageSize int) iter.Seq2[int64, error] {
	return func(yield func(int64, error) bool) {
		var next int64
		for {
			if err := ctx.Err(); err != nil {
				yield(0, err)
				return
			}
			page, err := l.ListLedgers(ctx, next, pageSize)
			if err != nil {
				yield(0, err)
				return
			}
			if len(page) == 0 {
				return
			}
			for _, id := range page {
				if id < next {
					yield(0, fmt.Errorf("metadata store listed ledger %d when asked for ids from %d", id, next))
					return
				}
				if !yield(id, nil) {
					return
				}
				next = id + 1
			}
			if next <= 0 { // the last page ended at the largest int64
				return
			}
		}
	}
}
