package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/metadata"
)

func TestAutoRecoveryShellCommands(t *testing.T) {
	uri, d := memoryStore(t)
	ar := d.(metadata.AutoRecoveryDriver)
	ctx := context.Background()
	env := map[string]string{MetadataURIEnv: uri}
	sh := func(args ...string) (int, string, string) {
		return run(t, env, append([]string{"shell"}, args...)...)
	}

	if code, out, _ := sh("listunderreplicated"); code != 0 || !strings.Contains(out, "no under-replicated ledgers") {
		t.Fatalf("empty list: %d %q", code, out)
	}
	if err := ar.MarkLedgerUnderReplicated(ctx, 7, []metadata.BookieID{"127.0.0.1:3182"}); err != nil {
		t.Fatal(err)
	}
	if err := ar.MarkLedgerUnderReplicated(ctx, 9, []metadata.BookieID{"127.0.0.1:3183"}); err != nil {
		t.Fatal(err)
	}
	code, out, _ := sh("listunderreplicated", "-o", "json", "--missingreplica", "127.0.0.1:3182")
	var rows []UnderReplicatedRow
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 || rows[0].LedgerID != 7 || rows[0].MissingReplicas[0] != "127.0.0.1:3182" {
		t.Fatalf("listunderreplicated: %d %q", code, out)
	}
	if code, out, _ := sh("listunderreplicated"); code != 0 || !strings.Contains(out, "127.0.0.1:3183") {
		t.Fatalf("listunderreplicated text: %d %q", code, out)
	}

	if code, _, errOut := sh("whoisauditor"); code != 1 || !strings.Contains(errOut, "no auditor") {
		t.Fatalf("whoisauditor without one: %d %q", code, errOut)
	}
	s, err := d.OpenSession(ctx, metadata.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if _, err := ar.CampaignAuditor(ctx, s, "10.0.0.1:3181"); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := sh("whoisauditor"); code != 0 || !strings.Contains(out, "10.0.0.1:3181") {
		t.Fatalf("whoisauditor: %d %q", code, out)
	}

	if code, out, _ := sh("lostbookierecoverydelay"); code != 0 || !strings.Contains(out, "not set") {
		t.Fatalf("delay unset: %d %q", code, out)
	}
	if code, out, _ := sh("lostbookierecoverydelay", "--set", "60s"); code != 0 || !strings.Contains(out, "1m0s") {
		t.Fatalf("delay set: %d %q", code, out)
	}
	if v, err := ar.LostBookieRecoveryDelay(ctx); err != nil || v != time.Minute {
		t.Fatalf("stored delay %v, %v", v, err)
	}
	if code, _, _ := sh("lostbookierecoverydelay", "--set", "-1s"); code != 2 {
		t.Fatalf("negative delay: exit %d, want 2", code)
	}

	if code, out, _ := sh("triggeraudit"); code != 0 || !strings.Contains(out, "audit triggered") {
		t.Fatalf("triggeraudit: %d %q", code, out)
	}
	if code, out, _ := sh("autorecovery", "--disable"); code != 0 || !strings.Contains(out, "disabled") {
		t.Fatalf("disable: %d %q", code, out)
	}
	if on, _ := ar.ReplicationEnabled(ctx); on {
		t.Fatal("still enabled")
	}
	if code, _, errOut := sh("triggeraudit"); code != 1 || !strings.Contains(errOut, "disabled") {
		t.Fatalf("triggeraudit while disabled: %d %q", code, errOut)
	}
	if code, out, _ := sh("autorecovery", "--enable", "-o", "json"); code != 0 || !strings.Contains(out, `"enabled": true`) {
		t.Fatalf("enable: %d %q", code, out)
	}
	if code, _, _ := sh("autorecovery", "--enable", "--disable"); code != 2 {
		t.Fatalf("both flags: exit %d, want 2", code)
	}
}

func TestAutoRecoveryDaemonRequiresID(t *testing.T) {
	cmd := newAutoRecoveryDaemonCommand(Env{Getenv: func(string) string { return "" }})
	cmd.SetArgs([]string{"--metadata-service-uri", "memory://x/ledgers"})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	if err := cmd.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), "--id") {
		t.Fatalf("daemon without --id: %v", err)
	}
}
