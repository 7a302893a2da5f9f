package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"time"

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

	// Ready reports whether the bookie is ready for traffic (is_ready):
	// running, not shutting down, and registered in the mode it is in
	// (writable, or read-only when it is read-only); why says what is
	// missing otherwise.
	Ready() (ready bool, why string)
	// LastLogMarks are the journals' last log marks, in directory order.
	LastLogMarks() []LogMark
	// DiskFiles lists the bookie's files by kind: "journal", "entrylog",
	// "index" (names, sorted).
	DiskFiles() (map[string][]string, error)
	// GCDetails reports the garbage collection's state.
	GCDetails() GCStatus
	// SuspendCompaction, ResumeCompaction and CompactionSuspended are
	// the operator's control of compaction (levels given true change).
	SuspendCompaction(major, minor bool)
	ResumeCompaction(major, minor bool)
	CompactionSuspended() (major, minor bool)
	// ExpandStorage checks the directories against the cookies again and
	// updates the cookies for newly added directories (allowStorageExpansion).
	ExpandStorage(ctx context.Context) error
	// ServerConfig is the configuration as read (key → value).
	ServerConfig() map[string]string
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

// AdminOptions configure the admin HTTP handler's access.
type AdminOptions struct {
	// Token, when not empty, is required as `Authorization: Bearer
	// <token>` by every route except openPaths (httpServerAuthTokenPath's
	// content). A missing or wrong token is answered 401.
	Token string
	// Pprof serves /debug/pprof/ (httpServerPprofEnabled); without it
	// those paths are 404.
	Pprof bool
	// Metadata is the metadata store the cluster routes (list_bookies,
	// /api/v1/ledger/*, /api/v1/autorecovery/*) read; nil: they answer 503.
	Metadata metadata.Driver
	// Cluster serves the cluster routes that need a BookKeeper client;
	// nil: they answer 503.
	Cluster ClusterAdmin
}

// openPaths are the routes served without the token: liveness, readiness
// and metrics, which probes and scrapers call without credentials. Each is
// read-only. Exact paths: anything else, including a path that would be
// cleaned to one of these, needs the token.
var openPaths = []string{"/heartbeat", "/metrics", "/api/v1/bookie/state", "/api/v1/bookie/is_ready"}

// NewAdminHandler returns the admin HTTP handler of a process: /heartbeat,
// /metrics (gatherer, Prometheus text format), BookKeeper's bookie
// endpoints and, with opts.Pprof, /debug/pprof/. targets lists the
// process's bookies (one for `folio bookie`, N for `folio standalone`); the
// bookie endpoints take ?bookie=<id> to choose one and need it when there
// are several.
func NewAdminHandler(gatherer prometheus.Gatherer, targets func() []AdminTarget, opts AdminOptions) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/heartbeat", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "OK\n")
	})
	mux.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))

	// BookKeeper's BookieIsReadyService, the readiness probe: 200 "OK"
	// once the bookie is registered in the mode it is in, 503 before
	// (and while shutting down).
	mux.HandleFunc("/api/v1/bookie/is_ready", func(w http.ResponseWriter, r *http.Request) {
		t, ok := pickTarget(w, r, targets, http.MethodGet)
		if !ok {
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if ready, why := t.Ready(); !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "Bookie is not fully started yet: "+why+"\n")
			return
		}
		io.WriteString(w, "OK\n")
	})
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

	bkRoutes(mux, targets, opts)

	if opts.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	if opts.Token == "" {
		return mux
	}
	return requireToken(opts.Token, mux)
}

// requireToken answers 401 to a request for anything but openPaths that
// does not carry the token. Both tokens are hashed before the
// constant-time comparison, so that neither the content nor the length of
// the token leaks through timing.
func requireToken(token string, next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token))
	open := map[string]bool{}
	for _, p := range openPaths {
		open[p] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if open[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		gotSum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(gotSum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="folio"`)
			httpError(w, http.StatusUnauthorized, "this endpoint needs the admin token: send Authorization: Bearer <the content of httpServerAuthTokenPath>")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// NewAdminServer returns the http.Server of an admin handler: TLS when
// tlsConf is set (serve it with ServeAdmin).
func NewAdminServer(h http.Handler, tlsConf *tls.Config) *http.Server {
	return &http.Server{Handler: h, TLSConfig: tlsConf, ReadHeaderTimeout: 10 * time.Second}
}

// ServeAdmin serves srv on ln, over TLS when srv.TLSConfig is set, until
// srv is shut down (http.ErrServerClosed).
func ServeAdmin(srv *http.Server, ln net.Listener) error {
	if srv.TLSConfig != nil {
		return srv.ServeTLS(ln, "", "")
	}
	return srv.Serve(ln)
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
