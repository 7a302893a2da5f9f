package zk

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"sync"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/foliodb/folio/internal/metadata"
)

// session is one ZooKeeper session on its own connection: the ephemeral
// znodes a bookie registers (and AutoRecovery's locks and votes) live as
// long as it does. Done closes when the server reports the session expired
// (the client learns it when it reconnects after a partition or a pause
// longer than the timeout) or when it is closed; the connection is then
// closed, so that nothing is ever created under the new session the client
// library would otherwise open in its place. The owner opens a new session
// and registers again, as Java's bookie does on an Expired event.
type session struct {
	d    *Driver
	c    *conn
	ttl  time.Duration // as asked for; the server clamps it to its bounds
	info *metadata.BookieServiceInfo

	done      chan struct{}
	doneOnce  sync.Once
	closeOnce sync.Once
}

// OpenSession establishes a ZooKeeper session with timeout opts.TTL
// (default 10 s) on a connection of its own.
func (d *Driver) OpenSession(ctx context.Context, opts metadata.SessionOptions) (metadata.Session, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	ttl := opts.TTL
	if ttl <= 0 {
		ttl = metadata.DefaultSessionTTL
	}
	s := &session{d: d, ttl: ttl, info: opts.ServiceInfo, done: make(chan struct{})}
	expired := make(chan struct{})
	var expiredOnce sync.Once
	c, err := dial(ctx, d.cfg, ttl, func(ev gozk.Event) {
		if ev.Type == gozk.EventSession && ev.State == gozk.StateExpired {
			expiredOnce.Do(func() { close(expired) })
		}
	})
	if err != nil {
		return nil, err
	}
	s.c = c
	d.mu.Lock()
	if d.mu.closed {
		d.mu.Unlock()
		c.close()
		return nil, metadata.ErrClosed
	}
	d.mu.sessions[s] = struct{}{}
	d.wg.Add(1)
	d.mu.Unlock()
	go func() {
		defer d.wg.Done()
		select {
		case <-expired:
			s.end()
		case <-s.done:
		}
	}()
	return s, nil
}

// SessionID returns the ZooKeeper session id (for tests and logs).
func (s *session) SessionID() int64 { return s.c.sessionID }

func (s *session) Done() <-chan struct{} { return s.done }

func (s *session) expired() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// end marks the session done and closes its connection (closing the
// session on the server if it is still there). Idempotent.
func (s *session) end() {
	s.doneOnce.Do(func() { close(s.done) })
	s.closeOnce.Do(func() {
		s.c.close()
		s.d.mu.Lock()
		delete(s.d.mu.sessions, s)
		s.d.mu.Unlock()
	})
}

// Close closes the session: the server deletes its ephemeral znodes at once.
func (s *session) Close(ctx context.Context) error {
	s.end()
	return nil
}

func (s *session) expiredErr(what string) error {
	return fmt.Errorf("%s (session %#x): %w", what, s.c.sessionID, metadata.ErrSessionExpired)
}

// own checks that a znode the session just created belongs to it, and not
// to a session the client library opened after this one expired; if not,
// it deletes the znode and ends the session.
func (s *session) own(ctx context.Context, p string, st *gozk.Stat) error {
	if st.EphemeralOwner == s.c.sessionID {
		return nil
	}
	_ = s.d.conn.delete(ctx, p, -1)
	s.end()
	return s.expiredErr("create " + p)
}

// serviceInfo is the registration value for id: the session's
// BookieServiceInfo, or the default one derived from the id.
func (s *session) serviceInfo(id metadata.BookieID) ([]byte, error) {
	info := s.info
	if info == nil {
		def, err := metadata.DefaultBookieServiceInfo(id)
		if err != nil {
			return nil, err
		}
		info = &def
	}
	return metadata.EncodeBookieServiceInfo(*info)
}

