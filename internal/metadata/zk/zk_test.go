package zk_test

import (
	"context"
	"os"
	"path"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/metadatatest"
	"github.com/foliodb/folio/internal/metadata/zk"
	"github.com/foliodb/folio/internal/metadata/zk/zktest"
)

// Every test shares one ZooKeeper server (zktest.Shared) and works under
// its own ledgers root (zktest.Scope). Tests that stop a server start
// their own.
func TestMain(m *testing.M) {
	code := m.Run()
	zktest.StopShared()
	os.Exit(code)
}

// sessionTTL is the session timeout of the contract suite's sessions: short
// enough for the expiry cases, long enough that a loaded 2-core machine
// stalling the client for a second does not expire a session a case keeps
// (RegistrationConflict failed once under load with 1 s).
const sessionTTL = 3 * time.Second

func ctxOf(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// env is a driver on the shared server under a fresh root, the recorder of
// its sessions, and a raw client on the same server.
type env struct {
	srv      *zktest.Server
	root     string
	uri      string
	sessions *zktest.Sessions
	raw      *gozk.Conn
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv := zktest.Shared(t)
	e := &env{srv: srv, root: zktest.Scope(t), sessions: zktest.NewSessions()}
	e.uri = zktest.URI(srv, e.root)
	e.raw = rawConn(t, srv.Addr())
	return e
}

func rawConn(t *testing.T, addr string) *gozk.Conn {
	t.Helper()
	c, _, err := gozk.Connect([]string{addr}, 10*time.Second, gozk.WithLogInfo(false), gozk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// open opens a driver on uri (its sessions dialled through e.sessions).
func (e *env) open(t *testing.T, uri string) *zk.Driver {
	t.Helper()
	u, err := metadata.ParseURI(uri)
	if err != nil {
		t.Fatal(err)
	}
	d, err := zk.Open(ctxOf(t), u, zk.Config{Dialer: e.sessions.Dial})
	if err != nil {
		t.Fatalf("open %s: %v", uri, err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return d
}

// put writes raw bytes at p, creating it and its parents if needed.
func (e *env) put(t *testing.T, p string, value []byte) {
	t.Helper()
	if _, err := e.raw.Set(p, value, -1); err == nil {
		return
	}
	dir := path.Dir(p)
	var parents []string
	for ; dir != "/"; dir = path.Dir(dir) {
		parents = append([]string{dir}, parents...)
	}
	for _, q := range parents {
		if _, err := e.raw.Create(q, nil, 0, gozk.WorldACL(gozk.PermAll)); err != nil && err != gozk.ErrNodeExists {
			t.Fatalf("create %s: %v", q, err)
		}
	}
	if _, err := e.raw.Create(p, value, 0, gozk.WorldACL(gozk.PermAll)); err != nil {
		t.Fatalf("create %s: %v", p, err)
	}
}

type rawWriter struct {
	e *env
	t *testing.T
	m zk.Manager
}

func (w rawWriter) PutLedgerRaw(ctx context.Context, id int64, value []byte) (string, error) {
	p, err := w.m.LedgerPath(w.e.root, id)
	if err != nil {
		return "", err
	}
	w.e.put(w.t, p, value)
	return p, nil
}

func (w rawWriter) PutCheckTimeRaw(ctx context.Context, check metadata.PeriodicCheck, value []byte) (string, error) {
	p := w.e.root + "/underreplication/" + check.Node()
	w.e.put(w.t, p, value)
	return p, nil
}

// TestContract runs the contract suite on the default (hierarchical)
// manager and on the long hierarchical and flat ones. The legacy
// hierarchical manager cannot hold the suite's largest ids (its paths have
// ten digits); its paths are pinned by TestLedgerPathsGolden.
func TestContract(t *testing.T) {
	for _, m := range []zk.Manager{zk.Hierarchical, zk.LongHierarchical, zk.Flat} {
		t.Run(m.String(), func(t *testing.T) { runContract(t, m) })
	}
}

func runContract(t *testing.T, m zk.Manager) {
	metadatatest.Run(t, func(t *testing.T) *metadatatest.Harness {
		e := newEnv(t)
		uri := "zk+" + m.String() + "://" + e.srv.Addr() + e.root
		return &metadatatest.Harness{
			Driver:     e.open(t, uri),
			Open:       func(t *testing.T) metadata.Driver { return e.open(t, uri) },
			Raw:        rawWriter{e: e, t: t, m: m},
			SessionTTL: sessionTTL,
			// End the session from outside, as ZooKeeper does when its
			// client stops heartbeating: its ephemeral znodes go, and its
			// client learns it has expired.
			ExpireSession: func(t *testing.T, s metadata.Session) {
				id := s.(interface{ SessionID() int64 }).SessionID()
				if err := e.sessions.Expire(ctxOf(t), e.srv.Addr(), id); err != nil {
					t.Fatal(err)
				}
			},
			DelayGranularity: time.Second,
		}
	})
}
