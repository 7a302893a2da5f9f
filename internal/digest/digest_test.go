package digest

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

var allTypes = []Type{CRC32, HMAC, CRC32C, DUMMY}

// Spec wire-protocol.md §5.6: password "password"; entry ledgerId=1,
// entryId=0, LAC=-1, length=5, payload "hello".
const (
	goldenMasterKey      = "776734ff34b8278465ec6051092ee57a434bb849"
	goldenEmptyMasterKey = "850bf1071c5e3d8c24235676f8816ae0cbe2f14f"
	goldenMACKey         = "d976f34efbf3c679a117416021db66013dcccf1c"
	goldenHeader         = "0000000000000001" + "0000000000000000" + "ffffffffffffffff" + "0000000000000005"
	goldenLACBodyCRC32C  = "0000000000000001" + "0000000000000000" + "b64e4ca2"
)

var (
	goldenPassword = []byte("password")
	goldenPayload  = []byte("hello")
	goldenDigests  = map[Type]string{
		CRC32:  "0000000030a56872",
		CRC32C: "e3a5f74d",
		HMAC:   "bb1bc463f54a191d7400fc5e73c5f72ff206f8fe",
		DUMMY:  "",
	}
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// goldenBody is the full §5.6 entry body for type typ.
func goldenBody(t testing.TB, typ Type) []byte {
	return append(unhex(t, goldenHeader+goldenDigests[typ]), goldenPayload...)
}

func mustNew(t testing.TB, typ Type, password []byte) *Digester {
	t.Helper()
	d, err := New(typ, password)
	if err != nil {
		t.Fatalf("New(%v): %v", typ, err)
	}
	return d
}

func TestType(t *testing.T) {
	for _, tc := range []struct {
		typ  Type
		name string
		size int
	}{
		{CRC32, "CRC32", 8}, {HMAC, "HMAC", 20}, {CRC32C, "CRC32C", 4}, {DUMMY, "DUMMY", 0},
		{0, "Type(0)", -1}, {5, "Type(5)", -1}, {-1, "Type(-1)", -1},
	} {
		if got := tc.typ.String(); got != tc.name {
			t.Errorf("Type(%d).String() = %q, want %q", int32(tc.typ), got, tc.name)
		}
		if got := tc.typ.Size(); got != tc.size {
			t.Errorf("%v.Size() = %d, want %d", tc.typ, got, tc.size)
		}
		if got := tc.typ.Valid(); got != (tc.size >= 0) {
			t.Errorf("%v.Valid() = %v", tc.typ, got)
		}
	}
	// The numbers are DataFormats.proto's; they must never change.
	if CRC32 != 1 || HMAC != 2 || CRC32C != 3 || DUMMY != 4 {
		t.Fatal("digest type numbers differ from DataFormats.proto")
	}
}

func TestNew(t *testing.T) {
	for _, typ := range allTypes {
		d := mustNew(t, typ, goldenPassword)
		if d.Type() != typ || d.Size() != typ.Size() {
			t.Errorf("New(%v): Type %v Size %d", typ, d.Type(), d.Size())
		}
	}
	for _, typ := range []Type{0, 5, -3} {
		if _, err := New(typ, nil); !errors.Is(err, ErrUnknownType) {
			t.Errorf("New(%d) error = %v, want ErrUnknownType", int32(typ), err)
		}
	}
}

func TestKeysGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  [MasterKeySize]byte
		want string
	}{
		{"MasterKey(password)", MasterKey(goldenPassword), goldenMasterKey},
		{"MasterKey(empty)", MasterKey([]byte{}), goldenEmptyMasterKey},
		{"MasterKey(nil)", MasterKey(nil), goldenEmptyMasterKey},
		{"MACKey(password)", MACKey(goldenPassword), goldenMACKey},
	} {
		if got := hex.EncodeToString(tc.got[:]); got != tc.want {
			t.Errorf("%s = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestEntryGolden(t *testing.T) {
	for _, typ := range allTypes {
		t.Run(typ.String(), func(t *testing.T) {
			d := mustNew(t, typ, goldenPassword)
			wantPrefix := unhex(t, goldenHeader+goldenDigests[typ])

			prefix := d.AppendEntryHeader(nil, 1, 0, -1, 5, goldenPayload)
			if !bytes.Equal(prefix, wantPrefix) {
				t.Errorf("AppendEntryHeader = %x, want %x", prefix, wantPrefix)
			}
			body := d.AppendEntry(nil, 1, 0, -1, 5, goldenPayload)
			if want := goldenBody(t, typ); !bytes.Equal(body, want) {
				t.Errorf("AppendEntry = %x, want %x", body, want)
			}

			e, err := d.VerifyEntry(goldenBody(t, typ), 1, 0)
			if err != nil {
				t.Fatalf("VerifyEntry(golden): %v", err)
			}
			want := Entry{LedgerID: 1, EntryID: 0, LAC: -1, Length: 5, Payload: goldenPayload}
			if !entryEqual(e, want) {
				t.Errorf("VerifyEntry = %+v, want %+v", e, want)
			}
		})
	}
}

func TestLACGolden(t *testing.T) {
	d := mustNew(t, CRC32C, goldenPassword)
	want := unhex(t, goldenLACBodyCRC32C)
	if got := d.AppendLAC(nil, 1, 0); !bytes.Equal(got, want) {
		t.Errorf("AppendLAC = %x, want %x", got, want)
	}
	lac, err := d.VerifyLAC(want, 1)
	if err != nil || lac != 0 {
		t.Errorf("VerifyLAC(golden) = %d, %v; want 0, nil", lac, err)
	}
}

func entryEqual(a, b Entry) bool {
	return a.LedgerID == b.LedgerID && a.EntryID == b.EntryID && a.LAC == b.LAC &&
		a.Length == b.Length && bytes.Equal(a.Payload, b.Payload)
}

func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ids := []int64{0, 1, 7, 1 << 40, -1, -2, 1<<63 - 1, -1 << 63}
	for _, typ := range allTypes {
		for _, password := range [][]byte{nil, goldenPassword, bytes.Repeat([]byte{0xa5}, 100)} {
			d := mustNew(t, typ, password)
			for _, size := range []int{0, 1, 31, 1000, 70000} {
				payload := make([]byte, size)
				for i := range payload {
					payload[i] = byte(rng.Uint32())
				}
				for _, id := range ids {
					ledgerID, entryID, lac, length := id, id^5, id-1, id+int64(size)
					// A non-empty dst with little capacity: the prefix must
					// survive and the header must be read before reallocation.
					dst := []byte{0xde, 0xad}
					body := d.AppendEntry(dst, ledgerID, entryID, lac, length, payload)
					if !bytes.Equal(body[:2], dst) {
						t.Fatalf("%v: AppendEntry clobbered dst prefix", typ)
					}
					body = body[2:]
					if len(body) != EntryHeaderSize+typ.Size()+size {
						t.Fatalf("%v: body length %d", typ, len(body))
					}
					prefix := d.AppendEntryHeader(nil, ledgerID, entryID, lac, length, payload)
					if !bytes.Equal(append(prefix, payload...), body) {
						t.Fatalf("%v: AppendEntryHeader ‖ payload != AppendEntry", typ)
					}
					e, err := d.VerifyEntry(body, ledgerID, entryID)
					want := Entry{ledgerID, entryID, lac, length, payload}
					if err != nil || !entryEqual(e, want) {
						t.Fatalf("%v: VerifyEntry = %+v, %v", typ, e, err)
					}
					l, h, c, n, err := ParseEntryHeader(body)
					if err != nil || l != ledgerID || h != entryID || c != lac || n != length {
						t.Fatalf("%v: ParseEntryHeader = %d %d %d %d %v", typ, l, h, c, n, err)
					}

					lacBody := d.AppendLAC([]byte{1}, ledgerID, lac)[1:]
					if len(lacBody) != LACHeaderSize+typ.Size() {
						t.Fatalf("%v: LAC body length %d", typ, len(lacBody))
					}
					if got, err := d.VerifyLAC(lacBody, ledgerID); err != nil || got != lac {
						t.Fatalf("%v: VerifyLAC = %d, %v; want %d", typ, got, err, lac)
					}
				}
			}
		}
	}
}

// checkMismatch asserts err is a *MismatchError for field.
func checkMismatch(t *testing.T, err error, field string) *MismatchError {
	t.Helper()
	var me *MismatchError
	if !errors.As(err, &me) {
		t.Fatalf("error = %v, want *MismatchError{Field: %q}", err, field)
	}
	if me.Field != field {
		t.Fatalf("Field = %q (%v), want %q", me.Field, err, field)
	}
	if !errors.Is(err, ErrDigestMismatch) {
		t.Errorf("%v does not match ErrDigestMismatch", err)
	}
	if got, want := errors.Is(err, ErrShortBody), field == FieldSize; got != want {
		t.Errorf("%v: errors.Is(ErrShortBody) = %v, want %v", err, got, want)
	}
	if !strings.Contains(err.Error(), field) && field != FieldSize {
		t.Errorf("message %q does not name %q", err.Error(), field)
	}
	return me
}

func TestVerifyEntryFailures(t *testing.T) {
	payload := []byte("some payload bytes")
	const ledgerID, entryID = 42, 9
	for _, typ := range allTypes {
		t.Run(typ.String(), func(t *testing.T) {
			d := mustNew(t, typ, goldenPassword)
			D := typ.Size()
			body := func() []byte { return d.AppendEntry(nil, ledgerID, entryID, 8, 100, payload) }
			verify := func(b []byte) error { _, err := d.VerifyEntry(b, ledgerID, entryID); return err }

			if D > 0 {
				b := body()
				b[EntryHeaderSize+D-1] ^= 0x01 // last digest byte
				me := checkMismatch(t, verify(b), FieldDigest)
				if !bytes.Equal(me.GotDigest, b[EntryHeaderSize:EntryHeaderSize+D]) ||
					!bytes.Equal(me.WantDigest, body()[EntryHeaderSize:EntryHeaderSize+D]) {
					t.Errorf("digest error carries %x / %x", me.WantDigest, me.GotDigest)
				}

				b = body()
				b[len(b)-1] ^= 0x80 // payload
				checkMismatch(t, verify(b), FieldDigest)

				b = body()
				b[20] ^= 0x04 // LAC, covered by the digest
				checkMismatch(t, verify(b), FieldDigest)
			} else {
				// DUMMY: no digest, so payload and LAC flips go unnoticed.
				b := body()
				b[len(b)-1] ^= 0x80
				b[20] ^= 0x04
				if err := verify(b); err != nil {
					t.Errorf("DUMMY rejected a well-formed body: %v", err)
				}
			}

			// A body written for another ledger or entry verifies its digest
			// but fails the id checks.
			b := d.AppendEntry(nil, ledgerID+1, entryID, 8, 100, payload)
			me := checkMismatch(t, verify(b), FieldLedgerID)
			if me.Want != ledgerID || me.Got != ledgerID+1 {
				t.Errorf("ledgerId error: want %d got %d", me.Want, me.Got)
			}
			b = d.AppendEntry(nil, ledgerID, entryID+1, 8, 100, payload)
			me = checkMismatch(t, verify(b), FieldEntryID)
			if me.Want != entryID || me.Got != entryID+1 {
				t.Errorf("entryId error: want %d got %d", me.Want, me.Got)
			}
			// Wrong ledger and entry: ledger is checked first, as in Java.
			b = d.AppendEntry(nil, ledgerID+1, entryID+1, 8, 100, payload)
			checkMismatch(t, verify(b), FieldLedgerID)

			// Short bodies: every length below 32+D.
			full := body()
			for n := 0; n < EntryHeaderSize+D; n++ {
				me := checkMismatch(t, verify(full[:n]), FieldSize)
				if me.Want != int64(EntryHeaderSize+D) || me.Got != int64(n) {
					t.Errorf("size error: want %d got %d", me.Want, me.Got)
				}
			}
			// Exactly 32+D bytes is an entry with an empty payload.
			b = d.AppendEntry(nil, ledgerID, entryID, 8, 100, nil)
			if e, err := d.VerifyEntry(b, ledgerID, entryID); err != nil || len(e.Payload) != 0 {
				t.Errorf("empty payload: %+v, %v", e, err)
			}
		})
	}
}

func TestVerifyEntryLACReadSkipsEntryID(t *testing.T) {
	for _, typ := range allTypes {
		d := mustNew(t, typ, goldenPassword)
		body := d.AppendEntry(nil, 3, 17, 16, 1234, []byte("x"))
		e, err := d.VerifyEntry(body, 3, -1)
		if err != nil || e.EntryID != 17 || e.LAC != 16 || e.Length != 1234 {
			t.Errorf("%v: VerifyEntry(entryID -1) = %+v, %v", typ, e, err)
		}
		// The ledger id is still checked.
		_, err = d.VerifyEntry(body, 4, -1)
		checkMismatch(t, err, FieldLedgerID)
	}
}

func TestDummyAcceptsAnyWellFormed(t *testing.T) {
	d := mustNew(t, DUMMY, nil)
	rng := rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		body := make([]byte, EntryHeaderSize+rng.IntN(100))
		for i := range body {
			body[i] = byte(rng.Uint32())
		}
		l, h, c, n, _ := ParseEntryHeader(body)
		e, err := d.VerifyEntry(body, l, h)
		if err != nil || e.LAC != c || e.Length != n || !bytes.Equal(e.Payload, body[EntryHeaderSize:]) {
			t.Fatalf("DUMMY VerifyEntry(%x) = %+v, %v", body, e, err)
		}
		lac, err := d.VerifyLAC(body, l)
		if err != nil || lac != h {
			t.Fatalf("DUMMY VerifyLAC = %d, %v", lac, err)
		}
	}
}

