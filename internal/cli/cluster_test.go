package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/etcd/etcdtest"
)

// TestInitNewClusterAndMetaFormatOnEtcd runs the two commands against a real
// embedded etcd: init, init again (fails, exit 1), format without --force
// (fails), format --force (new instance id, ledgers gone).
func TestInitNewClusterAndMetaFormatOnEtcd(t *testing.T) {
	srv := etcdtest.Start(t)
	uri := etcdtest.URI(srv, "/ledgers")
	shell := func(args ...string) (int, string, string) {
		t.Helper()
		return run(t, nil, append([]string{"shell", "--metadata-service-uri", uri}, args...)...)
	}

	code, out, errOut := shell("whatisinstanceid")
	if code != ExitFail || out != "" || !strings.Contains(errOut, "no cluster") {
		t.Fatalf("whatisinstanceid before initnewcluster: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	code, out, errOut = shell("initnewcluster", "-o", "json")
	if code != ExitOK {
		t.Fatalf("initnewcluster: exit %d: %s", code, errOut)
	}
	var first ClusterView
	if err := json.Unmarshal([]byte(out), &first); err != nil || first.MetadataServiceURI != uri || len(first.InstanceID) != 36 {
		t.Fatalf("initnewcluster -o json: %q (%v)", out, err)
	}

	code, out, errOut = shell("whatisinstanceid")
	if want := "Metadata Service Uri: " + uri + " InstanceId: " + first.InstanceID + "\n"; code != ExitOK || out != want {
		t.Fatalf("whatisinstanceid: exit %d, stdout %q (want %q), stderr %q", code, out, want, errOut)
	}

	code, out, errOut = shell("initnewcluster")
	if code != ExitFail || out != "" || !strings.Contains(errOut, "already exists") || !strings.Contains(errOut, "hint: ") {
		t.Fatalf("second initnewcluster: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// --if-absent: an existing cluster is success, left as it was.
	code, out, errOut = shell("initnewcluster", "--if-absent", "-o", "json")
	var again ClusterView
	if code != ExitOK || json.Unmarshal([]byte(out), &again) != nil || again != first {
		t.Fatalf("initnewcluster --if-absent on an existing cluster: exit %d, stdout %q (want %+v), stderr %q", code, out, first, errOut)
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

	code, _, errOut = shell("metaformat")
	if code != ExitFail || !strings.Contains(errOut, "--force") {
		t.Fatalf("metaformat without --force: exit %d, stderr %q", code, errOut)
	}
	if _, _, err := d.ReadLedger(ctx, id); err != nil {
		t.Fatalf("metaformat without --force changed the store: %v", err)
	}

	// A registered bookie blocks even a forced format.
	s, err := d.OpenSession(ctx, metadata.SessionOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterBookie(ctx, "127.0.0.1:3181", false); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = shell("metaformat", "--force")
	if code != ExitFail || !strings.Contains(errOut, "127.0.0.1:3181") || !strings.Contains(errOut, "stop every bookie") {
		t.Fatalf("metaformat --force with a registered bookie: exit %d, stderr %q", code, errOut)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}

	code, out, errOut = shell("metaformat", "--force")
	if code != ExitOK || !strings.HasPrefix(out, "formatted cluster "+uri+"\ninstanceId  ") {
		t.Fatalf("metaformat --force: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if strings.Contains(out, first.InstanceID) {
		t.Fatal("metaformat kept the instance id")
	}
	if _, _, err := d.ReadLedger(ctx, id); err == nil {
		t.Fatal("ledger survived metaformat --force")
	}

	code, _, errOut = shell("metaformat", "extra")
	if code != ExitUsage {
		t.Fatalf("metaformat extra: exit %d, stderr %q", code, errOut)
	}
}

func TestInitNewClusterUnreachable(t *testing.T) {
	srv := etcdtest.Start(t)
	uri := etcdtest.URI(srv, "/ledgers")
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, nil, "shell", "initnewcluster", "--metadata-service-uri", uri)
	t.Logf("stderr: %s", errOut)
	if code != ExitFail || out != "" || !strings.Contains(errOut, "hint: ") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