// RegisterBookie creates the ephemeral `available/<id>` (or
// `available/readonly/<id>`) with the BookieServiceInfoFormat value, and
// deletes the other mode's znode in the same multi. A znode already held
// by this session is kept. One held by another session (a previous process
// whose session has not expired yet) is waited for up to
// Config.RegistrationWait (default twice the session timeout; Java waits
// zkTimeout), then ErrBookieRegistered: ZooKeeper never holds two
// registrations of one id.
func (s *session) RegisterBookie(ctx context.Context, id metadata.BookieID, readOnly bool) error {
	if err := checkBookieID(id); err != nil {
		return err
	}
	if s.expired() {
		return s.expiredErr("register bookie " + string(id))
	}
	if err := s.d.checkOpen(); err != nil {
		return err
	}
	value, err := s.serviceInfo(id)
	if err != nil {
		return err
	}
	p, other := s.d.p.registration(id, readOnly), s.d.p.registration(id, !readOnly)
	wait := s.d.cfg.RegistrationWait
	if wait <= 0 {
		wait = 2 * s.ttl
	}
	var deadline time.Time
	for attempt := 0; ; attempt++ {
		ost, err := s.c.exists(ctx, other)
		if err != nil {
			return s.regErr(p, err)
		}
		ops := []any{
			&gozk.CreateRequest{Path: p, Acl: openACL, Flags: gozk.FlagEphemeral},
			&gozk.SetDataRequest{Path: p, Data: value, Version: 0},
		}
		if ost != nil {
			ops = append(ops, &gozk.DeleteRequest{Path: other, Version: ost.Version})
		}
		rs, err := s.c.multi(ctx, ops...)
		if err == nil {
			return s.own(ctx, p, rs[1].Stat)
		}
		i, opErr := failedOp(rs, err)
		switch {
		case errors.Is(opErr, gozk.ErrNoNode) && i <= 0 && attempt < 3:
			// available/ or available/readonly/ missing (Java creates
			// readonly/ on demand too).
			if err := s.d.conn.ensurePath(ctx, path.Dir(p)); err != nil {
				return s.regErr(p, err)
			}
		case errors.Is(opErr, gozk.ErrNodeExists) && i <= 0:
			st, err := s.c.exists(ctx, p)
			if err != nil {
				return s.regErr(p, err)
			}
			if st == nil {
				continue // gone meanwhile
			}
			if st.EphemeralOwner == s.c.sessionID {
				if err := s.d.conn.delete(ctx, other, -1); err != nil && !errors.Is(err, gozk.ErrNoNode) {
					return s.regErr(other, err)
				}
				return nil
			}
			if deadline.IsZero() {
				deadline = time.Now().Add(wait)
			}
			gone, err := s.waitDeleted(ctx, p, time.Until(deadline))
			if err != nil {
				return err
			}
			if !gone {
				return fmt.Errorf("register bookie %s: %w: %s is held by session %#x, not ours (%#x), and was not released within %v (another process with this bookie id, or a crashed one whose session has not expired)",
					id, metadata.ErrBookieRegistered, p, st.EphemeralOwner, s.c.sessionID, wait)
			}
		case i == 2:
			// The other mode's znode changed meanwhile: look again.
		default:
			return s.regErr(p, err)
		}
	}
}

func (s *session) regErr(p string, err error) error {
	if errors.Is(err, gozk.ErrSessionExpired) || errors.Is(err, gozk.ErrConnectionClosed) && s.expired() {
		s.end()
		return s.expiredErr("register at " + p)
	}
	return s.d.storeErr("register bookie at "+p, err)
}

// waitDeleted waits up to d for p to be deleted; ErrSessionExpired if our
// own session ends first.
func (s *session) waitDeleted(ctx context.Context, p string, d time.Duration) (bool, error) {
	if d <= 0 {
		return false, nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		st, ch, err := s.c.existsW(ctx, p)
		if err != nil {
			return false, s.regErr(p, err)
		}
		if st == nil {
			return true, nil
		}
		select {
		case <-s.done:
			return false, s.expiredErr("register at " + p)
		case <-ctx.Done():
			return false, s.d.storeErr("register bookie at "+p, ctx.Err())
		case <-timer.C:
			return false, nil
		case ev := <-ch:
			if ev.Type == gozk.EventNodeDeleted {
				return true, nil
			}
		}
	}
}

// UnregisterBookie deletes the registration znode, whoever holds it (as
// Java does: a restarted bookie may remove its crashed predecessor's).
func (s *session) UnregisterBookie(ctx context.Context, id metadata.BookieID, readOnly bool) error {
	if err := checkBookieID(id); err != nil {
		return err
	}
	if err := s.d.checkOpen(); err != nil {
		return err
	}
	p := s.d.p.registration(id, readOnly)
	if err := s.d.conn.delete(ctx, p, -1); err != nil && !errors.Is(err, gozk.ErrNoNode) {
		return s.d.storeErr("unregister bookie at "+p, err)
	}
	return nil
}

