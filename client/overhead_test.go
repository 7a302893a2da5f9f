package client

import (
	"bytes"
	"math"
	"testing"

	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/wire"
	"github.com/foliodb/folio/internal/wire/codec"
	v2 "github.com/foliodb/folio/internal/wire/v2"
)

// TestAddFrameOverheadBound: addFrameOverhead, what the up-front size check
// of an append allows besides the payload, covers the largest add request
// frame: every digest type, v2 and v3, plain and recovery adds (the
// recovery rewrite and AutoRecovery send the same body), maximal ids, txn
// id, priority and write flags.
func TestAddFrameOverheadBound(t *testing.T) {
	payload := bytes.Repeat([]byte{1}, 1<<20)
	mk := digest.MasterKey([]byte("pw"))
	worst := 0
	for _, typ := range []digest.Type{digest.CRC32, digest.HMAC, digest.CRC32C, digest.DUMMY} {
		d, err := digest.New(typ, []byte("pw"))
		if err != nil {
			t.Fatal(err)
		}
		body := d.AppendEntry(nil, math.MaxInt64-1, math.MaxInt64-1, math.MaxInt64-1, math.MaxInt64, payload)
		for _, proto := range []wire.Protocol{wire.ProtocolV2, wire.ProtocolV3} {
			for _, recovery := range []bool{false, true} {
				req := &wire.Request{Header: wire.Header{Op: wire.OpAddEntry}, Has: wire.BodyAdd,
					Add: wire.AddRequest{LedgerID: math.MaxInt64 - 1, EntryID: math.MaxInt64 - 1, MasterKey: mk[:], Body: body}}
				if recovery {
					req.Add.Flag = wire.AddFlagRecoveryAdd
					req.Header.Priority, req.Header.HasPriority = math.MaxUint32, true
				}
				if proto == wire.ProtocolV3 {
					req.Header.Version, req.Header.TxnID = wire.VersionThree, math.MaxUint64
					req.Add.WriteFlags, req.Add.HasWriteFlags = -1, true
				} else {
					req.Header.Version = v2.CurrentVersion
				}
				c, err := codec.NewClientCodec(proto, false)
				if err != nil {
					t.Fatal(err)
				}
				c.SetMaxFrameSize(wire.MaxFrameSizeLimit)
				out, err := c.EncodeRequest(nil, req)
				if err != nil {
					t.Fatal(err)
				}
				worst = max(worst, len(out)-len(payload))
			}
		}
	}
	if worst > addFrameOverhead {
		t.Fatalf("an add frame holds %d bytes besides the payload, addFrameOverhead is %d", worst, addFrameOverhead)
	}
	t.Logf("largest add frame overhead %d bytes (allowance %d)", worst, addFrameOverhead)
}
