package digest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// fuzzType maps any byte to one of the four digest types.
func fuzzType(b byte) Type { return allTypes[int(b)%len(allTypes)] }

// FuzzVerifyEntry checks, for every digest type:
//   - VerifyEntry never panics on arbitrary bytes, and any error is a
//     *MismatchError matching ErrDigestMismatch;
//   - a body verifies exactly when it is what AppendEntry would produce for
//     the fields it carries (so random bytes only verify if they happen to
//     carry their own digest; for DUMMY every well-formed body does);
//   - a body from AppendEntry always verifies and decodes to its inputs;
//   - flipping bits of one byte of that body is always caught by CRC32 and
//     CRC32C (a CRC detects every burst of up to 32 bits) and by HMAC, and
//     by DUMMY only in the ledgerId and (unless entryID is -1) entryId fields.
func FuzzVerifyEntry(f *testing.F) {
	for i, typ := range allTypes {
		f.Add(byte(i), []byte("password"), int64(1), int64(0), int64(-1), int64(5), []byte("hello"),
			goldenBody(f, typ), uint16(0), byte(1))
	}
	f.Add(byte(1), []byte{}, int64(-1), int64(-1), int64(0), int64(0), []byte{},
		[]byte{}, uint16(40), byte(0x80))
	f.Fuzz(func(t *testing.T, typByte byte, password []byte, ledgerID, entryID, lac, length int64,
		payload, raw []byte, flipAt uint16, flipMask byte) {
		typ := fuzzType(typByte)
		d := mustNew(t, typ, password)
		D := typ.Size()

		// Arbitrary bytes, checked against the ids they carry (the hardest
		// case: only the digest stands in the way) and against the inputs.
		if len(raw) >= 16 {
			l := int64(binary.BigEndian.Uint64(raw[0:8]))
			h := int64(binary.BigEndian.Uint64(raw[8:16]))
			checkRawEntry(t, d, raw, l, h)
			checkRawEntry(t, d, raw, l, -1)
		}
		checkRawEntry(t, d, raw, ledgerID, entryID)

		body := d.AppendEntry(nil, ledgerID, entryID, lac, length, payload)
		prefix := d.AppendEntryHeader(nil, ledgerID, entryID, lac, length, payload)
		if !bytes.Equal(body, append(prefix, payload...)) {
			t.Fatalf("AppendEntryHeader ‖ payload != AppendEntry")
		}
		e, err := d.VerifyEntry(body, ledgerID, entryID)
		if err != nil {
			t.Fatalf("%v: AppendEntry body does not verify: %v", typ, err)
		}
		if e.LedgerID != ledgerID || e.EntryID != entryID || e.LAC != lac || e.Length != length ||
			!bytes.Equal(e.Payload, payload) {
			t.Fatalf("%v: decoded %+v", typ, e)
		}

		if flipMask == 0 {
			return
		}
		i := int(flipAt) % len(body)
		body[i] ^= flipMask
		_, err = d.VerifyEntry(body, ledgerID, entryID)
		// DUMMY checks only the ids: the ledgerId always, the entryId
		// unless entryID is -1.
		mustFail := D > 0 || i < 8 || (i < 16 && entryID != -1)
		if mustFail && err == nil {
			t.Fatalf("%v: flipping byte %d by %#x went unnoticed", typ, i, flipMask)
		}
		if !mustFail && err != nil {
			t.Fatalf("%v: DUMMY rejected a flip at byte %d: %v", typ, i, err)
		}
	})
}

// checkRawEntry verifies raw and checks the result is consistent: success
// only for a body AppendEntry would produce, failure only as MismatchError.
func checkRawEntry(t *testing.T, d *Digester, raw []byte, ledgerID, entryID int64) {
	t.Helper()
	e, err := d.VerifyEntry(raw, ledgerID, entryID)
	if err != nil {
		var me *MismatchError
		if !errors.As(err, &me) || !errors.Is(err, ErrDigestMismatch) {
			t.Fatalf("VerifyEntry error %v (%T) is not a MismatchError", err, err)
		}
		return
	}
	again := d.AppendEntry(nil, e.LedgerID, e.EntryID, e.LAC, e.Length, e.Payload)
	if !bytes.Equal(again, raw) {
		t.Fatalf("%v: %x verified but re-encodes as %x", d.Type(), raw, again)
	}
}

// FuzzVerifyLAC checks VerifyLAC never panics, accepts a body exactly when
// its first 16+D bytes are what AppendLAC produces, and round-trips AppendLAC.
func FuzzVerifyLAC(f *testing.F) {
	f.Add(byte(2), []byte("password"), int64(1), int64(0), unhex(f, goldenLACBodyCRC32C))
	f.Add(byte(0), []byte("password"), int64(1), int64(0), unhex(f, goldenHeader+goldenDigests[CRC32]))
	f.Add(byte(1), []byte{}, int64(-1), int64(-1), []byte{})
	f.Fuzz(func(t *testing.T, typByte byte, password []byte, ledgerID, lac int64, raw []byte) {
		typ := fuzzType(typByte)
		d := mustNew(t, typ, password)

		ids := []int64{ledgerID}
		if len(raw) >= 8 {
			ids = append(ids, int64(binary.BigEndian.Uint64(raw[0:8])))
		}
		for _, id := range ids {
			got, err := d.VerifyLAC(raw, id)
			if err != nil {
				if !errors.Is(err, ErrDigestMismatch) {
					t.Fatalf("VerifyLAC error %v is not a digest mismatch", err)
				}
				continue
			}
			n := LACHeaderSize + typ.Size()
			if again := d.AppendLAC(nil, id, got); !bytes.Equal(again, raw[:n]) {
				t.Fatalf("%v: %x verified but re-encodes as %x", typ, raw, again)
			}
		}

		body := d.AppendLAC(nil, ledgerID, lac)
		if got, err := d.VerifyLAC(body, ledgerID); err != nil || got != lac {
			t.Fatalf("%v: round trip = %d, %v; want %d", typ, got, err, lac)
		}
	})
}