// WritableBookies lists the children of available/ (but readonly).
func (d *Driver) WritableBookies(ctx context.Context) ([]metadata.BookieID, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	return d.listIDs(ctx, d.p.available, readonlyNode)
}

// ReadOnlyBookies lists the children of available/readonly/.
func (d *Driver) ReadOnlyBookies(ctx context.Context) ([]metadata.BookieID, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	return d.listIDs(ctx, d.p.readonly, "")
}

// ReadBookieServiceInfo returns what a registered bookie published; a
// registration without a value (a "legacy" bookie) gets the info derived
// from its id, as Java's client does. ErrNotFound if the bookie is not
// registered.
func (d *Driver) ReadBookieServiceInfo(ctx context.Context, id metadata.BookieID) (metadata.BookieServiceInfo, error) {
	if err := checkBookieID(id); err != nil {
		return metadata.BookieServiceInfo{}, err
	}
	for _, ro := range []bool{false, true} {
		p := d.p.registration(id, ro)
		b, _, err := d.conn.get(ctx, p)
		if errors.Is(err, gozk.ErrNoNode) {
			continue
		}
		if err != nil {
			return metadata.BookieServiceInfo{}, d.storeErr("read "+p, err)
		}
		return metadata.DecodeRegistrationValue(p, id, b)
	}
	return metadata.BookieServiceInfo{}, fmt.Errorf("bookie %s: %w", id, metadata.ErrNotFound)
}

// watchDir reads dir's children with a watch; an absent dir is empty, with
// a watch for its creation.
func (d *Driver) watchDir(ctx context.Context, dir, skip string) ([]metadata.BookieID, <-chan gozk.Event, error) {
	for {
		names, ch, err := d.conn.childrenW(ctx, dir)
		if errors.Is(err, gozk.ErrNoNode) {
			st, ch, err := d.conn.existsW(ctx, dir)
			if err != nil {
				return nil, nil, d.storeErr("watch "+dir, err)
			}
			if st != nil {
				continue // created meanwhile
			}
			return nil, ch, nil
		}
		if err != nil {
			return nil, nil, d.storeErr("watch "+dir, err)
		}
		ids, err := idsOf(dir, names, skip)
		return ids, ch, err
	}
}

// readMembership reads both sets with watches.
func (d *Driver) readMembership(ctx context.Context) (metadata.BookiesEvent, []<-chan gozk.Event, error) {
	w, wch, err := d.watchDir(ctx, d.p.available, readonlyNode)
	if err != nil {
		return metadata.BookiesEvent{}, nil, err
	}
	ro, rch, err := d.watchDir(ctx, d.p.readonly, "")
	if err != nil {
		return metadata.BookiesEvent{}, nil, err
	}
	return metadata.BookiesEvent{Writable: w, ReadOnly: ro}, []<-chan gozk.Event{wch, rch}, nil
}

// WatchBookies watches the children of available/ and available/readonly/,
// re-reading both at every change; snapshots are coalesced while the
// reader is slow, and one equal to the last delivered is not sent again.
func (d *Driver) WatchBookies(ctx context.Context) (<-chan metadata.BookiesEvent, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	first, chs, err := d.readMembership(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan metadata.BookiesEvent)
	err = d.goWatch(ctx, func(ctx context.Context) {
		defer close(out)
		pending, final := &first, false
		var last *metadata.BookiesEvent
		for {
			if pending == nil && final {
				return
			}
			var send chan<- metadata.BookiesEvent
			var ev metadata.BookiesEvent
			if pending != nil {
				send, ev = out, *pending
			}
			var c0, c1 <-chan gozk.Event
			if !final {
				c0, c1 = chs[0], chs[1]
			}
			select {
			case <-ctx.Done():
				return
			case send <- ev:
				last, pending = &ev, nil
			case <-c0:
			case <-c1:
			}
			if send != nil && pending == nil || final {
				continue
			}
			// A change (or a lost watch): read both sets again, through
			// connection errors.
			snap, nchs, err := d.readMembership(ctx)
			for err != nil && d.transient(err) && d.backoff(ctx) {
				snap, nchs, err = d.readMembership(ctx)
			}
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				pending, final = &metadata.BookiesEvent{Err: err}, true
				continue
			}
			chs = nchs
			if last == nil || !slices.Equal(last.Writable, snap.Writable) || !slices.Equal(last.ReadOnly, snap.ReadOnly) {
				pending = &snap
			} else {
				pending = nil
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
