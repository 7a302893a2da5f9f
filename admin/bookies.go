package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"

	iadmin "github.com/foliodb/folio/internal/admin"
	"github.com/foliodb/folio/internal/metadata"
)

// BookieState is a bookie's state as the metadata store records it.
type BookieState string

// Bookie states.
const (
	// BookieWritable: registered and accepting writes.
	BookieWritable BookieState = "writable"
	// BookieReadOnly: registered read-only (disks full or the operator's
	// choice); it serves reads.
	BookieReadOnly BookieState = "readonly"
	// BookieDown: it has a cookie (it joined the cluster once) but is not
	// registered: not running or not reachable by the store.
	BookieDown BookieState = "down"
)

// Bookie is one bookie of ListBookies.
type Bookie struct {
	// ID is the bookie id (host:port, or a custom bookieId).
	ID string `json:"id"`
	// State is writable, read-only or (with All) down.
	State BookieState `json:"state"`
	// Disk is the bookie's disk space, with ListBookiesOptions.DiskInfo;
	// nil otherwise and for a bookie that is down.
	Disk *DiskInfo `json:"disk,omitempty"`
	// ServiceInfo is what the bookie published about itself (its
	// endpoints: bookie protocol, admin HTTP server), with
	// ListBookiesOptions.ServiceInfo; nil otherwise and for a bookie that
	// is down.
	ServiceInfo *ServiceInfo `json:"serviceInfo,omitempty"`
}

// DiskInfo is a bookie's answer to GET_BOOKIE_INFO (Java's
// BookieInfoReader.BookieInfo), or why there is none.
type DiskInfo struct {
	// FreeBytes and TotalBytes are over the bookie's ledger directories.
	FreeBytes  int64 `json:"freeDiskSpace"`
	TotalBytes int64 `json:"totalDiskCapacity"`
	// Err is why the bookie gave no answer (nil when it did). A bookie
	// that is down has none.
	Err error `json:"-"`
}

// ListBookiesOptions choose what ListBookies lists. The zero value lists
// every registered bookie without disk figures.
type ListBookiesOptions struct {
	// WritableOnly lists only the writable bookies (Java:
	// getAvailableBookies); ReadOnlyOnly only the read-only ones (Java:
	// getReadOnlyBookies). At most one may be set.
	WritableOnly, ReadOnlyOnly bool
	// All also lists the bookies that have a cookie but are not
	// registered, as BookieDown (Java: getAllBookies, listbookies -a).
	// Not with WritableOnly or ReadOnlyOnly.
	All bool
	// DiskInfo asks each registered bookie for its disk space (Java:
	// BookKeeper.getBookieInfo; the shell's bookieinfo). Bookies are asked
	// concurrently; one that does not answer has Disk.Err set and the
	// others are still listed.
	DiskInfo bool
	// ServiceInfo reads what each registered bookie published about itself
	// (BookieServiceInfo). A bookie that unregisters meanwhile is listed
	// without it.
	ServiceInfo bool
}

// ListBookies lists the cluster's bookies: the writable ones, then the
// read-only ones, each in ascending id order; with All, every bookie with
// a cookie in ascending id order, followed by registered bookies without
// one. Java: getAvailableBookies, getReadOnlyBookies, getAllBookies.
func (a *Admin) ListBookies(ctx context.Context, o ListBookiesOptions) ([]Bookie, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	n := 0
	for _, b := range []bool{o.WritableOnly, o.ReadOnlyOnly, o.All} {
		if b {
			n++
		}
	}
	if n > 1 {
		return nil, errors.New("admin: ListBookies: set at most one of WritableOnly, ReadOnlyOnly and All")
	}
	status, err := iadmin.ListBookies(ctx, a.md, !o.ReadOnlyOnly, !o.WritableOnly)
	if err != nil {
		return nil, publicError(err)
	}
	out := []Bookie{}
	for _, s := range status {
		out = append(out, Bookie{ID: s.ID, State: BookieState(s.State)})
	}
	if o.All {
		ids, err := a.md.ListCookies(ctx)
		if err != nil {
			return nil, publicError(fmt.Errorf("listing the bookies with cookies: %w", err))
		}
		state := map[string]BookieState{}
		for _, b := range out {
			state[b.ID] = b.State
		}
		out = out[:0]
		for _, id := range ids {
			st, ok := state[string(id)]
			if !ok {
				st = BookieDown
			}
			delete(state, string(id))
			out = append(out, Bookie{ID: string(id), State: st})
		}
		// A registered bookie without a cookie (a Java bookie of another
		// layout, or a cookie deleted under it) still shows.
		for _, s := range status {
			if _, ok := state[s.ID]; ok {
				out = append(out, Bookie{ID: s.ID, State: BookieState(s.State)})
			}
		}
	}
	if o.DiskInfo {
		var ids []string
		for _, b := range out {
			if b.State != BookieDown {
				ids = append(ids, b.ID)
			}
		}
		info := iadmin.GetBookieInfo(ctx, a.bks, ids)
		for i := range out {
			if j := slices.IndexFunc(info, func(r iadmin.BookieInfo) bool { return r.ID == out[i].ID }); j >= 0 {
				out[i].Disk = diskInfo(info[j])
			}
		}
	}
	if o.ServiceInfo {
		for i := range out {
			if out[i].State == BookieDown {
				continue
			}
			info, err := a.BookieServiceInfo(ctx, out[i].ID)
			switch {
			case errors.Is(err, ErrNoSuchBookie):
			case err != nil:
				return nil, err
			default:
				out[i].ServiceInfo = &info
			}
		}
	}
	return out, nil
}

