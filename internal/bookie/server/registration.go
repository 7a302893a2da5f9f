package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/metadata"
)

// Registrar keeps a bookie registered in the metadata store under a lease
// (spec/metadata.md §2.6): writable or read-only, whichever SetReadOnly last
// asked for. When the session is lost (the lease expired: a partition, a
// paused process) it opens a new one and registers again, as Java's
// EtcdBookieRegister does; failures are retried every RegistrationRetry.
type Registrar struct {
	md          metadata.Driver
	id          metadata.BookieID
	ttl         time.Duration
	retry       time.Duration
	clock       clock.Clock
	log         *slog.Logger
	removeStale bool
	info        *metadata.BookieServiceInfo

	wake  chan struct{} // capacity 1: "desired state changed"
	ready chan struct{} // closed at the first successful registration
	done  chan struct{} // closed when Run returns

	mu struct {
		sync.Mutex
		wantReadOnly bool
		session      metadata.Session
		// registered: a registration in mode registeredRO exists under
		// session.
		registered   bool
		registeredRO bool
		readyClosed  bool
		running      bool
	}
}

// RegistrarOptions configure a Registrar.
type RegistrarOptions struct {
	// SessionTTL is the lease TTL (Java: zkTimeout, 10 s).
	SessionTTL time.Duration
	// Retry is the pause after a failed attempt.
	Retry time.Duration
	// RemoveStale deletes both of the bookie's registration keys before
	// the first registration, whoever holds them: `folio standalone` uses
	// it to clear registrations its own bookies left in a crash. A plain
	// bookie waits for a stale key's lease to expire instead (Java's
	// behaviour, which protects against two processes with one id).
	RemoveStale bool
	Clock       clock.Clock
	Logger      *slog.Logger
	// ServiceInfo is what the registration publishes (ZooKeeper stores
	// it; see metadata.SessionOptions). Nil: derived from the bookie id.
	ServiceInfo *metadata.BookieServiceInfo
}

// NewRegistrar returns a registrar for id; Run starts it.
func NewRegistrar(md metadata.Driver, id metadata.BookieID, readOnly bool, o RegistrarOptions) *Registrar {
	if o.Retry <= 0 {
		o.Retry = DefaultRegistrationRetry
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	r := &Registrar{
		md: md, id: id, ttl: o.SessionTTL, retry: o.Retry, clock: o.Clock,
		log: o.Logger, removeStale: o.RemoveStale, info: o.ServiceInfo,
		wake: make(chan struct{}, 1), ready: make(chan struct{}), done: make(chan struct{}),
	}
	r.mu.wantReadOnly = readOnly
	return r
}

// SetReadOnly changes the mode the bookie is registered in. It returns at
// once; Run moves the key.
func (r *Registrar) SetReadOnly(readOnly bool) {
	r.mu.Lock()
	r.mu.wantReadOnly = readOnly
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Ready is closed once the bookie has been registered for the first time.
func (r *Registrar) Ready() <-chan struct{} { return r.ready }

// State reports the current registration: whether one exists and in which
// mode.
func (r *Registrar) State() (registered, readOnly bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.registered, r.mu.registeredRO
}

// Run keeps the registration until ctx is cancelled; it does not
// unregister (Deregister does, after Run has returned).
func (r *Registrar) Run(ctx context.Context) {
	defer close(r.done)
	r.mu.Lock()
	r.mu.running = true
	r.mu.Unlock()
	for ctx.Err() == nil {
		if err := r.step(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			r.log.Warn("bookie registration failed; retrying", "retry", r.retry, "err", err)
			if clock.Sleep(ctx, r.clock, r.retry) != nil {
				return
			}
			continue
		}
		r.mu.Lock()
		sess := r.mu.session
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-sess.Done():
			r.log.Warn("metadata session lost; registering again")
			r.mu.Lock()
			r.mu.session, r.mu.registered = nil, false
			r.mu.Unlock()
			// The keepalives may have stopped getting answers (the store
			// failed over, or was without a quorum for a TTL) while the
			// lease itself lives on: revoke it, so that its registration
			// does not hold up the new one until it expires. Bounded by
			// the TTL, after which it expires anyway.
			ttl := r.ttl
			if ttl <= 0 {
				ttl = metadata.DefaultSessionTTL
			}
			rctx, cancel := context.WithTimeout(ctx, ttl)
			if err := sess.Close(rctx); err != nil && ctx.Err() == nil {
				r.log.Warn("cannot revoke the lost session's lease; its registration expires with it", "err", err)
			}
			cancel()
		}
	}
}

// step makes the registration what is wanted: opens a session if there is
// none, then registers in the wanted mode.
func (r *Registrar) step(ctx context.Context) error {
	r.mu.Lock()
	sess, want := r.mu.session, r.mu.wantReadOnly
	if sess != nil && r.mu.registered && r.mu.registeredRO == want {
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	if sess == nil {
		s, err := r.md.OpenSession(ctx, metadata.SessionOptions{TTL: r.ttl, ServiceInfo: r.info})
		if err != nil {
			return err
		}
		if r.removeStale {
			for _, ro := range []bool{false, true} {
				if err := s.UnregisterBookie(ctx, r.id, ro); err != nil {
					_ = s.Close(context.WithoutCancel(ctx))
					return err
				}
			}
			r.removeStale = false
		}
		sess = s
		r.mu.Lock()
		r.mu.session, r.mu.registered = s, false
		r.mu.Unlock()
	}
	err := sess.RegisterBookie(ctx, r.id, want)
	if errors.Is(err, metadata.ErrSessionExpired) {
		_ = sess.Close(context.WithoutCancel(ctx))
		r.mu.Lock()
		r.mu.session, r.mu.registered = nil, false
		r.mu.Unlock()
		return err
	}
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.mu.registered, r.mu.registeredRO = true, want
	if !r.mu.readyClosed {
		r.mu.readyClosed = true
		close(r.ready)
	}
	r.mu.Unlock()
	mode := "writable"
	if want {
		mode = "read-only"
	}
	r.log.Info("bookie registered", "mode", mode)
	return nil
}

// Deregister removes the registration and ends the session (its lease is
// revoked). Call it after Run has returned (cancel Run's context and wait
// for Done).
func (r *Registrar) Deregister(ctx context.Context) error {
	r.mu.Lock()
	sess := r.mu.session
	r.mu.session, r.mu.registered = nil, false
	r.mu.Unlock()
	if sess == nil {
		return nil
	}
	var errs []error
	for _, ro := range []bool{false, true} {
		if err := sess.UnregisterBookie(ctx, r.id, ro); err != nil {
			errs = append(errs, err)
		}
	}
	if err := sess.Close(ctx); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		r.log.Info("bookie unregistered")
	}
	return errors.Join(errs...)
}

// Done is closed when Run has returned.
func (r *Registrar) Done() <-chan struct{} { return r.done }
