package wire

import (
	"errors"
	"fmt"
	"testing"

	"github.com/foliodb/folio/internal/wire/v3/protocolpb"
)

// The status table must cover exactly the StatusCode enum of the schema.
func TestStatusTableMatchesSchema(t *testing.T) {
	values := protocolpb.StatusCode(0).Descriptor().Values()
	if values.Len() != len(statusTable) {
		t.Fatalf("schema has %d status codes, table %d", values.Len(), len(statusTable))
	}
	for i := 0; i < values.Len(); i++ {
		v := values.Get(i)
		s := Status(v.Number())
		if !s.Valid() || s.String() != string(v.Name()) {
			t.Errorf("schema %s=%d: table says valid=%v name=%s", v.Name(), v.Number(), s.Valid(), s)
		}
	}
	if Status(405).Valid() || Status(-1).Valid() {
		t.Fatal("codes outside the enum must be invalid")
	}
}

func TestOpsMatchSchema(t *testing.T) {
	values := protocolpb.OperationType(1).Descriptor().Values()
	for i := 0; i < values.Len(); i++ {
		v := values.Get(i)
		op := Op(v.Number())
		if !op.Valid() || op.String() != string(v.Name()) {
			t.Errorf("schema %s=%d: Op says valid=%v name=%s", v.Name(), v.Number(), op.Valid(), op)
		}
	}
	if Op(0).Valid() || Op(13).Valid() {
		t.Fatal("ops outside the enum must be invalid")
	}
}

func TestStatusErrors(t *testing.T) {
	cases := map[Status]error{
		StatusNoLedger: ErrNoSuchLedger, StatusNoEntry: ErrNoSuchEntry, StatusBadRequest: ErrBadRequest,
		StatusIOError: ErrIO, StatusUnauthorized: ErrUnauthorized, StatusBadVersion: ErrBadVersion,
		StatusFenced: ErrLedgerFenced, StatusReadOnly: ErrBookieReadOnly,
		StatusTooManyRequests: ErrTooManyRequests, StatusUnknownLedgerState: ErrUnknownLedgerState,
	}
	if StatusOK.Err() != nil || StatusOf(nil) != StatusOK {
		t.Fatal("EOK must be nil")
	}
	for s, sentinel := range cases {
		err := fmt.Errorf("reading entry 3: %w", s.Err())
		if !errors.Is(err, sentinel) {
			t.Errorf("%s: errors.Is(%v, %v) = false", s, err, sentinel)
		}
		for other, o := range cases {
			if other != s && errors.Is(err, o) {
				t.Errorf("%s also matches %v", s, o)
			}
		}
		if StatusOf(err) != s || StatusOf(fmt.Errorf("wrapped: %w", sentinel)) != s {
			t.Errorf("StatusOf does not round-trip %s", s)
		}
	}
	// An error nobody can name is an I/O error: never "no such entry".
	if got := StatusOf(errors.New("disk on fire")); got != StatusIOError {
		t.Fatalf("unknown error maps to %s", got)
	}
	if msg := Status(999).Err().Error(); msg != "unknown bookie status 999" {
		t.Fatal(msg)
	}
}

func TestV2Codes(t *testing.T) {
	want := map[Status]int32{
		StatusOK: 0, StatusNoLedger: 1, StatusNoEntry: 2, StatusBadRequest: 100, StatusIOError: 101,
		StatusUnauthorized: 102, StatusBadVersion: 103, StatusFenced: 104, StatusReadOnly: 105,
		StatusTooManyRequests: 106,
		// Java v2 clients do not know 107: answer EIO (spec/wire-protocol.md §3.1).
		StatusUnknownLedgerState: 101,
	}
	for s, code := range want {
		if got := s.V2Code(); got != code {
			t.Errorf("%s.V2Code() = %d, want %d", s, got, code)
		}
		if s == StatusUnknownLedgerState {
			continue
		}
		back, err := StatusFromV2(code)
		if err != nil || back != s {
			t.Errorf("StatusFromV2(%d) = %s, %v", code, back, err)
		}
	}
	// 107 is decodable (a Folio client can read it), other codes are not.
	if s, err := StatusFromV2(107); err != nil || s != StatusUnknownLedgerState {
		t.Fatalf("107: %s %v", s, err)
	}
	for _, bad := range []int32{3, 99, 108, -1, 402} {
		if _, err := StatusFromV2(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("StatusFromV2(%d) = %v, want ErrMalformed", bad, err)
		}
	}
}
