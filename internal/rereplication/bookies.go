package rereplication

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/ledgerexec"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/transport"
	"github.com/foliodb/folio/internal/wire"
)

// Bookies talks to bookies directly, one request at a time, for the work
// that looks at individual bookies rather than through a ledger handle:
// the fragment copies and checks of this package, and admin's bookie
// commands (Call). It is safe for concurrent use; Close it when done.
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
	b.tr = tr
	if err != nil {
		b.err = fmt.Errorf("rereplication: bookie transport: %w", err)
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

// Call sends req to bookie (key picks the connection, as the ledger id
// does for a client) and waits for the answer or ctx's end; take runs on
// the answer while its bytes are valid (copy what it keeps). An error is a
// transport failure, a non-OK top-level status, or take's: take checks the
// operation's own status. A top-level "no such ledger" or "no such entry"
// is left to take, whose operation status says it more precisely.
func (b *Bookies) Call(ctx context.Context, bookie string, key int64, req *wire.Request, take func(*wire.Response) error) error {
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

// ReadStoredEntry reads entry e of ledger id from one bookie and returns a
// copy of the stored body (not verified).
func (b *Bookies) ReadStoredEntry(ctx context.Context, bookie metadata.BookieID, id, e int64) ([]byte, error) {
	var body []byte
	req := ledgerexec.ReadRequest(id, e)
	err := b.Call(ctx, string(bookie), id, &req, func(r *wire.Response) error {
		if err := r.Read.Status.Err(); err != nil {
			return err
		}
		body = slices.Clone(r.Read.Body)
		return nil
	})
	return body, err
}

// ReadLAC returns the highest LAC the bookies of the ledger's last
// ensemble report (READ_LAC: the explicit LAC and the one the last stored
// entry carries; it never fences), or -1 if none reports one. Unreachable
// bookies are skipped. It is what an open without recovery learns, and
// what the ledger check bounds an open ledger's last fragment with.
func (b *Bookies) ReadLAC(ctx context.Context, id int64, m *metadata.LedgerMetadata) int64 {
	var dig *digest.Digester
	if m.HasPassword {
		dig, _ = digest.New(digest.Type(m.DigestType), m.Password) // nil: parsed unverified
	}
	ens := m.Ensembles[len(m.Ensembles)-1].Ensemble
	lacs := make([]int64, len(ens))
	var wg sync.WaitGroup
	for k, bk := range ens {
		lacs[k] = -1
		wg.Go(func() {
			req := ledgerexec.ReadLACRequest(id)
			_ = b.Call(ctx, string(bk), id, &req, func(r *wire.Response) error {
				if err := r.ReadLAC.Status.Err(); err != nil {
					return err
				}
				if r.ReadLAC.HasLACBody {
					if lac, err := ParseLAC(dig, r.ReadLAC.LACBody, id); err == nil {
						lacs[k] = max(lacs[k], lac)
					}
				}
				if r.ReadLAC.HasLastEntryBody {
					if lac, err := ParseEntryLAC(dig, r.ReadLAC.LastEntryBody, id); err == nil {
						lacs[k] = max(lacs[k], lac)
					}
				}
				return nil
			})
		})
	}
	wg.Wait()
	return slices.Max(lacs)
}

// ParseLAC reads the LAC of ledger id from an explicit-LAC body (READ_LAC's
// LAC body): verified when dig is not nil, else only parsed.
func ParseLAC(dig *digest.Digester, body []byte, id int64) (int64, error) {
	if dig != nil {
		return dig.VerifyLAC(body, id)
	}
	if len(body) < 16 {
		return -1, fmt.Errorf("LAC body of %d bytes", len(body))
	}
	return int64(uint64(body[8])<<56 | uint64(body[9])<<48 | uint64(body[10])<<40 | uint64(body[11])<<32 |
		uint64(body[12])<<24 | uint64(body[13])<<16 | uint64(body[14])<<8 | uint64(body[15])), nil
}

// ParseEntryLAC reads the LAC piggybacked on a stored entry body of ledger
// id: verified when dig is not nil, else only parsed.
func ParseEntryLAC(dig *digest.Digester, body []byte, id int64) (int64, error) {
	if dig != nil {
		e, err := dig.VerifyEntry(body, id, -1)
		return e.LAC, err
	}
	_, _, lac, _, err := digest.ParseEntryHeader(body)
	return lac, err
}
