package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// BookKeeper's admin HTTP routes (bookkeeper-http HttpRouter and the
// services of org.apache.bookkeeper.server.http.service in 4.17), with its
// paths, methods, parameters and bodies, so that runbooks, charts and
// scripts written for a Java bookie work unchanged. Where Java answers a
// plain string, Folio does too; where it answers JSON, Folio's keys and
// value types are Java's (compared by compat/httpshapes).
//
// Deliberate differences, for an operator's safety and clarity:
//   - a method a route does not serve is answered 405 with an Allow header
//     (Java: 404 "Not found method"), and a missing or malformed parameter
//     400 naming it (Java: 404, or 500 from an uncaught exception);
//   - GET /api/v1/ledger/read returns at most readEntriesPageSize entries
//     per request (Java reads the whole range into memory);
//   - PUT /api/v1/config/server_config (changing the configuration of a
//     running bookie) is refused with 405: Folio reads its configuration
//     at start only;
//   - server_config hides the values of keys that hold secrets (a key
//     whose name contains "password" or "secret").
//
// The destructive routes (ledger/delete, autorecovery/bookie,
// autorecovery/decommission, expand_storage, gc/suspend_compaction and the
// PUTs that change state) need the admin token when one is configured, as
// every route outside openPaths does.

// LogMark is one journal directory's last log mark (AdminTarget.LastLogMarks).
type LogMark struct {
	FileID uint64
	Offset int64
}

// GCStatus is one entry of GET /api/v1/bookie/gc_details: Java's
// GarbageCollectionStatus, field for field. Folio's compaction has one
// level, reported as minor (its default threshold is Java's
// minorCompactionThreshold); times are milliseconds since the epoch.
type GCStatus struct {
	ForceCompacting                 bool  `json:"forceCompacting"`
	MajorCompacting                 bool  `json:"majorCompacting"`
	MinorCompacting                 bool  `json:"minorCompacting"`
	LastMajorCompactionTime         int64 `json:"lastMajorCompactionTime"`
	LastMinorCompactionTime         int64 `json:"lastMinorCompactionTime"`
	LastEntryLocationCompactionTime int64 `json:"lastEntryLocationCompactionTime"`
	MajorCompactionCounter          int64 `json:"majorCompactionCounter"`
	MinorCompactionCounter          int64 `json:"minorCompactionCounter"`
	EntryLocationCompactionCounter  int64 `json:"entryLocationCompactionCounter"`
}

// method reports whether r uses one of methods; otherwise it answers 405.
func method(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	if slices.Contains(methods, r.Method) {
		return true
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	httpError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed; use "+strings.Join(methods, " or "))
	return false
}

// writeText answers a plain-text body, as Java's services do for their
// string answers.
func writeText(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	io.WriteString(w, body)
}

// int64Param parses query parameter name: def when absent, 400 when
// malformed or below min.
func int64Param(w http.ResponseWriter, r *http.Request, name string, def, min int64, required bool) (int64, bool) {
	s := r.URL.Query().Get(name)
	if s == "" {
		if required {
			httpError(w, http.StatusBadRequest, fmt.Sprintf("missing parameter %s", name))
			return 0, false
		}
		return def, true
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < min {
		httpError(w, http.StatusBadRequest, fmt.Sprintf("parameter %s=%q: want an integer >= %d", name, s, min))
		return 0, false
	}
	return n, true
}

// boolParam parses a true/false query parameter (absent: false).
func boolParam(w http.ResponseWriter, r *http.Request, name string) (bool, bool) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return false, true
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		httpError(w, http.StatusBadRequest, fmt.Sprintf("parameter %s=%q: want true or false", name, s))
		return false, false
	}
	return b, true
}

// readJSONBody decodes a JSON object body into v; 400 when it is empty or
// not one.
func readJSONBody(w http.ResponseWriter, r *http.Request, v any, want string) bool {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	if err == nil && len(strings.TrimSpace(string(b))) == 0 {
		err = errors.New("empty body")
	}
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		httpError(w, http.StatusBadRequest, fmt.Sprintf("want a JSON body %s: %v", want, err))
		return false
	}
	return true
}

