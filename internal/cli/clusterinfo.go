package cli

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/foliodb/folio/internal/metadata"
)

// clusterinfo and queryautorecoverystatus (BookKeeper's).

func init() {
	shellSubcommands = append(shellSubcommands, newClusterInfoCommand, newQueryAutoRecoveryStatusCommand)
}

// ClusterInfoView is BookKeeper's ClusterInfo, with its JSON field names.
// totalBookiesCount counts the bookies with a cookie (every bookie added
// and not decommissioned: ZooKeeper's getAllBookies); unavailable ones are
// those of them registered neither writable nor read-only.
type ClusterInfoView struct {
	AuditorElected           bool   `json:"auditorElected"`
	AuditorID                string `json:"auditorId"`
	ClusterUnderReplicated   bool   `json:"clusterUnderReplicated"`
	LedgerReplicationEnabled bool   `json:"ledgerReplicationEnabled"`
	TotalBookiesCount        int    `json:"totalBookiesCount"`
	WritableBookiesCount     int    `json:"writableBookiesCount"`
	ReadonlyBookiesCount     int    `json:"readonlyBookiesCount"`
	UnavailableBookiesCount  int    `json:"unavailableBookiesCount"`
}

func newClusterInfoCommand(o *ShellOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "clusterinfo",
		Short: "Summarise the cluster: bookies, auditor, under-replication",
		Long: "Print BookKeeper's cluster info: whether an auditor is elected and which, whether\n" +
			"any ledger is marked under-replicated, whether re-replication is enabled, and\n" +
			"how many bookies there are (those with a cookie), writable, read-only and\n" +
			"unavailable (with a cookie but not registered). -o json prints BookKeeper's\n" +
			"JSON fields.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			d, ar, err := openAutoRecovery(ctx, o)
			if err != nil {
				return err
			}
			defer d.Close()
			var v ClusterInfoView
			switch auditor, err := ar.Auditor(ctx); {
			case err == nil:
				v.AuditorElected, v.AuditorID = true, string(auditor)
			case !errors.Is(err, metadata.ErrNotFound):
				return fmt.Errorf("reading the auditor: %w", err)
			}
			urs, err := ar.ListUnderReplicatedLedgers(ctx, 0, 1)
			if err != nil {
				return fmt.Errorf("listing under-replicated ledgers: %w", err)
			}
			v.ClusterUnderReplicated = len(urs) > 0
			if v.LedgerReplicationEnabled, err = ar.ReplicationEnabled(ctx); err != nil {
				return fmt.Errorf("reading the replication switch: %w", err)
			}
			all, err := d.ListCookies(ctx)
			if err != nil {
				return fmt.Errorf("listing the bookies' cookies: %w", err)
			}
			w, err := d.WritableBookies(ctx)
			if err != nil {
				return fmt.Errorf("listing writable bookies: %w", err)
			}
			r, err := d.ReadOnlyBookies(ctx)
			if err != nil {
				return fmt.Errorf("listing read-only bookies: %w", err)
			}
			v.TotalBookiesCount, v.WritableBookiesCount, v.ReadonlyBookiesCount = len(all), len(w), len(r)
			v.UnavailableBookiesCount = max(0, v.TotalBookiesCount-v.WritableBookiesCount-v.ReadonlyBookiesCount)
			return o.Printer(cmd).Print(v, func(w io.Writer) error {
				t := Table{}
				auditor := "(none elected)"
				if v.AuditorElected {
					auditor = v.AuditorID
				}
				t.Append("auditor", auditor)
				t.Append("clusterUnderReplicated", v.ClusterUnderReplicated)
				t.Append("ledgerReplicationEnabled", v.LedgerReplicationEnabled)
				t.Append("totalBookiesCount", v.TotalBookiesCount)
				t.Append("writableBookiesCount", v.WritableBookiesCount)
				t.Append("readonlyBookiesCount", v.ReadonlyBookiesCount)
				t.Append("unavailableBookiesCount", v.UnavailableBookiesCount)
				_, err := t.WriteTo(w)
				return err
			})
		},
	}
}

// RecoveringLedgerView is one ledger of `queryautorecoverystatus`: an
// under-replicated ledger a replication worker holds now.
type RecoveringLedgerView struct {
	LedgerID int64  `json:"ledgerId"`
	BookieID string `json:"bookieId"`
	// LedgerSize is the ledger's length in bytes (with --verbose).
	LedgerSize *int64 `json:"ledgerSize,omitempty"`
}

func newQueryAutoRecoveryStatusCommand(o *ShellOptions) *cobra.Command {
	var verbose bool
	cmd := &cobra.Command{
		Use:   "queryautorecoverystatus",
		Short: "List the under-replicated ledgers being re-replicated now, and by whom",
		Long: "List the under-replicated ledgers a replication worker holds the lock of, with\n" +
			"the worker's id, as BookKeeper's queryautorecoverystatus does; --verbose adds\n" +
			"each ledger's size. An empty list means no ledger is being recovered.",
		Args:        cobra.NoArgs,
		Annotations: map[string]string{bkFlagsAnnotation: "-verbose=--verbose"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			d, ar, err := openAutoRecovery(ctx, o)
			if err != nil {
				return err
			}
			defer d.Close()
			rw, ok := d.(metadata.ReplicationWorkerReader)
			if !ok {
				return fmt.Errorf("queryautorecoverystatus: %w", metadata.ErrNotSupported)
			}
			rows := []RecoveringLedgerView{}
			for start := int64(0); ; {
				page, err := ar.ListUnderReplicatedLedgers(ctx, start, listLedgersPage)
				if err != nil {
					return fmt.Errorf("listing under-replicated ledgers: %w", err)
				}
				if len(page) == 0 {
					break
				}
				for _, r := range page {
					worker, err := rw.ReplicationWorker(ctx, r.LedgerID)
					if errors.Is(err, metadata.ErrNotFound) {
						continue
					}
					if err != nil {
						return fmt.Errorf("reading the lock of ledger %d: %w", r.LedgerID, err)
					}
					row := RecoveringLedgerView{LedgerID: r.LedgerID, BookieID: string(worker)}
					if verbose {
						m, _, err := d.ReadLedger(ctx, r.LedgerID)
						switch {
						case errors.Is(err, metadata.ErrNoSuchLedger):
						case err != nil:
							return fmt.Errorf("reading ledger %d: %w", r.LedgerID, err)
						default:
							size := m.Length
							row.LedgerSize = &size
						}
					}
					rows = append(rows, row)
				}
				start = page[len(page)-1].LedgerID + 1
			}
			return o.Printer(cmd).Print(rows, func(w io.Writer) error {
				if len(rows) == 0 {
					_, err := fmt.Fprintln(w, "no ledger is being recovered")
					return err
				}
				t := Table{Headers: []string{"LEDGER", "WORKER"}}
				if verbose {
					t.Headers = append(t.Headers, "SIZE")
				}
				for _, r := range rows {
					cells := []any{r.LedgerID, r.BookieID}
					if verbose {
						size := "(deleted)"
						if r.LedgerSize != nil {
							size = strconv.FormatInt(*r.LedgerSize, 10)
						}
						cells = append(cells, size)
					}
					t.Append(cells...)
				}
				_, err := t.WriteTo(w)
				return err
			})
		},
	}
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "also print each ledger's size")
	return cmd
}
