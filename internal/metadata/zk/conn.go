package zk

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	gozk "github.com/go-zookeeper/zk"
)

// conn is one ZooKeeper client connection (one session at a time) with
// context-aware calls. The client library's calls take no context: each
// call runs in a goroutine, and a cancelled context returns at once while
// the request finishes (or fails when the connection closes) in the
// background; its outcome is then unknown, as for any store error.
type conn struct {
	c         *gozk.Conn
	sessionID int64 // the session established at dial
	servers   string
	closeOnce sync.Once
}

// openACL is the ACL of every znode Folio creates: world:anyone with all
// permissions, what Java writes unless zkEnableSecurity is set.
var openACL = gozk.WorldACL(gozk.PermAll)

type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}

// dial connects and waits for a session (up to cfg.DialTimeout). onEvent,
// if not nil, receives every session event, on the client's goroutine: it
// must not block.
func dial(ctx context.Context, cfg Config, timeout time.Duration, onEvent func(gozk.Event)) (*conn, error) {
	servers := strings.Join(cfg.Servers, ",")
	connected := make(chan struct{})
	var once sync.Once
	cb := func(ev gozk.Event) {
		if ev.Type == gozk.EventSession && ev.State == gozk.StateHasSession {
			once.Do(func() { close(connected) })
		}
		if onEvent != nil {
			onEvent(ev)
		}
	}
	opts := list(gozk.WithLogger(discardLogger{}), gozk.WithLogInfo(false), gozk.WithEventCallback(cb))
	if cfg.Dialer != nil {
		opts = append(opts, gozk.WithDialer(cfg.Dialer))
	}
	zc, _, err := gozk.Connect(cfg.Servers, timeout, opts...)
	if err != nil {
		return nil, fmt.Errorf("zookeeper %s: connect: %w", servers, err)
	}
	timer := time.NewTimer(cfg.DialTimeout)
	defer timer.Stop()
	select {
	case <-connected:
	case <-timer.C:
		zc.Close()
		return nil, fmt.Errorf("zookeeper %s is not reachable: no session within %v (is ZooKeeper running there?)", servers, cfg.DialTimeout)
	case <-ctx.Done():
		zc.Close()
		return nil, fmt.Errorf("zookeeper %s: connect: %w", servers, ctx.Err())
	}
	return &conn{c: zc, sessionID: zc.SessionID(), servers: servers}, nil
}

// list makes a slice of values of a type that cannot be named (the
// library's connection options).
func list[T any](xs ...T) []T { return xs }

func (c *conn) close() { c.closeOnce.Do(c.c.Close) }