// TestRandomBodiesDoNotVerify: with the ids taken from the body itself only
// the digest stands between random bytes and acceptance. The seed is fixed,
// so the result is deterministic; the chance of a hit for CRC32C over 20000
// bodies is about 5e-6.
func TestRandomBodiesDoNotVerify(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, typ := range []Type{CRC32, HMAC, CRC32C} {
		d := mustNew(t, typ, goldenPassword)
		for range 20000 {
			body := make([]byte, EntryHeaderSize+typ.Size()+rng.IntN(64))
			for i := range body {
				body[i] = byte(rng.Uint32())
			}
			l, h, _, _, _ := ParseEntryHeader(body)
			if _, err := d.VerifyEntry(body, l, h); err == nil {
				t.Fatalf("%v: random body verified: %x", typ, body)
			}
			if _, err := d.VerifyLAC(body, l); err == nil {
				t.Fatalf("%v: random LAC body verified: %x", typ, body)
			}
		}
	}
}

// Java stores a CRC32 digest as a long and compares all 8 bytes, so a body
// whose high 4 digest bytes are not zero fails even when the low 4 match.
func TestCRC32HighBytesMustBeZero(t *testing.T) {
	d := mustNew(t, CRC32, nil)
	body := goldenBody(t, CRC32)
	body[EntryHeaderSize] = 1
	_, err := d.VerifyEntry(body, 1, 0)
	checkMismatch(t, err, FieldDigest)
}