func diskInfo(r iadmin.BookieInfo) *DiskInfo {
	d := &DiskInfo{FreeBytes: r.FreeDiskSpace, TotalBytes: r.TotalDiskCapacity}
	if r.Error != "" {
		d.Err = errors.New(r.Error)
	}
	return d
}

// DiskInfo asks one registered bookie for its disk space (Java:
// BookKeeper.getBookieInfo, for one bookie). ErrInvalidBookieID for a malformed id,
// ErrNoSuchBookie if it is not registered; a bookie that does not answer
// is an error naming it.
func (a *Admin) DiskInfo(ctx context.Context, bookie string) (DiskInfo, error) {
	if err := a.check(); err != nil {
		return DiskInfo{}, err
	}
	if err := validBookie(bookie); err != nil {
		return DiskInfo{}, err
	}
	if err := a.registered(ctx, bookie); err != nil {
		return DiskInfo{}, err
	}
	d := diskInfo(iadmin.GetBookieInfo(ctx, a.bks, []string{bookie})[0])
	if d.Err != nil {
		return *d, fmt.Errorf("bookie %s: %w", bookie, d.Err)
	}
	return *d, nil
}

// registered fails with ErrNoSuchBookie unless bookie is registered.
func (a *Admin) registered(ctx context.Context, bookie string) error {
	status, err := iadmin.ListBookies(ctx, a.md, true, true)
	if err != nil {
		return publicError(err)
	}
	if !slices.ContainsFunc(status, func(s iadmin.BookieStatus) bool { return s.ID == bookie }) {
		return fmt.Errorf("%w: %s is not registered (neither writable nor read-only)", ErrNoSuchBookie, bookie)
	}
	return nil
}

// DeleteCookie deletes the bookie's cookie, so that its identity may be
// reused by a new bookie with empty disks, and reports whether there was
// one (Java: the shell's cookie delete, recover -deleteCookie). It refuses
// with ErrStillRegistered while the bookie is registered: a running
// bookie's cookie guards its disks.
func (a *Admin) DeleteCookie(ctx context.Context, bookie string) (deleted bool, err error) {
	if err := a.check(); err != nil {
		return false, err
	}
	if err := validBookie(bookie); err != nil {
		return false, err
	}
	switch err := a.registered(ctx, bookie); {
	case err == nil:
		return false, fmt.Errorf("%w: %s; stop it before deleting its cookie", ErrStillRegistered, bookie)
	case !errors.Is(err, ErrNoSuchBookie):
		return false, err
	}
	return a.deleteCookie(ctx, bookie)
}

// deleteCookie deletes b's cookie by compare-and-set on the version read.
func (a *Admin) deleteCookie(ctx context.Context, bookie string) (bool, error) {
	b := metadata.BookieID(bookie)
	_, v, err := a.md.ReadCookie(ctx, b)
	if errors.Is(err, metadata.ErrNoSuchCookie) {
		return false, nil
	}
	if err != nil {
		return false, publicError(fmt.Errorf("reading the cookie of %s: %w", b, err))
	}
	if err := a.md.DeleteCookie(ctx, b, v); err != nil && !errors.Is(err, metadata.ErrNoSuchCookie) {
		return false, publicError(fmt.Errorf("deleting the cookie of %s: %w", b, err))
	}
	return true, nil
}