// bkRoutes adds BookKeeper's routes to mux.
func bkRoutes(mux *http.ServeMux, targets func() []AdminTarget, opts AdminOptions) {
	// The bookie's own routes.
	bookie := func(path string, h func(w http.ResponseWriter, r *http.Request, t AdminTarget), methods ...string) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			if t, ok := pickTarget(w, r, targets, methods...); ok {
				h(w, r, t)
			}
		})
	}
	bookie("/api/v1/bookie/last_log_mark", func(w http.ResponseWriter, r *http.Request, t AdminTarget) {
		out := map[string]string{}
		for _, m := range t.LastLogMarks() {
			out[fmt.Sprintf("LastLogMark: Journal Id - %d(%016x.jnl)", m.FileID, m.FileID)] = fmt.Sprintf("Pos - %d", m.Offset)
		}
		writeJSON(w, http.StatusOK, out)
	}, http.MethodGet)
	bookie("/api/v1/bookie/list_disk_file", func(w http.ResponseWriter, r *http.Request, t AdminTarget) {
		kind := r.URL.Query().Get("file_type")
		kinds := map[string]string{"journal": "journal files", "entrylog": "entrylog files", "index": "index files"}
		if _, ok := kinds[kind]; kind != "" && !ok {
			httpError(w, http.StatusBadRequest, fmt.Sprintf("parameter file_type=%q: want journal, entrylog or index (or none for all)", kind))
			return
		}
		files, err := t.DiskFiles()
		if err != nil {
			httpError(w, http.StatusInternalServerError, "listing the bookie's files: "+err.Error())
			return
		}
		out := map[string]string{}
		for k, key := range kinds {
			if kind == "" || kind == k {
				var b strings.Builder
				for _, f := range files[k] {
					b.WriteString(f + "\t")
				}
				out[key] = b.String()
			}
		}
		writeJSON(w, http.StatusOK, out)
	}, http.MethodGet)
	bookie("/api/v1/bookie/gc_details", func(w http.ResponseWriter, r *http.Request, t AdminTarget) {
		writeJSON(w, http.StatusOK, []GCStatus{t.GCDetails()})
	}, http.MethodGet)
	bookie("/api/v1/bookie/gc/suspend_compaction", func(w http.ResponseWriter, r *http.Request, t AdminTarget) {
		if r.Method == http.MethodGet {
			major, minor := t.CompactionSuspended()
			writeJSON(w, http.StatusOK, map[string]string{"isMajorGcSuspended": strconv.FormatBool(major), "isMinorGcSuspended": strconv.FormatBool(minor)})
			return
		}
		var body struct {
			Major *bool `json:"suspendMajor"`
			Minor *bool `json:"suspendMinor"`
		}
		if !readJSONBody(w, r, &body, `{"suspendMajor": true|false, "suspendMinor": true|false}`) {
			return
		}
		if body.Major == nil && body.Minor == nil {
			httpError(w, http.StatusBadRequest, "No suspendMajor or suspendMinor params found")
			return
		}
		major, minor := body.Major != nil && *body.Major, body.Minor != nil && *body.Minor
		t.SuspendCompaction(major, minor)
		var out []string
		if major {
			out = append(out, "Suspend majorGC on BookieServer: "+string(t.ID()))
		}
		if minor {
			out = append(out, "Suspend minorGC on BookieServer: "+string(t.ID()))
		}
		writeJSON(w, http.StatusOK, strings.Join(out, ", "))
	}, http.MethodGet, http.MethodPut)
	bookie("/api/v1/bookie/gc/resume_compaction", func(w http.ResponseWriter, r *http.Request, t AdminTarget) {
		var body struct {
			Major *bool `json:"resumeMajor"`
			Minor *bool `json:"resumeMinor"`
		}
		if !readJSONBody(w, r, &body, `{"resumeMajor": true|false, "resumeMinor": true|false}`) {
			return
		}
		if body.Major == nil && body.Minor == nil {
			httpError(w, http.StatusBadRequest, "No resumeMajor or resumeMinor params found")
			return
		}
		major, minor := body.Major != nil && *body.Major, body.Minor != nil && *body.Minor
		t.ResumeCompaction(major, minor)
		var out []string
		if major {
			out = append(out, "Resume majorGC on BookieServer: "+string(t.ID()))
		}
		if minor {
			out = append(out, "Resume minorGC on BookieServer: "+string(t.ID()))
		}
		writeJSON(w, http.StatusOK, strings.Join(out, ", "))
	}, http.MethodPut)
	bookie("/api/v1/bookie/expand_storage", func(w http.ResponseWriter, r *http.Request, t AdminTarget) {
		ctx, cancel := context.WithTimeout(r.Context(), clusterTimeout)
		defer cancel()
		if err := t.ExpandStorage(ctx); err != nil {
			httpError(w, http.StatusInternalServerError, "Exception while updating cookie for storage expansion: "+err.Error())
			return
		}
		writeText(w, http.StatusOK, "Success expand storage")
	}, http.MethodPut)
	bookie("/api/v1/config/server_config", func(w http.ResponseWriter, r *http.Request, t AdminTarget) {
		out := map[string]string{}
		for k, v := range t.ServerConfig() {
			if l := strings.ToLower(k); strings.Contains(l, "password") || strings.Contains(l, "secret") {
				v = "<hidden>"
			}
			out[k] = v
		}
		writeJSON(w, http.StatusOK, out)
	}, http.MethodGet)

	clusterRoutes(mux, opts)
}

// diskFiles lists a bookie's files as BookKeeper's list_disk_file does:
// journal files (*.jnl in the journal directories), entry logs (*.log in
// the ledger directories: by name in entrylogs/, as
// "entrylogs-shard-<i>/<name>" for another shard's log spilled there) and
// index files (the files of each ledger directory's index), sorted.
func diskFiles(cfg *Config) (map[string][]string, error) {
	out := map[string][]string{"journal": {}, "entrylog": {}, "index": {}}
	for _, d := range cfg.JournalDirs {
		ents, err := os.ReadDir(CurrentDir(d))
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".jnl") {
				out["journal"] = append(out["journal"], e.Name())
			}
		}
	}
	for _, d := range cfg.LedgerDirs {
		root := CurrentDir(d)
		err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() {
				return nil
			}
			rel, _ := filepath.Rel(root, path)
			switch {
			case strings.HasPrefix(rel, "index"+string(filepath.Separator)):
				out["index"] = append(out["index"], e.Name())
			case strings.HasSuffix(e.Name(), ".log") && filepath.Dir(rel) == "entrylogs":
				out["entrylog"] = append(out["entrylog"], e.Name())
			case strings.HasSuffix(e.Name(), ".log"):
				// Another shard's log spilled here (entrylogs-shard-<i>/):
				// its name alone could repeat one of this directory's own.
				out["entrylog"] = append(out["entrylog"], filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	for _, v := range out {
		slices.Sort(v)
	}
	return out, nil
}
