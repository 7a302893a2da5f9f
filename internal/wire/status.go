package wire

import (
	"errors"
	"fmt"
)

// Status is a BookKeeper status code, numbered as the v3 StatusCode enum. v2
// return codes are translated by V2Code and StatusFromV2.
type Status int32

const (
	StatusOK                 Status = 0
	StatusNoLedger           Status = 402
	StatusNoEntry            Status = 403
	StatusBadRequest         Status = 404
	StatusIOError            Status = 501
	StatusUnauthorized       Status = 502
	StatusBadVersion         Status = 503
	StatusFenced             Status = 504
	StatusReadOnly           Status = 505
	StatusTooManyRequests    Status = 506
	StatusUnknownLedgerState Status = 507
)

// The errors a status code stands for. These are the sentinels the whole of
// Folio matches with errors.Is; the client's public errors wrap them.
var (
	ErrNoSuchLedger       = errors.New("no such ledger")
	ErrNoSuchEntry        = errors.New("no such entry")
	ErrBadRequest         = errors.New("bad request")
	ErrIO                 = errors.New("bookie I/O error")
	ErrUnauthorized       = errors.New("unauthorized: wrong ledger master key or authentication")
	ErrBadVersion         = errors.New("protocol version not supported")
	ErrLedgerFenced       = errors.New("ledger fenced")
	ErrBookieReadOnly     = errors.New("bookie is read-only")
	ErrTooManyRequests    = errors.New("bookie overloaded: too many requests")
	ErrUnknownLedgerState = errors.New("ledger state unknown to the bookie")
)

// statusTable is the one table between status codes, their v2 return codes,
// their names and their errors. v2 has no code for EUNKNOWNLEDGERSTATE that a
// Java client understands: see V2Code.
var statusTable = []struct {
	status Status
	v2     int32
	name   string
	err    error
}{
	{StatusOK, 0, "EOK", nil},
	{StatusNoLedger, 1, "ENOLEDGER", ErrNoSuchLedger},
	{StatusNoEntry, 2, "ENOENTRY", ErrNoSuchEntry},
	{StatusBadRequest, 100, "EBADREQ", ErrBadRequest},
	{StatusIOError, 101, "EIO", ErrIO},
	{StatusUnauthorized, 102, "EUA", ErrUnauthorized},
	{StatusBadVersion, 103, "EBADVERSION", ErrBadVersion},
	{StatusFenced, 104, "EFENCED", ErrLedgerFenced},
	{StatusReadOnly, 105, "EREADONLY", ErrBookieReadOnly},
	{StatusTooManyRequests, 106, "ETOOMANYREQUESTS", ErrTooManyRequests},
	{StatusUnknownLedgerState, 107, "EUNKNOWNLEDGERSTATE", ErrUnknownLedgerState},
}

// Valid reports whether s is one of the StatusCode values of 4.17.
func (s Status) Valid() bool {
	for _, e := range statusTable {
		if e.status == s {
			return true
		}
	}
	return false
}

func (s Status) String() string {
	for _, e := range statusTable {
		if e.status == s {
			return e.name
		}
	}
	return fmt.Sprintf("STATUS(%d)", int32(s))
}

// Err returns the error s stands for: nil for StatusOK, a *StatusError that
// matches the status's sentinel with errors.Is otherwise.
func (s Status) Err() error {
	if s == StatusOK {
		return nil
	}
	return &StatusError{Status: s}
}

// StatusError is a non-OK status received from, or to be sent by, a bookie.
type StatusError struct {
	Status Status
}

func (e *StatusError) Error() string {
	if err := e.sentinel(); err != nil {
		return fmt.Sprintf("%s (%s)", err.Error(), e.Status)
	}
	return fmt.Sprintf("unknown bookie status %d", int32(e.Status))
}

// Is makes errors.Is(err, ErrLedgerFenced) and the like work.
func (e *StatusError) Is(target error) bool {
	s := e.sentinel()
	return s != nil && s == target
}

func (e *StatusError) sentinel() error {
	for _, row := range statusTable {
		if row.status == e.Status {
			return row.err
		}
	}
	return nil
}

// StatusOf returns the status code that reports err to a peer: StatusOK for
// nil, the matching code for an error that wraps a sentinel or a
// *StatusError, and EIO for anything else: an error the bookie cannot name is
// an I/O failure, never "no such entry".
func StatusOf(err error) Status {
	if err == nil {
		return StatusOK
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se.Status
	}
	for _, row := range statusTable[1:] {
		if errors.Is(err, row.err) {
			return row.status
		}
	}
	return StatusIOError
}

// V2Code returns the v2 return code for s. EUNKNOWNLEDGERSTATE becomes EIO
// (101): Java v2 clients of 4.16 and 4.17 do not know 107 and tear down the
// connection on it. Statuses outside the table also become EIO.
func (s Status) V2Code() int32 {
	if s == StatusUnknownLedgerState {
		return 101
	}
	for _, row := range statusTable {
		if row.status == s {
			return row.v2
		}
	}
	return 101
}

// StatusFromV2 translates a v2 return code. Codes outside {0, 1, 2, 100–107}
// are an error: the Java client closes the connection on them.
func StatusFromV2(code int32) (Status, error) {
	for _, row := range statusTable {
		if row.v2 == code {
			return row.status, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown v2 return code %d", ErrMalformed, code)
}
