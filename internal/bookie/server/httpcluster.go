package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/foliodb/folio/internal/metadata"
)

// The cluster's routes of BookKeeper's admin API (see httpbk.go for the
// conventions): bookies, ledgers and AutoRecovery, answered from the
// metadata store and, for what needs a BookKeeper client, ClusterAdmin.

// ClusterAdmin is what the cluster-wide routes need beyond the metadata
// store: a BookKeeper client and the admin operations built on it
// (admin.HTTPCluster implements it). The owner of the admin server
// provides it; without one those routes answer 503.
type ClusterAdmin interface {
	// BookieInfo asks every registered bookie (writable and read-only) for
	// its disk figures and calls fn with each answer (bytes); bookies that
	// do not answer are left out.
	BookieInfo(ctx context.Context, fn func(id metadata.BookieID, free, total uint64)) error
	// ReadEntries reads entries first … last of a ledger without recovery
	// (last -1: up to the last add confirmed), at most max of them, and
	// calls fn with each in order (ErrNoSuchLedger when it does not exist).
	ReadEntries(ctx context.Context, ledgerID, first, last int64, max int, fn func(entryID int64, data []byte)) error
	// DeleteLedger deletes a ledger (its metadata; bookies drop the data
	// at their next garbage collection).
	DeleteLedger(ctx context.Context, ledgerID int64) error
	// StartRecoverBookie starts re-replicating the ledgers of bookie off it
	// in the background (BookKeeper's recoverBookieData), then deletes its
	// cookie if deleteCookie; it returns once the work is started.
	StartRecoverBookie(bookie metadata.BookieID, deleteCookie bool) error
	// StartDecommission starts decommissioning bookie in the background
	// (BookKeeper's decommissionBookie): an audit, a wait until no ledger
	// stores entries on it, then its cookie is deleted.
	StartDecommission(bookie metadata.BookieID) error
	// TriggerAudit asks the auditor to audit now.
	TriggerAudit(ctx context.Context) error
}

// readEntriesPageSize is both Java's ENTRIES_PER_PAE (the page of
// ?page=N) and Folio's bound on one answer of /api/v1/ledger/read.
const readEntriesPageSize = 1000

// listLedgersPageSize is Java's LIST_LEDGER_BATCH_SIZE, the page of
// /api/v1/ledger/list?print_metadata=true&page=N.
const listLedgersPageSize = 100

// clusterTimeout bounds the metadata and bookie calls of one request.
const clusterTimeout = 30 * time.Second

