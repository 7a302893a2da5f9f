package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/foliodb/folio/internal/metadata"
)

func init() {
	shellSubcommands = append(shellSubcommands, newInitNewClusterCommand, newMetaFormatCommand, newWhatIsInstanceIDCommand)
}

// ClusterView is what `initnewcluster` and `metaformat` print.
type ClusterView struct {
	MetadataServiceURI string `json:"metadataServiceUri"`
	InstanceID         string `json:"instanceId"`
}

func (v ClusterView) print(cmd *cobra.Command, o *ShellOptions, verb string) error {
	return o.Printer(cmd).Print(v, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "%s cluster %s\ninstanceId  %s\n", verb, v.MetadataServiceURI, v.InstanceID)
		return err
	})
}

func newInitNewClusterCommand(o *ShellOptions) *cobra.Command {
	var ifAbsent bool
	cmd := &cobra.Command{
		Use:   "initnewcluster",
		Short: "Initialise a new cluster in the metadata store",
		Long: "Write the cluster layout, a new instance id and the empty placeholder keys\n" +
			"into the metadata store, in one atomic step. Fails if a cluster already\n" +
			"exists there, as BookKeeper's initnewcluster does; use metaformat --force\n" +
			"to wipe one. With --if-absent an existing cluster is success (exit 0, its\n" +
			"instance id printed, nothing written): for init jobs that run on every deploy.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			d, err := openMetadata(ctx, o)
			if err != nil {
				return err
			}
			defer d.Close()
			id, err := d.InitNewCluster(ctx)
			switch {
			case errors.Is(err, metadata.ErrClusterExists) && ifAbsent:
				existing, err := d.ReadInstanceID(ctx)
				if err != nil {
					return fmt.Errorf("a cluster exists at %s, but its instance id cannot be read: %w", o.MetadataURI(), err)
				}
				return ClusterView{MetadataServiceURI: o.MetadataURI(), InstanceID: existing}.print(cmd, o, "already initialised")
			case errors.Is(err, metadata.ErrClusterExists):
				return WithHint(fmt.Errorf("a cluster already exists at %s", o.MetadataURI()),
					"to wipe it and start over, stop its bookies and run `folio shell metaformat --force` (this deletes all ledger metadata)")
			case err != nil:
				return fmt.Errorf("initialising a cluster at %s: %w", o.MetadataURI(), err)
			}
			return ClusterView{MetadataServiceURI: o.MetadataURI(), InstanceID: id}.print(cmd, o, "initialised")
		},
	}
	cmd.Flags().BoolVar(&ifAbsent, "if-absent", false, "succeed without writing when a cluster already exists")
	return cmd
}

func newWhatIsInstanceIDCommand(o *ShellOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "whatisinstanceid",
		Short: "Print the cluster's instance id",
		Long: "Print the instance id stored in the metadata store (every bookie's cookie\n" +
			"carries it), as BookKeeper's whatisinstanceid does.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			d, err := openMetadata(ctx, o)
			if err != nil {
				return err
			}
			defer d.Close()
			id, err := d.ReadInstanceID(ctx)
			switch {
			case errors.Is(err, metadata.ErrNoCluster):
				return WithHint(fmt.Errorf("no cluster at %s", o.MetadataURI()),
					"run `folio shell initnewcluster` first, or check --metadata-service-uri")
			case err != nil:
				return fmt.Errorf("reading the instance id at %s: %w", o.MetadataURI(), err)
			}
			return o.Printer(cmd).Print(ClusterView{MetadataServiceURI: o.MetadataURI(), InstanceID: id}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "Metadata Service Uri: %s InstanceId: %s\n", o.MetadataURI(), id)
				return err
			})
		},
	}
}

func newMetaFormatCommand(o *ShellOptions) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "metaformat --force",
		Short: "Wipe the cluster's metadata and initialise a new cluster",
		Long: "Delete every key of the cluster in the metadata store (ledger metadata,\n" +
			"cookies, id counters, layout, instance id) and initialise a new, empty\n" +
			"cluster with a new instance id. Existing bookies will refuse to start\n" +
			"afterwards (their cookies name the old instance id).\n" +
			"Without --force it only initialises a store that holds no cluster. It\n" +
			"always refuses while bookies are registered: stop them first.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			d, err := openMetadata(ctx, o)
			if err != nil {
				return err
			}
			defer d.Close()
			id, err := d.Format(ctx, force)
			switch {
			case errors.Is(err, metadata.ErrClusterExists):
				return WithHint(fmt.Errorf("a cluster exists at %s; not formatting it without --force", o.MetadataURI()),
					"run `folio shell metaformat --force` to delete all of its metadata")
			case errors.Is(err, metadata.ErrBookiesRegistered):
				return WithHint(fmt.Errorf("not formatting %s: %w", o.MetadataURI(), err),
					"stop every bookie of the cluster (see `folio shell listbookies`), then run metaformat again")
			case err != nil:
				return fmt.Errorf("formatting %s: %w", o.MetadataURI(), err)
			}
			return ClusterView{MetadataServiceURI: o.MetadataURI(), InstanceID: id}.print(cmd, o, "formatted")
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "wipe an existing cluster")
	nonInteractiveFlag(cmd)
	// BookKeeper's spellings (bkflags.go).
	cmd.Annotations = map[string]string{BKFlagsAnnotation: "-n=--non-interactive,-nonInteractive=--non-interactive,-noninteractive=--non-interactive,-f=--force,-force=--force"}
	return cmd
}
