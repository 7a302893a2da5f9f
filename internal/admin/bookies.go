package admin

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/transport"
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

// Bookies talks to bookies directly, one request at a time, for the
// commands that look at individual bookies rather than through a ledger
// handle. It is safe for concurrent use; Close it when done.
type Bookies struct {
	tr *transport.Transport
	// err, if set, is the transport's configuration error, which every
	// request returns (the settings NewBookiesTLS passes are all valid, so
	// it stays nil).
	err error
	// reg resolves bookie ids (ResolveWith); nil: ids are host:port.
	reg atomic.Pointer[registry]
}

type registry struct{ r any }

// DefaultRequestTimeout bounds each request of a Bookies.
const DefaultRequestTimeout = 5 * time.Second

// NewBookies returns a Bookies whose requests time out after timeout (≤ 0:
// DefaultRequestTimeout). It speaks protocol v3, which every BookKeeper
// 4.17 bookie understands.
func NewBookies(timeout time.Duration, log *slog.Logger) *Bookies {
	return NewBookiesTLS(timeout, log, nil)
}

// NewBookiesTLS is NewBookies whose connections are secured with tlsConfig
// (nil: plaintext), as client.Config.TLS secures a client's: START_TLS,
// then TLS, never plaintext.
func NewBookiesTLS(timeout time.Duration, log *slog.Logger, tlsConfig *tls.Config) *Bookies {
	if timeout <= 0 {
		timeout = DefaultRequestTimeout
	}
	// Frames up to the largest a bookie can be configured with: admin and
	// AutoRecovery read and copy whatever entries a bookie holds (each
	// bookie still refuses frames over its own nettyMaxFrameSizeBytes).
	b := &Bookies{}
	tr, err := transport.New(transport.Config{
		ConnectTimeout: timeout, AddTimeout: timeout, ReadTimeout: timeout,
		TimeoutTick: timeout / 10, Logger: log, TLS: tlsConfig, MaxFrameSize: wire.MaxFrameSizeLimit,
		Resolve: func(ctx context.Context, id string) (string, error) {
			var reg any
			if r := b.reg.Load(); r != nil {
				reg = r.r
			}
			return metadata.ResolveBookie(ctx, reg, metadata.BookieID(id))
		},
	})
	b.tr, b.err = tr, err
	if err != nil {
		b.err = fmt.Errorf("admin: bookie transport: %w", err)
	}
	return b
}

// ResolveWith makes later connections resolve bookie ids through reg (a
// metadata.Driver), as a client does: the address a bookie registered,
// which is how a bookie with a custom id (bookieId) is reached. Without it
// only host:port ids can be reached.
func (b *Bookies) ResolveWith(reg metadata.Registration) { b.reg.Store(&registry{reg}) }

// Close closes the connections.
func (b *Bookies) Close() error {
	if b.tr == nil {
		return nil
	}
	return b.tr.Close()
}

// call sends req to bookie and waits for the answer; take runs on the
// answer while its bytes are valid (copy what it keeps). An error is a
// transport failure or a non-OK top-level status; take checks the
// operation's own status.
func (b *Bookies) call(ctx context.Context, bookie string, key int64, req *wire.Request, take func(*wire.Response) error) error {
	if b.err != nil {
		return b.err
	}
	done := make(chan error, 1)
	b.tr.Send(bookie, key, req, func(resp *wire.Response, err error) {
		if err == nil {
			if err = resp.Status.Err(); err == nil || errors.Is(err, wire.ErrNoSuchLedger) || errors.Is(err, wire.ErrNoSuchEntry) {
				// The operation's status says it more precisely; take
				// decides.
				err = take(resp)
			}
		}
		done <- err
	})
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
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

// Info asks each bookie for its disk figures (GET_BOOKIE_INFO, the request
// BookKeeper's bookieinfo command uses: it needs only the bookie id, not the
// HTTP address, which the registration does not carry). Bookies are asked
// concurrently; a failure is recorded in its row.
func (b *Bookies) Info(ctx context.Context, ids []string) []BookieInfo {
	out := make([]BookieInfo, len(ids))
	done := make(chan struct{}, len(ids))
	for i, id := range ids {
		go func() {
			defer func() { done <- struct{}{} }()
			out[i].ID = id
			req := &wire.Request{Header: wire.Header{Op: wire.OpGetBookieInfo}, Has: wire.BodyGetBookieInfo,
				GetBookieInfo: wire.GetBookieInfoRequest{Requested: wire.BookieInfoFreeDiskSpace | wire.BookieInfoTotalDiskCapacity, HasRequested: true}}
			err := b.call(ctx, id, 0, req, func(r *wire.Response) error {
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
