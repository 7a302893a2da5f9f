package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/storage"
)

// AdminTarget is what the admin HTTP server needs of one bookie (*Process
// implements it).
type AdminTarget interface {
	ID() metadata.BookieID
	// Info reports the disk figures (BookieInfoService).
	Info() (BookieInfo, error)
	// State reports the bookie's state (BookieStateService).
	State() BookieState
	// SetReadOnly sets or clears the admin's read-only request and reports
	// the resulting mode; an error when the bookie cannot become writable.
	SetReadOnly(readOnly bool) (bool, error)
	// TriggerGC starts a garbage collection pass; GCRunning reports one in
	// progress.
	TriggerGC()
	GCRunning() bool
	// LedgerInfo reports the bookie's state of one ledger without changing
	// it (storage.Store.LedgerInfo).
	LedgerInfo(ledgerID int64) (storage.LedgerInfo, error)
}

// LedgerInfoBody is the body of GET /api/v1/bookie/ledger/info: one
// bookie's state of one ledger, read without fencing or changing anything.
// Found is false when the bookie holds no state of the ledger (then it is
// not fenced there: a fence creates the ledger's state).
type LedgerInfoBody struct {
	Bookie   string `json:"bookie"`
	LedgerID int64  `json:"ledgerId"`
	Found    bool   `json:"found"`
	Fenced   bool   `json:"fenced"`
	// Deleted: fenced and then deleted; only the fence remains.
	Deleted          bool  `json:"deleted"`
	LastAddConfirmed int64 `json:"lastAddConfirmed"`
	LastEntryID      int64 `json:"lastEntryId"`
	ExplicitLAC      bool  `json:"explicitLac"`
}

// BookieInfo is the body of GET /api/v1/bookie/info.
type BookieInfo struct {
	FreeSpace  uint64 `json:"freeSpace"`
	TotalSpace uint64 `json:"totalSpace"`
}

// BookieState is the body of GET /api/v1/bookie/state (BookKeeper's
// field names).
type BookieState struct {
	Running                        bool `json:"running"`
	ReadOnly                       bool `json:"readOnly"`
	ShuttingDown                   bool `json:"shuttingDown"`
	AvailableForHighPriorityWrites bool `json:"availableForHighPriorityWrites"`
}

// readOnlyBody is the body of GET/PUT /api/v1/bookie/state/readonly.
type readOnlyBody struct {
	ReadOnly *bool `json:"readOnly"`
}

// NewAdminHandler returns the admin HTTP handler of a process: /heartbeat,
// /metrics (gatherer, Prometheus text format), BookKeeper's bookie
// endpoints and /debug/pprof/. targets lists the process's bookies (one for
// `folio bookie`, N for `folio standalone`); the bookie endpoints take
// ?bookie=<id> to choose one and need it when there are several.
func NewAdminHandler(gatherer prometheus.Gatherer, targets func() []AdminTarget) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/heartbeat", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "OK\n")
	})
	mux.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))

	mux.HandleFunc("/api/v1/bookie/info", func(w http.ResponseWriter, r *http.Request) {
		t, ok := pickTarget(w, r, targets, http.MethodGet)
		if !ok {
			return
		}
		info, err := t.Info()
		if err != nil {
			httpError(w, http.StatusInternalServerError, "reading disk usage: "+err.Error())
			return
		}
		writeJSON(w, http.StatusOK, info)
	})
	mux.HandleFunc("/api/v1/bookie/state", func(w http.ResponseWriter, r *http.Request) {
		t, ok := pickTarget(w, r, targets, http.MethodGet)
		if !ok {
			return
		}
		writeJSON(w, http.StatusOK, t.State())
	})
	mux.HandleFunc("/api/v1/bookie/state/readonly", func(w http.ResponseWriter, r *http.Request) {
		t, ok := pickTarget(w, r, targets, http.MethodGet, http.MethodPut)
		if !ok {
			return
		}
		if r.Method == http.MethodGet {
			ro := t.State().ReadOnly
			writeJSON(w, http.StatusOK, readOnlyBody{ReadOnly: &ro})
			return
		}
		var body readOnlyBody
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&body); err != nil || body.ReadOnly == nil {
			httpError(w, http.StatusBadRequest, `want a JSON body {"readOnly": true|false}`)
			return
		}
		ro, err := t.SetReadOnly(*body.ReadOnly)
		if err != nil {
			httpError(w, http.StatusConflict, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, readOnlyBody{ReadOnly: &ro})
	})
	mux.HandleFunc("/api/v1/bookie/gc", func(w http.ResponseWriter, r *http.Request) {
		t, ok := pickTarget(w, r, targets, http.MethodGet, http.MethodPut)
		if !ok {
			return
		}
		if r.Method == http.MethodPut {
			t.TriggerGC()
			writeJSON(w, http.StatusOK, "Triggered forceGC")
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"is_in_force_gc": fmt.Sprint(t.GCRunning())})
	})

	mux.HandleFunc("/api/v1/bookie/ledger/info", func(w http.ResponseWriter, r *http.Request) {
		t, ok := pickTarget(w, r, targets, http.MethodGet)
		if !ok {
			return
		}
		q := r.URL.Query()
		arg := q.Get("ledger_id")
		if arg == "" {
			arg = q.Get("ledger")
		}
		id, err := strconv.ParseInt(arg, 10, 64)
		if err != nil || id < 0 {
			httpError(w, http.StatusBadRequest, "want ?ledger_id=<ledger id, a non-negative integer>")
			return
		}
		info, err := t.LedgerInfo(id)
		body := LedgerInfoBody{Bookie: string(t.ID()), LedgerID: id, Found: err == nil, Fenced: info.Fenced, Deleted: info.Deleted,
			LastAddConfirmed: info.LastAddConfirmed, LastEntryID: info.LastEntryID, ExplicitLAC: info.HasExplicitLAC}
		switch {
		case errors.Is(err, storage.ErrNoLedger):
			body.LastAddConfirmed, body.LastEntryID = -1, -1
		case err != nil:
			httpError(w, http.StatusInternalServerError, fmt.Sprintf("reading ledger %d: %v", id, err))
			return
		}
		writeJSON(w, http.StatusOK, body)
	})

	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// pickTarget checks the method and chooses the bookie a request is about.
func pickTarget(w http.ResponseWriter, r *http.Request, targets func() []AdminTarget, methods ...string) (AdminTarget, bool) {
	allowed := false
	for _, m := range methods {
		allowed = allowed || r.Method == m
	}
	if !allowed {
		w.Header().Set("Allow", strings.Join(methods, ", "))
		httpError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed; use "+strings.Join(methods, " or "))
		return nil, false
	}
	ts := targets()
	want := r.URL.Query().Get("bookie")
	var ids []string
	for _, t := range ts {
		if want != "" && string(t.ID()) == want {
			return t, true
		}
		ids = append(ids, string(t.ID()))
	}
	switch {
	case len(ts) == 0:
		httpError(w, http.StatusServiceUnavailable, "no bookie is running")
	case want == "" && len(ts) == 1:
		return ts[0], true
	case want == "":
		httpError(w, http.StatusBadRequest, "several bookies run here; add ?bookie=<id>, one of "+strings.Join(ids, ", "))
	default:
		httpError(w, http.StatusNotFound, "no bookie "+want+" here; bookies: "+strings.Join(ids, ", "))
	}
	return nil, false
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func httpError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}