func TestVerifyLACFailures(t *testing.T) {
	for _, typ := range allTypes {
		t.Run(typ.String(), func(t *testing.T) {
			d := mustNew(t, typ, goldenPassword)
			D := typ.Size()
			good := func() []byte { return d.AppendLAC(nil, 5, 77) }
			if D > 0 {
				b := good()
				b[LACHeaderSize] ^= 0x10
				_, err := d.VerifyLAC(b, 5)
				checkMismatch(t, err, FieldDigest)
				b = good()
				b[12] ^= 0x01 // the lac itself
				_, err = d.VerifyLAC(b, 5)
				checkMismatch(t, err, FieldDigest)
			}
			_, err := d.VerifyLAC(good(), 6)
			me := checkMismatch(t, err, FieldLedgerID)
			if me.Want != 6 || me.Got != 5 {
				t.Errorf("ledgerId error: want %d got %d", me.Want, me.Got)
			}
			for n := 0; n < LACHeaderSize+D; n++ {
				_, err := d.VerifyLAC(good()[:n], 5)
				checkMismatch(t, err, FieldSize)
			}
			// Trailing bytes after the digest are ignored, as in Java.
			if lac, err := d.VerifyLAC(append(good(), 1, 2, 3), 5); err != nil || lac != 77 {
				t.Errorf("trailing bytes: %d, %v", lac, err)
			}
		})
	}
}

