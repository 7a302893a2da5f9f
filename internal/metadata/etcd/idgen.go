package etcd

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/foliodb/folio/internal/metadata"
)

// GenerateLedgerID implements Java's Etcd64bitIdGenerator (§2.4): move to
// the next bucket (round-robin from a random start, increment first), then
// one txn puts an empty value at `buckets/NNN` and reads the key back. The
// key's version (puts since it was created) is the bucket's counter:
// id = bucket<<56 | version. Java and Folio allocators share the counters.
//
// A bucket whose counter has passed 2^56-1 is skipped, and so is the one id
// of bucket 127 that would be Long.MAX_VALUE (Java's ledger listing
// excludes it, so Java bookies would collect that ledger as garbage).
func (d *Driver) GenerateLedgerID(ctx context.Context) (int64, error) {
	if err := d.checkOpen(); err != nil {
		return 0, err
	}
	for range NumBuckets {
		b := int(d.nextBucket.Add(1) % NumBuckets)
		key := d.k.bucket(b)
		what := "generate ledger id at " + key
		var resp *clientv3.TxnResponse
		// A retried put after one that was applied skips an id, as Java's
		// generator does when a create fails.
		err := d.do(ctx, what, func(ctx context.Context, _ bool) error {
			r, err := d.cli.Txn(ctx).
				Then(clientv3.OpPut(key, ""), clientv3.OpGet(key)).
				Commit()
			if err != nil {
				return d.storeErr(what, err)
			}
			resp = r
			return nil
		})
		if err != nil {
			return 0, err
		}
		kvs := resp.Responses[1].GetResponseRange().GetKvs()
		if len(kvs) != 1 {
			return 0, fmt.Errorf("etcd: generate ledger id: %s missing right after the put", key)
		}
		if id, ok := bucketID(b, kvs[0].Version); ok {
			return id, nil
		}
	}
	return 0, fmt.Errorf("etcd: generate ledger id: all %d buckets under %s are exhausted", NumBuckets, d.k.buckets)
}

// bucketID is bucket<<56 | version, or false when that is not an id to hand
// out: the bucket's counter has passed 2^56-1, or the id would exceed
// MaxLedgerID.
func bucketID(bucket int, version int64) (int64, bool) {
	if bucket < 0 || bucket >= NumBuckets || version < 1 || version > maxBucketVersion {
		return 0, false
	}
	id := int64(bucket)<<bucketShift | version
	if id > metadata.MaxLedgerID {
		return 0, false
	}
	return id, true
}
