package autorecovery_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/autorecovery"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/etcd"
	"github.com/foliodb/folio/internal/metadata/etcd/etcdtest"
	"github.com/foliodb/folio/internal/metadata/metadatatest"
	"github.com/foliodb/folio/internal/rereplication"
)

// outageAtUnlock is an etcd driver handle whose first lock's Unlock runs
// through an etcd outage: the test takes the quorum away (members stopped)
// just before the real Unlock and gives it back after it failed. Only the
// timing is arranged; the outage and the failure are etcd's.
type outageAtUnlock struct {
	*etcd.Driver
	once      sync.Once
	unlocking chan struct{} // the Unlock waits for the outage
	proceed   chan struct{} // the quorum is gone: unlock
	failed    chan error    // the real Unlock's result
	restored  chan struct{} // the quorum is back: return
}

func (d *outageAtUnlock) LockUnderReplicatedLedger(ctx context.Context, s metadata.Session, id int64, owner metadata.BookieID) (metadata.Lock, error) {
	l, err := d.Driver.LockUnderReplicatedLedger(ctx, s, id, owner)
	if err != nil {
		return nil, err
	}
	return &outageLock{Lock: l, d: d}, nil
}

type outageLock struct {
	metadata.Lock
	d *outageAtUnlock
}

func (l *outageLock) Unlock(ctx context.Context) error {
	first := false
	l.d.once.Do(func() { first = true })
	if !first {
		return l.Lock.Unlock(ctx)
	}
	l.d.unlocking <- struct{}{}
	<-l.d.proceed
	err := l.Lock.Unlock(ctx)
	l.d.failed <- err
	<-l.d.restored
	return err
}

// TestWorkerEndsSessionWhenUnlockFails: etcd loses its quorum just as a
// replication worker releases the lock of a ledger it deferred (an OPEN
// ledger in its grace period), for longer than the worker waits for the
// release but shorter than its session's TTL. The lock stays with the
// worker's live session, where it would block the ledger's repair, by every
// worker (this one included: locks are not re-entrant), until the session
// ends. The worker ends the session (Step's ErrLockNotReleased), which
// releases the lock at once, and goes on under a new one: another owner
// takes the ledger, and a ledger marked afterwards is cleared.
func TestWorkerEndsSessionWhenUnlockFails(t *testing.T) {
	cl := etcdtest.StartCluster(t, 3)
	uri := cl.URI(etcdtest.Scope(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	md := openSessionStoreHandle(t, uri)
	if _, err := md.InitNewCluster(ctx); err != nil {
		t.Fatal(err)
	}
	registerFakeBookies(ctx, t, md, 3)
	// An OPEN ledger with a lost bookie in its last ensemble: the worker
	// leaves it to its writer for the grace period.
	open := metadatatest.NewLedgerMetadata(3, 2, 2)
	open.Ensembles[0].Ensemble[2] = "10.0.0.4:3181"
	deferred, _, err := md.CreateLedger(ctx, open)
	if err != nil {
		t.Fatal(err)
	}
	ar := md.(metadata.AutoRecoveryDriver)
	if err := ar.MarkLedgerUnderReplicated(ctx, deferred, []metadata.BookieID{"10.0.0.4:3181"}); err != nil {
		t.Fatal(err)
	}

	wmd, err := metadata.Open(ctx, uri, metadata.Options{
		RequestTimeout: 500 * time.Millisecond, RetryBackoff: 10 * time.Millisecond, RetryBackoffMax: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wmd.Close() })
	drv := &outageAtUnlock{Driver: wmd.(*etcd.Driver), unlocking: make(chan struct{}), proceed: make(chan struct{}),
		failed: make(chan error, 1), restored: make(chan struct{})}
	wc, err := client.New(ctx, client.Config{MetadataServiceURI: uri})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wc.Close() })
	bks := rereplication.NewBookies(time.Second, nil)
	t.Cleanup(func() { bks.Close() })
	const id = metadata.BookieID("127.0.0.1:101")
	w, err := autorecovery.NewWorker(autorecovery.WorkerConfig{Driver: drv, Client: wc, Bookies: bks, ID: id,
		SessionTTL: 20 * time.Second, OpenLedgerRereplicationGracePeriod: time.Hour, FailureBackoff: time.Hour,
		PollInterval: 50 * time.Millisecond, ReleaseTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	done := runComponent(t, w.Run)

	select {
	case <-drv.unlocking:
	case <-ctx.Done():
		t.Fatal("the worker never released a lock")
	}
	// Members stop gracefully, each waiting for the worker's streams to
	// it for etcd's request timeout: stop both at once.
	var stops sync.WaitGroup
	for _, m := range []int{0, 1} {
		stops.Go(func() { cl.Stop(m) })
	}
	stops.Wait()
	drv.proceed <- struct{}{}
	if err := <-drv.failed; err == nil {
		t.Fatal("Unlock succeeded without a quorum")
	}
	cl.Restart(1)
	close(drv.restored)

	// The lock is released with the session that held it.
	s, err := md.OpenSession(ctx, metadata.SessionOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	var lock metadata.Lock
	eventually(ctx, t, "another owner locking the deferred ledger", func() bool {
		l, err := ar.LockUnderReplicatedLedger(ctx, s, deferred, "127.0.0.1:102")
		if err != nil && !errors.Is(err, metadata.ErrLocked) && ctx.Err() == nil {
			t.Fatal(err)
		}
		lock = l
		return err == nil
	})
	if err := lock.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	// The worker goes on.
	closed := createFakeLedgers(ctx, t, md, 1)[0]
	if err := ar.MarkLedgerUnderReplicated(ctx, closed, []metadata.BookieID{"10.0.0.9:3181"}); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the ledger marked afterwards cleared", func() bool {
		_, err := ar.ReadUnderReplicatedLedger(ctx, closed)
		return errors.Is(err, metadata.ErrNotFound)
	})
	select {
	case <-done:
		t.Fatal("Worker.Run returned")
	default:
	}
}