func TestWrongPasswordFailsHMACOnly(t *testing.T) {
	for _, typ := range allTypes {
		body := mustNew(t, typ, []byte("a")).AppendEntry(nil, 1, 2, 1, 10, []byte("payload"))
		_, err := mustNew(t, typ, []byte("b")).VerifyEntry(body, 1, 2)
		if typ == HMAC {
			checkMismatch(t, err, FieldDigest)
		} else if err != nil {
			t.Errorf("%v: password should not affect the digest: %v", typ, err)
		}
	}
}

func TestParseEntryHeaderShort(t *testing.T) {
	for n := range EntryHeaderSize {
		_, _, _, _, err := ParseEntryHeader(make([]byte, n))
		if !errors.Is(err, ErrShortBody) || errors.Is(err, ErrDigestMismatch) {
			t.Fatalf("ParseEntryHeader(%d bytes) error = %v", n, err)
		}
	}
	l, h, c, n, err := ParseEntryHeader(unhex(t, goldenHeader))
	if err != nil || l != 1 || h != 0 || c != -1 || n != 5 {
		t.Errorf("ParseEntryHeader(golden) = %d %d %d %d %v", l, h, c, n, err)
	}
}

func TestPayloadCapacityClipped(t *testing.T) {
	d := mustNew(t, CRC32C, nil)
	buf := d.AppendEntry(make([]byte, 0, 1024), 1, 1, 0, 3, []byte("abc"))
	e, err := d.VerifyEntry(buf, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if cap(e.Payload) != len(e.Payload) {
		t.Errorf("Payload cap %d > len %d: appends would write into the caller's buffer", cap(e.Payload), len(e.Payload))
	}
}

func TestErrorMessages(t *testing.T) {
	d := mustNew(t, CRC32C, nil)
	body := d.AppendEntry(nil, 1, 2, 0, 0, nil)
	_, err := d.VerifyEntry(body[:10], 1, 2)
	if got := err.Error(); got != "digest: CRC32C body is 10 bytes, need at least 36" {
		t.Errorf("size message: %q", got)
	}
	_, err = d.VerifyEntry(body, 1, 3)
	if got := err.Error(); got != "digest: entryId mismatch: want 3, got 2" {
		t.Errorf("entryId message: %q", got)
	}
	body[EntryHeaderSize] ^= 0xff
	_, err = d.VerifyEntry(body, 1, 2)
	if got := err.Error(); !strings.HasPrefix(got, "digest: CRC32C digest mismatch: computed ") {
		t.Errorf("digest message: %q", got)
	}
}

// TestConcurrentUse shares one Digester of each type between goroutines;
// run with -race.
func TestConcurrentUse(t *testing.T) {
	for _, typ := range allTypes {
		d := mustNew(t, typ, goldenPassword)
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				payload := bytes.Repeat([]byte{byte(g)}, 100+g)
				var buf []byte
				for i := range 500 {
					buf = d.AppendEntry(buf[:0], int64(g), int64(i), int64(i-1), int64(i*len(payload)), payload)
					if _, err := d.VerifyEntry(buf, int64(g), int64(i)); err != nil {
						t.Errorf("%v goroutine %d entry %d: %v", typ, g, i, err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
}

// TestNoAllocs pins the hot-path contract: appending into a buffer with room
// and verifying a good body allocate nothing.
func TestNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under -race")
	}
	payload := make([]byte, 4096)
	for _, typ := range allTypes {
		d := mustNew(t, typ, goldenPassword)
		buf := make([]byte, 0, 8192)
		body := d.AppendEntry(nil, 1, 2, 1, 4096, payload)
		lacBody := d.AppendLAC(nil, 1, 7)
		allocs := testing.AllocsPerRun(100, func() {
			buf = d.AppendEntryHeader(buf[:0], 1, 2, 1, 4096, payload)
			buf = d.AppendEntry(buf[:0], 1, 2, 1, 4096, payload)
			buf = d.AppendLAC(buf[:0], 1, 7)
			if _, err := d.VerifyEntry(body, 1, 2); err != nil {
				t.Fatal(err)
			}
			if _, err := d.VerifyLAC(lacBody, 1); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%v: %v allocs per run, want 0", typ, allocs)
		}
	}
}

// The digests are over bytes in big-endian order; guard against an
// accidental little-endian write by decoding the golden header by hand.
func TestHeaderByteOrder(t *testing.T) {
	h := unhex(t, goldenHeader)
	if binary.BigEndian.Uint64(h[16:24]) != ^uint64(0) || h[7] != 1 || h[31] != 5 {
		t.Fatal("golden header is not big-endian")
	}
}
