package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

func TestParseHTTPEndpoint(t *testing.T) {
	var e HTTPEndpoints
	for _, s := range []string{"127.0.0.1:8080", "10.0.0.1:3181=h:9", "http://h2:80/"} {
		if err := e.ParseHTTPEndpoint(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	if len(e.Shared) != 2 || e.Shared[1] != "h2:80" || e.ByBookie["10.0.0.1:3181"] != "h:9" {
		t.Fatalf("%+v", e)
	}
	if err := e.ParseHTTPEndpoint("b:2=https://h3:8443/"); err != nil || e.ByBookie["b:2"] != "https://h3:8443" {
		t.Fatalf("https endpoint: %v %+v", err, e)
	}
	for _, s := range []string{"", "nonsense", "=h:1", "b:1=h", "h:x"} {
		if err := e.ParseHTTPEndpoint(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

// FillFenceState: a shared server answers for the bookies it serves, a
// per-bookie entry wins, an unknown ledger is "not fenced", and a bookie
// no server answers for stays unknown.
func TestFillFenceState(t *testing.T) {
	fenced := map[string]bool{"b:1": true, "b:2": false}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/bookie/ledger/info" || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		b := r.URL.Query().Get("bookie")
		id, _ := strconv.ParseInt(r.URL.Query().Get("ledger_id"), 10, 64)
		f, ok := fenced[b]
		if !ok && b != "b:3" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"bookie": b, "ledgerId": id, "found": ok, "fenced": f})
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	ins := &LedgerInspection{LedgerID: 42, Bookies: []BookieLedgerView{{ID: "b:1"}, {ID: "b:2"}, {ID: "b:3"}, {ID: "b:4"}, {ID: "b:5"}}}
	e := &HTTPEndpoints{Shared: []string{addr}, ByBookie: map[string]string{"b:5": "127.0.0.1:1"}}
	FillFenceState(context.Background(), ins, e)
	want := []string{"true", "false", "false", "unknown", "unknown"}
	for i, b := range ins.Bookies {
		got := "unknown"
		if b.Fenced != nil {
			got = strconv.FormatBool(*b.Fenced)
		}
		if got != want[i] {
			t.Errorf("bookie %s: fenced %s, want %s", b.ID, got, want[i])
		}
	}
	// No endpoints: nothing is asked, everything stays unknown.
	ins2 := &LedgerInspection{LedgerID: 42, Bookies: []BookieLedgerView{{ID: "b:1"}}}
	FillFenceState(context.Background(), ins2, &HTTPEndpoints{})
	if ins2.Bookies[0].Fenced != nil {
		t.Fatal("fence state without endpoints")
	}
}

// FillFenceState over https with a token: the client's TLS configuration
// and the token reach the server; without the token the bookie stays
// unknown.
func TestFillFenceStateHTTPSWithToken(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		id, _ := strconv.ParseInt(r.URL.Query().Get("ledger_id"), 10, 64)
		json.NewEncoder(w).Encode(map[string]any{"bookie": r.URL.Query().Get("bookie"), "ledgerId": id, "found": true, "fenced": true})
	}))
	defer srv.Close()
	var e HTTPEndpoints
	if err := e.ParseHTTPEndpoint(srv.URL); err != nil {
		t.Fatal(err)
	}
	e.Client = srv.Client()
	for _, token := range []string{"", "s3cret"} {
		e.Token = token
		ins := &LedgerInspection{LedgerID: 7, Bookies: []BookieLedgerView{{ID: "b:1"}}}
		FillFenceState(context.Background(), ins, &e)
		switch f := ins.Bookies[0].Fenced; {
		case token == "" && f != nil:
			t.Errorf("without the token: fenced %v", *f)
		case token != "" && (f == nil || !*f || ins.Bookies[0].FenceSource != srv.URL):
			t.Errorf("with the token: %+v", ins.Bookies[0])
		}
	}
}