// clusterRoutes adds the cluster's routes to mux.
func clusterRoutes(mux *http.ServeMux, opts AdminOptions) {
	cluster := func(path string, h func(ctx context.Context, w http.ResponseWriter, r *http.Request, md metadata.Driver), methods ...string) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			if !method(w, r, methods...) {
				return
			}
			if opts.Metadata == nil {
				httpError(w, http.StatusServiceUnavailable, "this process has no metadata store connection for cluster routes")
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), clusterTimeout)
			defer cancel()
			h(ctx, w, r, opts.Metadata)
		})
	}
	clusterAdmin := func(w http.ResponseWriter) ClusterAdmin {
		if opts.Cluster == nil {
			httpError(w, http.StatusServiceUnavailable, "this process serves no BookKeeper client for cluster operations")
		}
		return opts.Cluster
	}
	autoRecovery := func(w http.ResponseWriter, md metadata.Driver) metadata.AutoRecoveryDriver {
		ar, ok := md.(metadata.AutoRecoveryDriver)
		if !ok {
			httpError(w, http.StatusNotImplemented, "the metadata store does not support AutoRecovery")
		}
		return ar
	}

	cluster("/api/v1/bookie/list_bookies", func(ctx context.Context, w http.ResponseWriter, r *http.Request, md metadata.Driver) {
		typ := r.URL.Query().Get("type")
		if typ != "" && typ != "rw" && typ != "ro" {
			httpError(w, http.StatusBadRequest, fmt.Sprintf("parameter type=%q: want rw or ro", typ))
			return
		}
		hostnames, ok := boolParam(w, r, "print_hostnames")
		if !ok {
			return
		}
		list := md.WritableBookies
		if typ == "ro" {
			list = md.ReadOnlyBookies
		}
		ids, err := list(ctx)
		if err != nil {
			httpError(w, http.StatusInternalServerError, "listing bookies: "+err.Error())
			return
		}
		out := map[string]*string{}
		for _, id := range ids {
			var host *string
			if hostnames {
				h := string(id)
				if hh, _, err := net.SplitHostPort(h); err == nil {
					h = hh
				}
				host = &h
			}
			out[string(id)] = host
		}
		writeJSON(w, http.StatusOK, out)
	}, http.MethodGet)
	cluster("/api/v1/bookie/list_bookie_info", func(ctx context.Context, w http.ResponseWriter, r *http.Request, md metadata.Driver) {
		ca := clusterAdmin(w)
		if ca == nil {
			return
		}
		out := map[string]string{}
		var free, total uint64
		err := ca.BookieInfo(ctx, func(id metadata.BookieID, f, t uint64) {
			out[string(id)] = fmt.Sprintf(": {Free: %d%s, Total: %d%s},", f, readable(f), t, readable(t))
			free += f
			total += t
		})
		if err != nil {
			httpError(w, http.StatusInternalServerError, "asking the bookies: "+err.Error())
			return
		}
		if len(out) == 0 {
			writeText(w, http.StatusNotFound, "Not found any Bookie info.")
			return
		}
		out["ClusterInfo: "] = fmt.Sprintf("{Free: %d%s, Total: %d%s}", free, readable(free), total, readable(total))
		writeJSON(w, http.StatusOK, out)
	}, http.MethodGet)

	cluster("/api/v1/ledger/list", func(ctx context.Context, w http.ResponseWriter, r *http.Request, md metadata.Driver) {
		printMeta, ok := boolParam(w, r, "print_metadata")
		if !ok {
			return
		}
		decode, ok := boolParam(w, r, "decode_meta")
		if !ok {
			return
		}
		page, ok := int64Param(w, r, "page", 0, 1, false)
		if !ok {
			return
		}
		// Java pages only with print_metadata; ids are listed in
		// ascending order.
		first, count := int64(0), int64(math.MaxInt64)
		if printMeta && page > 0 {
			first, count = (page-1)*listLedgersPageSize, listLedgersPageSize
		}
		out := orderedJSON{}
		var idx int64
		for start := int64(0); ; {
			ids, err := md.ListLedgers(ctx, start, 1000)
			if err != nil {
				httpError(w, http.StatusInternalServerError, "listing ledgers: "+err.Error())
				return
			}
			if len(ids) == 0 {
				break
			}
			for _, id := range ids {
				if idx >= first && idx-first < count {
					var v any
					if printMeta {
						m, _, err := md.ReadLedger(ctx, id)
						if errors.Is(err, metadata.ErrNoSuchLedger) {
							continue // deleted since the listing
						}
						if err != nil {
							httpError(w, http.StatusInternalServerError, fmt.Sprintf("reading ledger %d: %v", id, err))
							return
						}
						if decode {
							v = ledgerMetadataJSON(id, m)
						} else if b, err := metadata.SerializeLedgerMetadata(m); err == nil {
							v = string(b)
						} else {
							httpError(w, http.StatusInternalServerError, fmt.Sprintf("ledger %d: %v", id, err))
							return
						}
					}
					out = append(out, kv{strconv.FormatInt(id, 10), v})
				}
				idx++
			}
			start = ids[len(ids)-1] + 1
		}
		writeJSON(w, http.StatusOK, out)
	}, http.MethodGet)
	cluster("/api/v1/ledger/metadata", func(ctx context.Context, w http.ResponseWriter, r *http.Request, md metadata.Driver) {
		id, ok := int64Param(w, r, "ledger_id", 0, 0, true)
		if !ok {
			return
		}
		m, _, err := md.ReadLedger(ctx, id)
		switch {
		case errors.Is(err, metadata.ErrNoSuchLedger):
			httpError(w, http.StatusNotFound, fmt.Sprintf("no ledger %d", id))
		case err != nil:
			httpError(w, http.StatusInternalServerError, fmt.Sprintf("reading ledger %d: %v", id, err))
		default:
			writeJSON(w, http.StatusOK, map[string]any{strconv.FormatInt(id, 10): ledgerMetadataJSON(id, m)})
		}
	}, http.MethodGet)
	cluster("/api/v1/ledger/read", func(ctx context.Context, w http.ResponseWriter, r *http.Request, md metadata.Driver) {
		id, ok := int64Param(w, r, "ledger_id", 0, 0, true)
		if !ok {
			return
		}
		first, ok := int64Param(w, r, "start_entry_id", 0, 0, false)
		if !ok {
			return
		}
		last, ok := int64Param(w, r, "end_entry_id", -1, -1, false)
		if !ok {
			return
		}
		page, ok := int64Param(w, r, "page", -1, 1, false)
		if !ok {
			return
		}
		ca := clusterAdmin(w)
		if ca == nil {
			return
		}
		out := map[string]string{}
		if page > 0 {
			lo, hi := (page-1)*readEntriesPageSize, page*readEntriesPageSize-1
			if first == 0 || first < lo {
				first = lo
			}
			if last == -1 || last > hi {
				last = hi
			}
			out["Entries for page: "] = strconv.FormatInt(page, 10)
		}
		if last != -1 && first > last {
			httpError(w, http.StatusBadRequest, fmt.Sprintf("start_entry_id %d is after end_entry_id %d", first, last))
			return
		}
		err := ca.ReadEntries(ctx, id, first, last, readEntriesPageSize, func(e int64, data []byte) {
			out[strconv.FormatInt(e, 10)] = asciiString(data)
		})
		switch {
		case errors.Is(err, metadata.ErrNoSuchLedger):
			httpError(w, http.StatusNotFound, fmt.Sprintf("no ledger %d", id))
			return
		case err != nil:
			httpError(w, http.StatusInternalServerError, fmt.Sprintf("reading ledger %d: %v", id, err))
			return
		}
		writeJSON(w, http.StatusOK, out)
	}, http.MethodGet)
	cluster("/api/v1/ledger/delete", func(ctx context.Context, w http.ResponseWriter, r *http.Request, md metadata.Driver) {
		id, ok := int64Param(w, r, "ledger_id", 0, 0, true)
		if !ok {
			return
		}
		ca := clusterAdmin(w)
		if ca == nil {
			return
		}
		switch err := ca.DeleteLedger(ctx, id); {
		case errors.Is(err, metadata.ErrNoSuchLedger):
			httpError(w, http.StatusNotFound, fmt.Sprintf("no ledger %d", id))
		case err != nil:
			httpError(w, http.StatusInternalServerError, fmt.Sprintf("deleting ledger %d: %v", id, err))
		default:
			writeJSON(w, http.StatusOK, fmt.Sprintf("Deleted ledger: %d", id))
		}
	}, http.MethodDelete)

	cluster("/api/v1/autorecovery/bookie", func(ctx context.Context, w http.ResponseWriter, r *http.Request, md metadata.Driver) {
		// bookie_dest is accepted and ignored, as Java 4.17 does: the
		// copies go to writable bookies chosen like the workers'.
		var body struct {
			Src          []string `json:"bookie_src"`
			Dest         []string `json:"bookie_dest"`
			DeleteCookie bool     `json:"delete_cookie"`
		}
		if !readJSONBody(w, r, &body, `{"bookie_src": ["<bookie id>"], "delete_cookie": true|false}`) {
			return
		}
		if len(body.Src) == 0 || body.Src[0] == "" {
			httpError(w, http.StatusBadRequest, `bookie_src: want a list with the bookie to recover, e.g. {"bookie_src": ["10.0.0.1:3181"]}`)
			return
		}
		ca := clusterAdmin(w)
		if ca == nil {
			return
		}
		if err := ca.StartRecoverBookie(metadata.BookieID(body.Src[0]), body.DeleteCookie); err != nil {
			httpError(w, http.StatusInternalServerError, "starting the recovery: "+err.Error())
			return
		}
		writeText(w, http.StatusOK, "Success send recovery request command.")
	}, http.MethodPut)
	cluster("/api/v1/autorecovery/list_under_replicated_ledger", func(ctx context.Context, w http.ResponseWriter, r *http.Request, md metadata.Driver) {
		ar := autoRecovery(w, md)
		if ar == nil {
			return
		}
		q := r.URL.Query()
		incl, excl := q.Get("missingreplica"), q.Get("excludingmissingreplica")
		_, printMissing := q["printmissingreplica"]
		var ids []int64
		missing := orderedJSON{}
		for start := int64(0); ; {
			page, err := ar.ListUnderReplicatedLedgers(ctx, start, 1000)
			if err != nil {
				httpError(w, http.StatusInternalServerError, "listing under-replicated ledgers: "+err.Error())
				return
			}
			if len(page) == 0 {
				break
			}
			for _, u := range page {
				if incl != "" && !slices.Contains(u.MissingReplicas, metadata.BookieID(incl)) ||
					excl != "" && slices.Contains(u.MissingReplicas, metadata.BookieID(excl)) {
					continue
				}
				ids = append(ids, u.LedgerID)
				reps := make([]string, len(u.MissingReplicas))
				for i, b := range u.MissingReplicas {
					reps[i] = string(b)
				}
				missing = append(missing, kv{strconv.FormatInt(u.LedgerID, 10), reps})
			}
			start = page[len(page)-1].LedgerID + 1
		}
		switch {
		case len(ids) == 0:
			writeText(w, http.StatusNotFound, "No under replicated ledgers found")
		case printMissing:
			writeJSON(w, http.StatusOK, missing)
		default:
			writeJSON(w, http.StatusOK, ids)
		}
	}, http.MethodGet)
	cluster("/api/v1/autorecovery/status", func(ctx context.Context, w http.ResponseWriter, r *http.Request, md metadata.Driver) {
		ar := autoRecovery(w, md)
		if ar == nil {
			return
		}
		if r.Method == http.MethodPut {
			s := r.URL.Query().Get("enabled")
			if s == "" {
				httpError(w, http.StatusBadRequest, "missing parameter enabled=true|false")
				return
			}
			on, err := strconv.ParseBool(s)
			if err != nil {
				httpError(w, http.StatusBadRequest, fmt.Sprintf("parameter enabled=%q: want true or false", s))
				return
			}
			if err := ar.SetReplicationEnabled(ctx, on); err != nil {
				httpError(w, http.StatusInternalServerError, "setting replication: "+err.Error())
				return
			}
		}
		on, err := ar.ReplicationEnabled(ctx)
		if err != nil {
			httpError(w, http.StatusInternalServerError, "reading replication: "+err.Error())
			return
		}
		writeJSON(w, http.StatusOK, map[string]bool{"enabled": on})
	}, http.MethodGet, http.MethodPut)
	cluster("/api/v1/autorecovery/who_is_auditor", func(ctx context.Context, w http.ResponseWriter, r *http.Request, md metadata.Driver) {
		ar := autoRecovery(w, md)
		if ar == nil {
			return
		}
		id, err := ar.Auditor(ctx)
		switch {
		case errors.Is(err, metadata.ErrNotFound):
			writeText(w, http.StatusNotFound, "No auditor elected")
		case err != nil:
			httpError(w, http.StatusInternalServerError, "reading the auditor: "+err.Error())
		default:
			writeText(w, http.StatusOK, "Auditor: "+string(id))
		}
	}, http.MethodGet)
	cluster("/api/v1/autorecovery/trigger_audit", func(ctx context.Context, w http.ResponseWriter, r *http.Request, md metadata.Driver) {
		ca := clusterAdmin(w)
		if ca == nil {
			return
		}
		if err := ca.TriggerAudit(ctx); err != nil {
			httpError(w, http.StatusConflict, "triggering an audit: "+err.Error())
			return
		}
		writeText(w, http.StatusOK, "Success trigger audit.")
	}, http.MethodPut)
	cluster("/api/v1/autorecovery/lost_bookie_recovery_delay", func(ctx context.Context, w http.ResponseWriter, r *http.Request, md metadata.Driver) {
		ar := autoRecovery(w, md)
		if ar == nil {
			return
		}
		if r.Method == http.MethodGet {
			d, err := ar.LostBookieRecoveryDelay(ctx)
			if err != nil && !errors.Is(err, metadata.ErrNotFound) {
				httpError(w, http.StatusInternalServerError, "reading lostBookieRecoveryDelay: "+err.Error())
				return
			}
			writeText(w, http.StatusOK, fmt.Sprintf("lostBookieRecoveryDelay value: %d", int64(d/time.Second)))
			return
		}
		var body struct {
			Delay *int64 `json:"delay_seconds"`
		}
		if !readJSONBody(w, r, &body, `{"delay_seconds": <seconds>}`) {
			return
		}
		if body.Delay == nil || *body.Delay < 0 || *body.Delay > math.MaxInt32 {
			httpError(w, http.StatusBadRequest, `delay_seconds: want {"delay_seconds": <seconds, 0 or more>}`)
			return
		}
		if err := ar.SetLostBookieRecoveryDelay(ctx, time.Duration(*body.Delay)*time.Second); err != nil {
			httpError(w, http.StatusInternalServerError, "setting lostBookieRecoveryDelay: "+err.Error())
			return
		}
		writeText(w, http.StatusOK, fmt.Sprintf("Success set lostBookieRecoveryDelay to %d", *body.Delay))
	}, http.MethodGet, http.MethodPut)
	cluster("/api/v1/autorecovery/decommission", func(ctx context.Context, w http.ResponseWriter, r *http.Request, md metadata.Driver) {
		var body struct {
			Src string `json:"bookie_src"`
		}
		if !readJSONBody(w, r, &body, `{"bookie_src": "<bookie id>"}`) {
			return
		}
		if body.Src == "" {
			httpError(w, http.StatusBadRequest, `bookie_src: want {"bookie_src": "<bookie id>"}`)
			return
		}
		ca := clusterAdmin(w)
		if ca == nil {
			return
		}
		if err := ca.StartDecommission(metadata.BookieID(body.Src)); err != nil {
			httpError(w, http.StatusConflict, "decommission: "+err.Error())
			return
		}
		writeText(w, http.StatusOK, "Success send decommission Bookie command "+body.Src)
	}, http.MethodPut)
}

