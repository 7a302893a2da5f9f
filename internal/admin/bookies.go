package admin

import (
	"context"
	"fmt"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/rereplication"
	"github.com/foliodb/folio/internal/wire"
)

// Bookie states as listbookies reports them.
const (
	StateWritable = "writable"
	StateReadOnly = "readonly"
)

// BookieStatus is one registered bookie.
type BookieStatus struct {
	ID    string `json:"id"`
	State string `json:"state"`
}

// ListBookies returns the registered bookies: writable ones first, then
// read-only ones, each group in ascending id order. writable and readOnly
// choose which groups are listed.
func ListBookies(ctx context.Context, md metadata.Registration, writable, readOnly bool) ([]BookieStatus, error) {
	out := []BookieStatus{}
	if writable {
		ids, err := md.WritableBookies(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing writable bookies: %w", err)
		}
		for _, id := range ids {
			out = append(out, BookieStatus{ID: string(id), State: StateWritable})
		}
	}
	if readOnly {
		ids, err := md.ReadOnlyBookies(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing read-only bookies: %w", err)
		}
		for _, id := range ids {
			out = append(out, BookieStatus{ID: string(id), State: StateReadOnly})
		}
	}
	return out, nil
}

// BookieInfo is a bookie's answer to GET_BOOKIE_INFO, or why there is none.
type BookieInfo struct {
	ID string `json:"id"`
	// FreeDiskSpace and TotalDiskCapacity are bytes, over the bookie's
	// ledger directories.
	FreeDiskSpace     int64  `json:"freeDiskSpace"`
	TotalDiskCapacity int64  `json:"totalDiskCapacity"`
	Error             string `json:"error,omitempty"`
}

// GetBookieInfo asks each bookie, through b, for its disk figures (GET_BOOKIE_INFO, the request
// BookKeeper's bookieinfo command uses: it needs only the bookie id, not the
// HTTP address, which the registration does not carry). Bookies are asked
// concurrently; a failure is recorded in its row.
func GetBookieInfo(ctx context.Context, b *rereplication.Bookies, ids []string) []BookieInfo {
	out := make([]BookieInfo, len(ids))
	done := make(chan struct{}, len(ids))
	for i, id := range ids {
		go func() {
			defer func() { done <- struct{}{} }()
			out[i].ID = id
			req := &wire.Request{Header: wire.Header{Op: wire.OpGetBookieInfo}, Has: wire.BodyGetBookieInfo,
				GetBookieInfo: wire.GetBookieInfoRequest{Requested: wire.BookieInfoFreeDiskSpace | wire.BookieInfoTotalDiskCapacity, HasRequested: true}}
			err := b.Call(ctx, id, 0, req, func(r *wire.Response) error {
				if err := r.GetBookieInfo.Status.Err(); err != nil {
					return err
				}
				out[i].FreeDiskSpace, out[i].TotalDiskCapacity = r.GetBookieInfo.FreeDiskSpace, r.GetBookieInfo.TotalDiskCapacity
				return nil
			})
			if err != nil {
				out[i].Error = err.Error()
			}
		}()
	}
	for range ids {
		<-done
	}
	return out
}
