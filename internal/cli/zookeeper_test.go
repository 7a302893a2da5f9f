package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/zk/zktest"
)

// TestShellOnZooKeeper runs shell commands against a real ZooKeeper with a
// zk:// URI, as against etcd: initnewcluster, whatisinstanceid,
// listbookies, listledgers, ledgermetadata, lostbookierecoverydelay,
// listunderreplicated, metaformat; and refuses zk+ms:// naming it.
func TestShellOnZooKeeper(t *testing.T) {
	srv := zktest.Start(t)
	uri := zktest.URI(srv, "/ledgers")
	shell := func(args ...string) (int, string, string) {
		t.Helper()
		return run(t, nil, append([]string{"shell", "--metadata-service-uri", uri}, args...)...)
	}
	code, out, errOut := shell("whatisinstanceid")
	if code != ExitFail || !strings.Contains(errOut, "no cluster") {
		t.Fatalf("whatisinstanceid before init: exit %d, %q, %q", code, out, errOut)
	}
	code, out, errOut = shell("initnewcluster", "-o", "json")
	var view ClusterView
	if code != ExitOK || json.Unmarshal([]byte(out), &view) != nil || len(view.InstanceID) != 36 {
		t.Fatalf("initnewcluster: exit %d, %q, %q", code, out, errOut)
	}
	code, out, _ = shell("whatisinstanceid")
	if code != ExitOK || !strings.Contains(out, view.InstanceID) {
		t.Fatalf("whatisinstanceid: exit %d, %q", code, out)
	}
	if code, _, errOut = shell("initnewcluster"); code != ExitFail || !strings.Contains(errOut, "already exists") {
		t.Fatalf("second initnewcluster: exit %d, %q", code, errOut)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := metadata.Open(ctx, uri, metadata.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	id, _, err := d.CreateLedger(ctx, goldenLedger())
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.OpenSession(ctx, metadata.SessionOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterBookie(ctx, "127.0.0.1:3181", false); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut = shell("listbookies"); code != ExitOK || !strings.Contains(out, "127.0.0.1:3181") {
		t.Fatalf("listbookies: exit %d, %q, %q", code, out, errOut)
	}
	if code, out, errOut = shell("listledgers", "-o", "json"); code != ExitOK || !strings.Contains(out, fmt.Sprint(id)) {
		t.Fatalf("listledgers: exit %d, %q, %q", code, out, errOut)
	}
	if code, out, errOut = shell("ledgermetadata", fmt.Sprint(id)); code != ExitOK || !strings.Contains(out, "CLOSED") {
		t.Fatalf("ledgermetadata: exit %d, %q, %q", code, out, errOut)
	}
	if code, out, errOut = shell("lostbookierecoverydelay", "--set", "30s"); code != ExitOK {
		t.Fatalf("lostbookierecoverydelay --set: exit %d, %q, %q", code, out, errOut)
	}
	if code, out, errOut = shell("listunderreplicated"); code != ExitOK {
		t.Fatalf("listunderreplicated: exit %d, %q, %q", code, out, errOut)
	}
	if code, _, errOut = shell("metaformat", "--force"); code != ExitFail || !strings.Contains(errOut, "127.0.0.1:3181") {
		t.Fatalf("metaformat --force with a registered bookie: exit %d, %q", code, errOut)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = shell("metaformat", "--force", "-o", "json")
	var formatted ClusterView
	if code != ExitOK || json.Unmarshal([]byte(out), &formatted) != nil || formatted.InstanceID == view.InstanceID {
		t.Fatalf("metaformat --force: exit %d, %q, %q", code, out, errOut)
	}
	if _, _, err := d.ReadLedger(ctx, id); err == nil {
		t.Fatal("the ledger survived metaformat")
	}

	code, _, errOut = run(t, nil, "shell", "--metadata-service-uri", "zk+ms://"+srv.Addr()+"/ledgers", "listbookies")
	if code == ExitOK || !strings.Contains(errOut, "zk+ms") {
		t.Fatalf("zk+ms://: exit %d, %q", code, errOut)
	}
}