// readable is Java's ListBookieInfoService.getReadable: "(1.234GB)" with
// decimal units, rounded down, "" below 1000.
func readable(v uint64) string {
	units := []string{"", "KB", "MB", "GB", "TB"}
	d, i := float64(v), 0
	for d >= 1000 && i < len(units)-1 {
		d /= 1000
		i++
	}
	if i == 0 {
		return ""
	}
	s := strconv.FormatFloat(math.Floor(d*1000)/1000, 'f', -1, 64)
	return "(" + s + units[i] + ")"
}

// asciiString is Java's new String(bytes, US_ASCII): bytes above 127
// become U+FFFD.
func asciiString(b []byte) string {
	r := make([]rune, len(b))
	for i, c := range b {
		if c < 0x80 {
			r[i] = rune(c)
		} else {
			r[i] = '\uFFFD'
		}
	}
	return string(r)
}

// bookieIDJSON is how Jackson writes a BookieId (its getId getter).
type bookieIDJSON struct {
	ID string `json:"id"`
}

// ledgerMetadataJSON is a ledger's metadata as Java's JsonUtil (Jackson)
// writes a LedgerMetadataImpl: its bean getters, byte arrays in base64.
func ledgerMetadataJSON(id int64, m *metadata.LedgerMetadata) map[string]any {
	ensembles := orderedJSON{}
	for _, s := range m.Ensembles {
		e := make([]bookieIDJSON, len(s.Ensemble))
		for i, b := range s.Ensemble {
			e[i] = bookieIDJSON{string(b)}
		}
		ensembles = append(ensembles, kv{strconv.FormatInt(s.FirstEntryID, 10), e})
	}
	custom := map[string]string{}
	for k, v := range m.CustomMetadata {
		custom[k] = base64.StdEncoding.EncodeToString(v)
	}
	digest := m.DigestType.String()
	if m.DigestType == metadata.DigestHMAC {
		digest = "MAC" // Java's client API name
	}
	if !m.HasPassword {
		digest = "CRC32" // Java's default for metadata without one
	}
	password := m.Password
	if password == nil {
		password = []byte{}
	}
	version := m.FormatVersion
	if version == 0 {
		version = 3
	}
	return map[string]any{
		"ledgerId":              id,
		"metadataFormatVersion": version,
		"ensembleSize":          m.EnsembleSize,
		"writeQuorumSize":       m.WriteQuorum,
		"ackQuorumSize":         m.AckQuorum,
		"lastEntryId":           m.LastEntryID,
		"length":                m.Length,
		"closed":                m.IsClosed(),
		"state":                 m.State.String(),
		"digestType":            digest,
		"password":              base64.StdEncoding.EncodeToString(password),
		"ctime":                 m.Ctime,
		"ctoken":                m.CToken,
		"customMetadata":        custom,
		"allEnsembles":          ensembles,
	}
}

// kv and orderedJSON write a JSON object with keys in the order given
// (Java's LinkedHashMap answers: ledger ids ascending).
type kv struct {
	k string
	v any
}

type orderedJSON []kv

func (o orderedJSON) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, e := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(e.k)
		v, err := json.Marshal(e.v)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}