// call runs op and returns its result, or ctx's error as soon as ctx ends.
func call[T any](ctx context.Context, op func() (T, error)) (T, error) {
	if err := ctx.Err(); err != nil {
		var zero T
		return zero, err
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := op()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

type data struct {
	b  []byte
	st *gozk.Stat
}

func (c *conn) get(ctx context.Context, p string) ([]byte, *gozk.Stat, error) {
	r, err := call(ctx, func() (data, error) {
		b, st, err := c.c.Get(p)
		return data{b, st}, err
	})
	return r.b, r.st, err
}

type watched struct {
	b  []byte
	st *gozk.Stat
	ch <-chan gozk.Event
	cs []string
}

func (c *conn) getW(ctx context.Context, p string) ([]byte, *gozk.Stat, <-chan gozk.Event, error) {
	r, err := call(ctx, func() (watched, error) {
		b, st, ch, err := c.c.GetW(p)
		return watched{b: b, st: st, ch: ch}, err
	})
	return r.b, r.st, r.ch, err
}

// exists returns the stat, or nil if the znode is absent.
func (c *conn) exists(ctx context.Context, p string) (*gozk.Stat, error) {
	r, err := call(ctx, func() (data, error) {
		ok, st, err := c.c.Exists(p)
		if !ok {
			st = nil
		}
		return data{st: st}, err
	})
	return r.st, err
}

// existsW sets a watch on p whether or not it exists; the stat is nil if it
// is absent.
func (c *conn) existsW(ctx context.Context, p string) (*gozk.Stat, <-chan gozk.Event, error) {
	r, err := call(ctx, func() (watched, error) {
		ok, st, ch, err := c.c.ExistsW(p)
		if !ok {
			st = nil
		}
		return watched{st: st, ch: ch}, err
	})
	return r.st, r.ch, err
}

func (c *conn) children(ctx context.Context, p string) ([]string, error) {
	return call(ctx, func() ([]string, error) {
		cs, _, err := c.c.Children(p)
		return cs, err
	})
}

func (c *conn) childrenW(ctx context.Context, p string) ([]string, <-chan gozk.Event, error) {
	r, err := call(ctx, func() (watched, error) {
		cs, _, ch, err := c.c.ChildrenW(p)
		return watched{cs: cs, ch: ch}, err
	})
	return r.cs, r.ch, err
}

func (c *conn) set(ctx context.Context, p string, b []byte, v int32) (*gozk.Stat, error) {
	return call(ctx, func() (*gozk.Stat, error) { return c.c.Set(p, b, v) })
}

func (c *conn) create(ctx context.Context, p string, b []byte, flags int32) (string, error) {
	return call(ctx, func() (string, error) { return c.c.Create(p, b, flags, openACL) })
}

func (c *conn) delete(ctx context.Context, p string, v int32) error {
	_, err := call(ctx, func() (struct{}, error) { return struct{}{}, c.c.Delete(p, v) })
	return err
}

func (c *conn) sync(ctx context.Context, p string) error {
	_, err := call(ctx, func() (string, error) { return c.c.Sync(p) })
	return err
}

// multi runs ops atomically. On failure the error is the first failing
// op's, and the responses say which op failed (opErr).
func (c *conn) multi(ctx context.Context, ops ...any) ([]gozk.MultiResponse, error) {
	return call(ctx, func() ([]gozk.MultiResponse, error) { return c.c.Multi(ops...) })
}

// failedOp returns the index and error of the op that made a multi fail:
// the first with an error (the ops after it report a runtime
// inconsistency). -1 and err when the answer has no per-op results.
func failedOp(rs []gozk.MultiResponse, err error) (int, error) {
	for i, r := range rs {
		if r.Error != nil {
			return i, r.Error
		}
	}
	return -1, err
}

// createWithStat creates p with b and returns the new znode's stat, in one
// atomic multi: create p empty, then set b at version 0 (the library's
// create returns no stat; the set's stat carries the mzxid that is the
// znode's metadata.Version). ErrNodeExists, ErrNoNode (a parent is
// missing) as for create.
func (c *conn) createWithStat(ctx context.Context, p string, b []byte, flags int32) (*gozk.Stat, error) {
	rs, err := c.multi(ctx,
		&gozk.CreateRequest{Path: p, Data: nil, Acl: openACL, Flags: flags},
		&gozk.SetDataRequest{Path: p, Data: b, Version: 0})
	if err != nil {
		_, e := failedOp(rs, err)
		return nil, e
	}
	if len(rs) != 2 || rs[1].Stat == nil {
		return nil, fmt.Errorf("create %s: the multi's answer has no stat", p)
	}
	return rs[1].Stat, nil
}

// ensurePath creates p and its missing ancestors as empty persistent
// znodes (ZkUtils.createFullPathOptimistic); existing ones are fine.
func (c *conn) ensurePath(ctx context.Context, p string) error {
	if p == "/" || p == "" {
		return nil
	}
	_, err := c.create(ctx, p, nil, gozk.FlagPersistent)
	switch {
	case err == nil, errors.Is(err, gozk.ErrNodeExists):
		return nil
	case errors.Is(err, gozk.ErrNoNode):
		if err := c.ensurePath(ctx, path.Dir(p)); err != nil {
			return err
		}
		_, err = c.create(ctx, p, nil, gozk.FlagPersistent)
		if err == nil || errors.Is(err, gozk.ErrNodeExists) {
			return nil
		}
	}
	return err
}

// createFull creates p (flags, data b), creating missing ancestors first
// when the parent is absent; it returns the created path (sequential
// znodes get a suffix).
func (c *conn) createFull(ctx context.Context, p string, b []byte, flags int32) (string, error) {
	for attempt := 0; ; attempt++ {
		created, err := c.create(ctx, p, b, flags)
		if !errors.Is(err, gozk.ErrNoNode) || attempt == 3 {
			return created, err
		}
		if err := c.ensurePath(ctx, path.Dir(p)); err != nil {
			return "", err
		}
	}
}

// createFullWithStat is createWithStat with missing ancestors created.
func (c *conn) createFullWithStat(ctx context.Context, p string, b []byte, flags int32) (*gozk.Stat, error) {
	for attempt := 0; ; attempt++ {
		st, err := c.createWithStat(ctx, p, b, flags)
		if !errors.Is(err, gozk.ErrNoNode) || attempt == 3 {
			return st, err
		}
		if err := c.ensurePath(ctx, path.Dir(p)); err != nil {
			return nil, err
		}
	}
}
