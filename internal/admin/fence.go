package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// HTTPEndpoints says where the bookies' admin HTTP servers are, for reads
// the BookKeeper protocol cannot make without changing state (a ledger's
// fence bit).
type HTTPEndpoints struct {
	// ByBookie maps a bookie id to its admin server's host:port
	// (https://host:port for a server that serves TLS).
	ByBookie map[string]string
	// Shared are admin servers serving several bookies (folio standalone):
	// asked for every bookie without its own entry, with ?bookie=<id>.
	Shared []string
	// Client makes the requests; nil means a client with a 5 s timeout.
	// For https servers it carries the TLS configuration (the CA, and the
	// client certificate a server with a trust store requires).
	Client *http.Client
	// Token, when set, is sent as `Authorization: Bearer <token>` (a
	// bookie with httpServerAuthTokenPath requires it).
	Token string
}

// ParseHTTPEndpoint adds one `[BOOKIE_ID=][https://]HOST:PORT` (the
// inspectledger --http flag) to e; https:// marks a server that serves TLS.
func (e *HTTPEndpoints) ParseHTTPEndpoint(s string) error {
	id, addr, named := strings.Cut(s, "=")
	if !named {
		addr, id = id, ""
	}
	tls := strings.HasPrefix(addr, "https://")
	addr = strings.TrimPrefix(strings.TrimPrefix(addr, "http://"), "https://")
	addr = strings.TrimSuffix(addr, "/")
	if _, port, err := net.SplitHostPort(addr); err != nil || !validPort(port) {
		return fmt.Errorf("%q: want [BOOKIE_ID=][https://]HOST:PORT of an admin HTTP server", s)
	}
	if tls {
		addr = "https://" + addr
	}
	if named {
		if id == "" {
			return fmt.Errorf("%q: empty bookie id", s)
		}
		if e.ByBookie == nil {
			e.ByBookie = map[string]string{}
		}
		e.ByBookie[id] = addr
		return nil
	}
	e.Shared = append(e.Shared, addr)
	return nil
}

func validPort(p string) bool {
	n, err := strconv.ParseUint(p, 10, 16)
	return err == nil && n > 0
}

// Empty reports whether no endpoint is known.
func (e *HTTPEndpoints) Empty() bool { return e == nil || len(e.ByBookie) == 0 && len(e.Shared) == 0 }

// ledgerInfoBody is the bookie admin server's GET
// /api/v1/bookie/ledger/info answer (server.LedgerInfoBody).
type ledgerInfoBody struct {
	Bookie           string `json:"bookie"`
	LedgerID         int64  `json:"ledgerId"`
	Found            bool   `json:"found"`
	Fenced           bool   `json:"fenced"`
	Deleted          bool   `json:"deleted"`
	LastAddConfirmed int64  `json:"lastAddConfirmed"`
	LastEntryID      int64  `json:"lastEntryId"`
}

// FillFenceState asks each bookie's admin HTTP server (GET
// /api/v1/bookie/ledger/info, a read that never fences) for its fence bit
// of the inspected ledger and sets BookieLedgerView.Fenced. Bookies whose
// server is unknown or does not answer keep Fenced nil ("unknown"); a
// bookie holding no state of the ledger is not fenced (a fence creates
// the state).
func FillFenceState(ctx context.Context, ins *LedgerInspection, e *HTTPEndpoints) {
	if e.Empty() {
		return
	}
	hc := e.Client
	if hc == nil {
		hc = &http.Client{Timeout: 5 * time.Second}
	}
	var wg sync.WaitGroup
	for i := range ins.Bookies {
		v := &ins.Bookies[i]
		addrs := e.Shared
		if a, ok := e.ByBookie[v.ID]; ok {
			addrs = []string{a}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, a := range addrs {
				b, err := getLedgerInfo(ctx, hc, a, e.Token, v.ID, ins.LedgerID)
				if err != nil {
					continue
				}
				fenced := b.Found && b.Fenced
				v.Fenced = &fenced
				v.FenceSource = a
				return
			}
		}()
	}
	wg.Wait()
}

func getLedgerInfo(ctx context.Context, hc *http.Client, addr, token, bookie string, ledgerID int64) (*ledgerInfoBody, error) {
	base := addr
	if !strings.HasPrefix(base, "https://") {
		base = "http://" + addr
	}
	u := base + "/api/v1/bookie/ledger/info?" + url.Values{
		"bookie": {bookie}, "ledger_id": {strconv.FormatInt(ledgerID, 10)}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(raw)))
	}
	var b ledgerInfoBody
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, err
	}
	// Only an answer about this bookie and ledger counts.
	if b.Bookie != bookie || b.LedgerID != ledgerID {
		return nil, fmt.Errorf("answer about bookie %s ledger %d", b.Bookie, b.LedgerID)
	}
	return &b, nil
}
