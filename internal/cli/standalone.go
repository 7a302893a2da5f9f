package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/foliodb/folio/internal/autorecovery"
	"github.com/foliodb/folio/internal/bookie/server"
	"github.com/foliodb/folio/internal/pki"
	"github.com/foliodb/folio/internal/standalone"
)

func newStandaloneCommand(env Env) *cobra.Command {
	cfg := standalone.Config{}
	var (
		arOn      bool
		arWorkers int
		lf        logFlags
	)
	cmd := &cobra.Command{
		Use:   "standalone [--bookies N] [--data-dir DIR]",
		Short: "Run a whole local cluster: embedded etcd, N bookies and AutoRecovery",
		Long: "Run a local cluster in one process: an embedded etcd on 127.0.0.1:2379\n" +
			"(scope /ledgers, initialised on first start), bookie i on 127.0.0.1:(3181+i),\n" +
			"AutoRecovery (an auditor candidate and replication workers, id\n" +
			"127.0.0.1:<http port>; --autorecovery=false turns it off) and one admin\n" +
			"HTTP server on 127.0.0.1:8080. A port given as 0 is picked free once and\n" +
			"reused from DIR on restart; a busy port is an error. Once every bookie is\n" +
			"registered it prints one line:\n" +
			"  folio standalone ready: metadata-service-uri=etcd://127.0.0.1:2379/ledgers bookies=...\n" +
			"--bookies 0 runs etcd, HTTP and AutoRecovery only (bookies run elsewhere,\n" +
			"e.g. `folio bookie`); the line then ends with an empty list: \"bookies=\".\n" +
			"--tls-dir TLSDIR secures it: a local CA and certificates are generated in\n" +
			"TLSDIR once (reused on restart); etcd serves only TLS clients with a certificate\n" +
			"of that CA (the URI is etcd+https://...) and the admin HTTP server serves https\n" +
			"to them. Clients use TLSDIR/ca.pem, client.pem and client-key.pem.\n" +
			"Restarting from the same DIR keeps every ledger. SIGTERM or Ctrl-C stops it.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Stdout = cmd.OutOrStdout()
			if err := lf.check(cmd); err != nil {
				return err
			}
			cfg.Logger = lf.logger(cmd.ErrOrStderr(), "", "")
			stderr := cmd.ErrOrStderr()
			cfg.OnReady = func(info standalone.Info) { writeStandaloneScreen(stderr, info) }
			if cfg.Bookies < 0 {
				return Usagef(cmd, "--bookies must be at least 0")
			}
			if arWorkers < 0 {
				return Usagef(cmd, "--autorecovery-workers must be at least 0")
			}
			cfg.AutoRecovery.Disabled = !arOn
			cfg.AutoRecovery.Workers = arWorkers
			if arWorkers == 0 {
				cfg.AutoRecovery.Workers = -1 // the auditor alone
			}
			if err := standalone.Run(cmd.Context(), cfg); err != nil {
				return cookieHint(err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	lf.register(cmd)
	f.IntVar(&cfg.Bookies, "bookies", standalone.DefaultBookies, "number of bookies")
	f.StringVar(&cfg.DataDir, "data-dir", standalone.DefaultDataDir, "directory for etcd's and the bookies' data")
	f.IntVar(&cfg.EtcdClientPort, "etcd-client-port", standalone.DefaultEtcdClientPort, "etcd client port (0: pick a free one, kept in DIR)")
	f.IntVar(&cfg.EtcdPeerPort, "etcd-peer-port", standalone.DefaultEtcdPeerPort, "etcd peer port (0: pick a free one, kept in DIR)")
	f.IntVar(&cfg.BookiePortBase, "bookie-port-base", standalone.DefaultBookiePortBase, "port of bookie 0; bookie i uses base+i (0: free ports, kept in DIR)")
	f.IntVar(&cfg.HTTPPort, "http-port", standalone.DefaultHTTPPort, "admin HTTP port (0: pick a free one, kept in DIR)")
	f.StringArrayVar(&cfg.BookieSet, "bookie-set", nil, "bookie configuration override key=value, applied to every bookie (repeatable)")
	f.BoolVar(&arOn, "autorecovery", true, "run AutoRecovery (auditor and replication workers) in this process; --autorecovery=false to run none")
	f.StringVar(&cfg.TLSDir, "tls-dir", "", "secure the cluster with a local CA kept in this directory (generated once): TLS with client certificates for etcd and the admin HTTP server")
	f.BoolVar(&cfg.HTTPPprof, "http-pprof", false, "serve /debug/pprof on the admin HTTP server")
	f.IntVar(&arWorkers, "autorecovery-workers", 1, "replication workers of the embedded AutoRecovery (0: the auditor alone)")
	f.DurationVar(&cfg.AutoRecovery.LostBookieRecoveryDelay, "lost-bookie-recovery-delay", autorecovery.DefaultLostBookieRecoveryDelay, "AutoRecovery: delay used while none is stored (lostbookierecoverydelay --set stores one)")
	f.DurationVar(&cfg.AutoRecovery.OpenLedgerRereplicationGracePeriod, "open-ledger-rereplication-grace-period", autorecovery.DefaultOpenLedgerRereplicationGracePeriod, "AutoRecovery: how long an open ledger's writer may replace a lost bookie itself before the ledger is fenced")
	return cmd
}

// writeStandaloneScreen prints the first screen of `folio standalone` (on
// stderr: stdout carries the readiness line alone): what runs where and how
// to connect.
func writeStandaloneScreen(w io.Writer, info standalone.Info) {
	var b strings.Builder
	parts := fmt.Sprintf("embedded etcd and %d bookie(s)", len(info.Bookies))
	if info.AutoRecoveryID != "" {
		parts = fmt.Sprintf("embedded etcd, %d bookie(s) and AutoRecovery", len(info.Bookies))
	}
	fmt.Fprintf(&b, "\nFolio standalone is running: %s.\n\n", parts)
	fmt.Fprintf(&b, "  metadata   %s\n", info.MetadataServiceURI)
	fmt.Fprintf(&b, "  etcd       clients %s, peers %s, log %s\n", info.EtcdClientAddr, info.EtcdPeerAddr, info.EtcdLogFile)
	for i, bk := range info.Bookies {
		fmt.Fprintf(&b, "  bookie %-3d %s  journal %s, ledgers %s\n", i, bk.ID, bk.JournalDir, bk.LedgerDir)
	}
	if len(info.Bookies) == 0 {
		tlsSet := ""
		if d := info.TLS; d != nil {
			tlsSet = fmt.Sprintf(" --set %s=%s --set %s=%s --set %s=%s", server.KeyMetadataTLSCAFile, d.CA(),
				server.KeyMetadataTLSCertFile, d.ClientCert(), server.KeyMetadataTLSKeyFile, d.ClientKey())
			for _, kv := range standalone.BookieTLSSettings(*d) {
				tlsSet += " --set " + kv
			}
		}
		fmt.Fprintf(&b, "  bookies    none here (--bookies 0): start them with `folio bookie --set metadataServiceUri=%s%s`\n", info.MetadataServiceURI, tlsSet)
	}
	if info.AutoRecoveryID != "" {
		fmt.Fprintf(&b, "  autorecovery id %s (auditor candidate, %d replication worker(s))\n", info.AutoRecoveryID, info.AutoRecoveryWorkers)
	} else {
		fmt.Fprintf(&b, "  autorecovery off (--autorecovery=false)\n")
	}
	scheme := info.HTTPScheme
	if scheme == "" {
		scheme = "http"
	}
	fmt.Fprintf(&b, "  http       %s://%s  /heartbeat /metrics /api/v1/bookie/{info,state,is_ready,state/readonly,gc,ledger/info,...}?bookie=<id> /api/v1/{ledger,autorecovery}/...\n", scheme, info.HTTPAddr)
	fmt.Fprintf(&b, "  data       %s (ports picked as 0 are kept in ports.json)\n", info.DataDir)
	if d := info.TLS; d != nil {
		fmt.Fprintf(&b, "  tls        %s: CA %s, client certificate %s, key %s\n", d.Path, pki.CAFile, pki.ClientCertFile, pki.ClientKeyFile)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "From the shell:\n")
	fmt.Fprintf(&b, "  export %s='%s'\n", MetadataURIEnv, info.MetadataServiceURI)
	if d := info.TLS; d != nil {
		fmt.Fprintf(&b, "  export %s='%s'\n", server.EnvName(server.KeyMetadataTLSCAFile), d.CA())
		fmt.Fprintf(&b, "  export %s='%s'\n", server.EnvName(server.KeyMetadataTLSCertFile), d.ClientCert())
		fmt.Fprintf(&b, "  export %s='%s'\n", server.EnvName(server.KeyMetadataTLSKeyFile), d.ClientKey())
		fmt.Fprintf(&b, "  export %s='%s'\n", TLSCAEnv, d.CA())
		fmt.Fprintf(&b, "  export %s='%s'\n", TLSCertEnv, d.ClientCert())
		fmt.Fprintf(&b, "  export %s='%s'\n", TLSKeyEnv, d.ClientKey())
		fmt.Fprintf(&b, "  (or the flags --metadata-tls-ca, --metadata-tls-cert, --metadata-tls-key for etcd,\n")
		fmt.Fprintf(&b, "   --tls-ca, --tls-cert, --tls-key for the bookies, which admit only TLS clients with this certificate)\n")
	}
	fmt.Fprintf(&b, "  folio shell listbookies\n  folio shell simpletest --keep\n  folio shell listledgers\n\n")
	if d := info.TLS; d != nil {
		fmt.Fprintf(&b, "The admin HTTP server:\n")
		fmt.Fprintf(&b, "  curl --cacert %s --cert %s --key %s https://%s/heartbeat\n\n", d.CA(), d.ClientCert(), d.ClientKey(), info.HTTPAddr)
	}
	fmt.Fprintf(&b, "From Go (import \"github.com/foliodb/folio/client\"):\n")
	if d := info.TLS; d != nil {
		fmt.Fprintf(&b, "  ca, _ := os.ReadFile(%q)\n", d.CA())
		fmt.Fprintf(&b, "  roots := x509.NewCertPool(); roots.AppendCertsFromPEM(ca)\n")
		fmt.Fprintf(&b, "  cert, _ := tls.LoadX509KeyPair(%q, %q)\n", d.ClientCert(), d.ClientKey())
		fmt.Fprintf(&b, "  c, err := client.New(ctx, client.Config{MetadataServiceURI: %q,\n", info.MetadataServiceURI)
		fmt.Fprintf(&b, "      MetadataTLS: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}},\n")
		fmt.Fprintf(&b, "      TLS:         &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}})\n")
	} else {
		fmt.Fprintf(&b, "  c, err := client.New(ctx, client.Config{MetadataServiceURI: %q})\n", info.MetadataServiceURI)
	}
	fmt.Fprintf(&b, "  w, err := c.CreateLedger(ctx, client.LedgerOptions{Password: []byte(\"secret\")})\n\n")
	fmt.Fprintf(&b, "Ctrl-C or SIGTERM stops it; starting it again from the same data directory keeps every ledger.\n\n")
	io.WriteString(w, b.String())
}
