package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/spf13/cobra"

	"github.com/foliodb/folio/internal/bookie/server"
	"github.com/foliodb/folio/internal/digest"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/storage/ledgerstore"
)

// The commands of this file work on one bookie's directories, named by its
// configuration (--conf, --set), as BookKeeper's local commands do.

func init() {
	shellSubcommands = append(shellSubcommands, newLastMarkCommand, newLocalConsistencyCheckCommand,
		newRebuildIndexCommand, newInitBookieCommand)
}

// loadStorage loads the bookie configuration and its storage layout.
func (f *bookieFlags) loadStorage(cmd *cobra.Command, o *ShellOptions) (server.Config, ledgerstore.Config, error) {
	cfg, err := f.load(o.env, slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelError})))
	if err != nil {
		return cfg, ledgerstore.Config{}, err
	}
	sc, err := server.StorageConfig(&cfg)
	if err != nil {
		return cfg, sc, WithHint(err, "fix the configuration file or the overrides")
	}
	return cfg, sc, nil
}

// inUseHint explains ErrInUse.
func inUseHint(err error) error {
	if errors.Is(err, ledgerstore.ErrInUse) {
		return WithHint(err, "stop the bookie first; this command needs its directories to itself")
	}
	return err
}

// LastMarkView is one journal's last log mark as lastmark prints it.
type LastMarkView struct {
	JournalDir string `json:"journalDir"`
	// FileID and File name the journal file, Offset the byte offset in it:
	// every record before it is in the entry logs and indexes.
	FileID       uint64 `json:"fileId"`
	File         string `json:"file"`
	Offset       int64  `json:"offset"`
	Checkpointed bool   `json:"checkpointed"`
}

func newLastMarkCommand(o *ShellOptions) *cobra.Command {
	var f bookieFlags
	cmd := &cobra.Command{
		Use:   "lastmark --conf FILE",
		Short: "Print each journal's last log mark",
		Long: "Print, for each journal directory of the bookie, its last log mark: the\n" +
			"journal position (file id and offset) up to which every record is in the\n" +
			"entry logs and indexes, so that a restart replays only what follows (Folio's\n" +
			"CHECKPOINT). Printed as BookKeeper does:\n" +
			"  LastLogMark : Journal Id - 5(0000000000000005.jnl), Pos - 1234\n" +
			"A journal without a checkpoint (a new bookie) prints Journal Id - 0, Pos - 0.\n" +
			"Read only; it may run while the bookie runs.\n" +
			"With -o json: [{\"journalDir\", \"fileId\", \"file\", \"offset\", \"checkpointed\"}, ...].",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, sc, err := f.loadStorage(cmd, o)
			if err != nil {
				return err
			}
			marks, err := ledgerstore.LastMarks(vfs.Default, sc)
			if err != nil {
				return err
			}
			rows := []LastMarkView{}
			for _, m := range marks {
				v := LastMarkView{JournalDir: m.JournalDir, FileID: m.Position.File, Offset: m.Position.Offset, Checkpointed: m.Checkpointed}
				v.File = fmt.Sprintf("%016x.jnl", m.Position.File)
				rows = append(rows, v)
			}
			return o.Printer(cmd).Print(rows, func(w io.Writer) error {
				for _, r := range rows {
					if _, err := fmt.Fprintf(w, "LastLogMark : Journal Id - %d(%s), Pos - %d  (%s)\n", r.FileID, r.File, r.Offset, r.JournalDir); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	f.register(cmd)
	return cmd
}

// ConsistencyView is what localconsistencycheck prints.
type ConsistencyView struct {
	OK       bool          `json:"ok"`
	Ledgers  int64         `json:"ledgers"`
	Entries  int64         `json:"entries"`
	Problems []ProblemView `json:"problems"`
}

// ProblemView is one inconsistency: the entry, where the index says it is,
// and what is wrong there. EntryID -1 concerns the ledger or directory.
type ProblemView struct {
	LedgerDir string `json:"ledgerDir"`
	LedgerID  int64  `json:"ledgerId"`
	EntryID   int64  `json:"entryId"`
	LogID     uint64 `json:"logId"`
	Offset    int64  `json:"offset"`
	Size      uint32 `json:"size"`
	Reason    string `json:"reason"`
}

func newLocalConsistencyCheckCommand(o *ShellOptions) *cobra.Command {
	var f bookieFlags
	cmd := &cobra.Command{
		Use:   "localconsistencycheck --conf FILE",
		Short: "Check that every indexed entry is readable from the entry logs",
		Long: "BookKeeper's localconsistencycheck on a stopped bookie: for every entry in\n" +
			"each ledger directory's index, read the record at its location in the entry\n" +
			"logs and verify it (same ledger and entry, indexed size, checksum). Each\n" +
			"problem is reported with ledger, entry and location (log id, offset, size);\n" +
			"an index missing next to entry logs is one too. Exit code 1 if any.\n" +
			"Nothing is changed. Refuses while the bookie runs (its journal directories\n" +
			"are locked).\n" +
			"With -o json: {\"ok\", \"ledgers\", \"entries\", \"problems\": [{\"ledgerDir\", \"ledgerId\",\n" +
			"\"entryId\", \"logId\", \"offset\", \"size\", \"reason\"}, ...]}.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, sc, err := f.loadStorage(cmd, o)
			if err != nil {
				return err
			}
			res, err := ledgerstore.CheckConsistency(vfs.Default, sc)
			if err != nil {
				return inUseHint(err)
			}
			v := ConsistencyView{OK: len(res.Problems) == 0, Ledgers: res.Ledgers, Entries: res.Entries, Problems: []ProblemView{}}
			for _, p := range res.Problems {
				v.Problems = append(v.Problems, ProblemView{LedgerDir: p.LedgerDir, LedgerID: p.LedgerID, EntryID: p.EntryID,
					LogID: p.Location.LogID, Offset: p.Location.Offset, Size: p.Location.Size, Reason: p.Reason})
			}
			err = o.Printer(cmd).Print(v, func(w io.Writer) error {
				if len(v.Problems) > 0 {
					t := Table{Headers: []string{"LEDGER ID", "ENTRY ID", "LOG ID", "OFFSET", "SIZE", "PROBLEM"}}
					for _, p := range v.Problems {
						t.Append(p.LedgerID, p.EntryID, p.LogID, p.Offset, p.Size, p.Reason)
					}
					if _, err := t.WriteTo(w); err != nil {
						return err
					}
				}
				_, err := fmt.Fprintf(w, "checked %d entries of %d ledgers: %d problems\n", v.Entries, v.Ledgers, len(v.Problems))
				return err
			})
			if err == nil && len(v.Problems) > 0 {
				err = WithHint(fmt.Errorf("local consistency check found %d problems", len(v.Problems)),
					"keep copies of the named entry logs; let AutoRecovery re-replicate the affected ledgers from their other bookies (`folio shell recover`), or rebuild a lost index with `folio shell rebuild-index`")
			}
			return err
		},
	}
	f.register(cmd)
	return cmd
}

// RebuildView is what rebuild-index prints.
type RebuildView struct {
	Rebuilt []RebuiltDirView `json:"rebuilt"`
	Skipped []string         `json:"skipped"`
	Damage  []DamageView     `json:"damage"`
}

// RebuiltDirView is one rebuilt ledger directory.
type RebuiltDirView struct {
	LedgerDir       string `json:"ledgerDir"`
	Why             string `json:"why"`
	LogsScanned     int    `json:"logsScanned"`
	Ledgers         int64  `json:"ledgers"`
	Entries         int64  `json:"entries"`
	StatesKept      int64  `json:"statesKept"`
	KeysFromJournal int64  `json:"keysFromJournal"`
	// KeysFromMetadata: master keys derived from the ledgers' metadata.
	KeysFromMetadata int64  `json:"keysFromMetadata"`
	UnknownKeys      int64  `json:"unknownKeys"`
	FencedForSafety  int64  `json:"fencedForSafety"`
	OldIndex         string `json:"oldIndex,omitempty"`
}

// DamageView is one entry log that does not verify to its end.
type DamageView struct {
	File      string `json:"file"`
	Offset    int64  `json:"offset"`
	Remaining int64  `json:"remaining"`
	Reason    string `json:"reason"`
	TornTail  bool   `json:"tornTail"`
}

func newRebuildIndexCommand(o *ShellOptions) *cobra.Command {
	var f bookieFlags
	var all, acceptDamage, keysFromMetadata, acceptLostFences bool
	cmd := &cobra.Command{
		Use:     "rebuild-index --conf FILE",
		Aliases: []string{"rebuild-db-ledger-locations-index"},
		Short:   "Rebuild a stopped bookie's lost or corrupt index from its entry logs",
		Long: "Rebuild the index of a stopped bookie (entry locations and ledger states) from\n" +
			"its entry logs, for a bookie that refuses to start because an index is\n" +
			"missing, or whose index is corrupt. Only the ledger directories whose index\n" +
			"is missing, does not open, is unstamped or holds a value that does not decode\n" +
			"are rebuilt (--all: every one). Every record of every entry log is indexed;\n" +
			"each ledger keeps the master key, fence bit and explicit LAC that the old\n" +
			"index or the journals still hold; a master key found in neither is derived\n" +
			"from the password in the ledger's metadata (the configuration's metadata\n" +
			"store). Every ledger whose ensembles include this bookie and that has no\n" +
			"state otherwise (no entries here: striping, or fenced before any entry\n" +
			"arrived) is marked fenced, since it may have been fenced here. Without the\n" +
			"metadata store (--master-keys-from-metadata=false) a missing or incomplete\n" +
			"index is rebuilt only with --accept-lost-fences, accepting that such ledgers\n" +
			"lose their fence. The old index is kept as index.replaced-N; a rebuild\n" +
			"interrupted while swapping the indexes is finished by the next run (the\n" +
			"bookie refuses to start until then).\n" +
			"The bookie then starts and replays its journals as after any stop.\n" +
			"What cannot be recovered: fence bits and explicit LACs of ledgers found in\n" +
			"neither (such ledgers are marked fenced, which refuses a late add that might\n" +
			"have been fenced); the master key of a ledger whose metadata has no password\n" +
			"(adds to it are refused as unauthorised); the marker of a ledger deleted while fenced whose\n" +
			"records are all gone. Without a readable old index, ledgers deleted but not\n" +
			"yet garbage-collected come back until the bookie's GC finds their metadata\n" +
			"gone. An entry log damaged before its end is reported and refuses the\n" +
			"rebuild, changing nothing. Not damage: the torn tail a crash leaves in the\n" +
			"log being written, i.e. bytes that do not verify followed by nothing\n" +
			"verifiable, or followed only by records of entries the journals hold after\n" +
			"their checkpoint (replay writes them again). --accept-damage rebuilds\n" +
			"anyway, and the entries after the damage are then not served: re-replicate\n" +
			"them from other bookies.\n" +
			"Refuses while the bookie runs (its journal directories are locked).\n" +
			"With -o json: {\"rebuilt\": [{\"ledgerDir\", \"why\", \"logsScanned\", \"ledgers\", \"entries\",\n" +
			"\"statesKept\", \"keysFromJournal\", \"keysFromMetadata\", \"unknownKeys\", \"fencedForSafety\", \"oldIndex\"?}],\n" +
			"\"skipped\": [dir, ...], \"damage\": [{\"file\", \"offset\", \"remaining\", \"reason\", \"tornTail\"}]}.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, sc, err := f.loadStorage(cmd, o)
			if err != nil {
				return err
			}
			ro := ledgerstore.RebuildOptions{All: all, AcceptDamage: acceptDamage, AcceptLostFences: acceptLostFences}
			if keysFromMetadata {
				keys := &metadataKeys{cmd: cmd, o: o, cfg: &cfg}
				defer keys.close()
				ro.MasterKey = keys.masterKey
				ro.EnsembleLedgers = keys.ensembleLedgers
			}
			rep, err := ledgerstore.RebuildIndex(vfs.Default, sc, ro)
			if errors.Is(err, ledgerstore.ErrFencesUnknown) {
				return WithHint(err, "let the rebuild read the metadata store (--master-keys-from-metadata, the default), which "+
					"lists the ledgers whose ensembles include this bookie; or give --accept-lost-fences to accept that "+
					"a ledger fenced here without entries here may accept a late add from its old writer")
			}
			var de *ledgerstore.DamageError
			if errors.As(err, &de) {
				return WithHint(err, "keep copies of the damaged entry logs; if the other bookies hold the ledgers, rebuild with --accept-damage "+
					"and let AutoRecovery re-replicate them, or reset the bookie with `folio shell bookieformat`")
			}
			if err != nil {
				return inUseHint(err)
			}
			v := RebuildView{Rebuilt: []RebuiltDirView{}, Skipped: rep.Skipped, Damage: []DamageView{}}
			if v.Skipped == nil {
				v.Skipped = []string{}
			}
			for _, d := range rep.Rebuilt {
				v.Rebuilt = append(v.Rebuilt, RebuiltDirView{LedgerDir: d.Dir, Why: d.Why, LogsScanned: d.LogsScanned, Ledgers: d.Ledgers,
					Entries: d.Entries, StatesKept: d.StatesKept, KeysFromJournal: d.KeysFromJournal, UnknownKeys: d.UnknownKeys,
					KeysFromMetadata: d.KeysFromCallback, FencedForSafety: d.FencedForSafety, OldIndex: d.OldIndex})
			}
			for _, d := range rep.Damage {
				v.Damage = append(v.Damage, DamageView{File: d.File, Offset: d.Offset, Remaining: d.Remaining, Reason: d.Reason, TornTail: d.TornTail})
			}
			return o.Printer(cmd).Print(v, func(w io.Writer) error {
				for _, d := range v.Rebuilt {
					fmt.Fprintf(w, "rebuilt %s (%s): %d entries of %d ledgers from %d entry logs; states kept %d; "+
						"master keys from the journals %d, from the metadata %d, unknown %d; fenced for safety %d\n",
						d.LedgerDir, d.Why, d.Entries, d.Ledgers, d.LogsScanned, d.StatesKept, d.KeysFromJournal, d.KeysFromMetadata, d.UnknownKeys, d.FencedForSafety)
					if d.OldIndex != "" {
						fmt.Fprintf(w, "  the old index is kept in %s\n", d.OldIndex)
					}
				}
				for _, s := range v.Skipped {
					fmt.Fprintf(w, "kept %s: its index is sound\n", s)
				}
				for _, d := range v.Damage {
					kind := "DAMAGED"
					if d.TornTail {
						kind = "torn tail (harmless)"
					}
					fmt.Fprintf(w, "%s: %s at offset %d: %s\n", kind, d.File, d.Offset, d.Reason)
				}
				return nil
			})
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "rebuild every ledger directory's index, sound ones included")
	cmd.Flags().BoolVar(&acceptDamage, "accept-damage", false, "rebuild even though an entry log is damaged before its end")
	cmd.Flags().BoolVar(&keysFromMetadata, "master-keys-from-metadata", true, "derive master keys lost with the index from the ledgers' metadata, and fence the ledgers whose ensembles include this bookie")
	cmd.Flags().BoolVar(&acceptLostFences, "accept-lost-fences", false, "without the metadata store, rebuild a missing or incomplete index although ledgers fenced here without entries here lose their fence")
	return cmd
}

// metadataKeys derives lost master keys from the ledgers' metadata,
// opening the bookie's metadata store on first use.
type metadataKeys struct {
	cmd *cobra.Command
	o   *ShellOptions
	cfg *server.Config
	d   metadata.Driver
}

// driver opens the metadata store on first use.
func (k *metadataKeys) driver() (metadata.Driver, error) {
	if k.d == nil {
		d, err := openBookieMetadata(k.cmd.Context(), k.cmd, k.o, k.cfg)
		if err != nil {
			return nil, WithHint(err, "to rebuild without the metadata store, give --master-keys-from-metadata=false "+
				"and --accept-lost-fences (ledgers whose master key is lost then refuse adds as unauthorised, and ledgers "+
				"fenced on this bookie without entries here lose their fence)")
		}
		k.d = d
	}
	return k.d, nil
}

// ensembleLedgers lists every ledger whose metadata names this bookie in
// one of its ensembles: the ledgers this bookie may have fenced, entries
// here or not (ledgerstore.RebuildOptions.EnsembleLedgers).
func (k *metadataKeys) ensembleLedgers() ([]int64, error) {
	ctx := k.cmd.Context()
	d, err := k.driver()
	if err != nil {
		return nil, err
	}
	self, err := k.cfg.BookieID(k.cfg.BookiePort)
	if err != nil {
		return nil, fmt.Errorf("this bookie's id: %w", err)
	}
	var out []int64
	for start := int64(0); ; {
		ids, err := d.ListLedgers(ctx, start, 1000)
		if err != nil {
			return nil, fmt.Errorf("listing the ledgers: %w", err)
		}
		if len(ids) == 0 {
			return out, nil
		}
		for _, id := range ids {
			m, _, err := d.ReadLedger(ctx, id)
			switch {
			case errors.Is(err, metadata.ErrNoSuchLedger):
				continue // deleted meanwhile
			case err != nil:
				return nil, fmt.Errorf("reading the metadata of ledger %d: %w", id, err)
			}
			if inEnsembles(m, self) {
				out = append(out, id)
			}
		}
		start = ids[len(ids)-1] + 1
	}
}

// inEnsembles reports whether bookie id is in any segment of m.
func inEnsembles(m *metadata.LedgerMetadata, id metadata.BookieID) bool {
	for _, seg := range m.Ensembles {
		if slices.Contains(seg.Ensemble, id) {
			return true
		}
	}
	return false
}

func (k *metadataKeys) masterKey(id int64) ([]byte, bool, error) {
	ctx := k.cmd.Context()
	d, err := k.driver()
	if err != nil {
		return nil, false, err
	}
	m, _, err := d.ReadLedger(ctx, id)
	switch {
	case errors.Is(err, metadata.ErrNoSuchLedger):
		return nil, false, nil // deleted: the bookie's GC will drop it
	case err != nil:
		return nil, false, fmt.Errorf("reading the metadata of ledger %d: %w", id, err)
	case !m.HasPassword:
		return nil, false, nil
	}
	key := digest.MasterKey(m.Password)
	return key[:], true, nil
}

func (k *metadataKeys) close() {
	if k.d != nil {
		k.d.Close()
	}
}

func newInitBookieCommand(o *ShellOptions) *cobra.Command {
	var f bookieFlags
	cmd := &cobra.Command{
		Use:   "initbookie --conf FILE",
		Short: "Initialise a new bookie: check its directories and write its cookies",
		Long: "BookKeeper's initbookie: for a bookie that has never run, check that the\n" +
			"cluster exists, that the metadata store holds no cookie for the bookie and\n" +
			"that its journal, ledger and index directories hold no data, then write its\n" +
			"cookie to every directory (current/VERSION) and to the metadata store, as\n" +
			"the bookie's first start does. Refuses (exit 1, nothing written) if any\n" +
			"check fails. The metadata store is the configuration's metadataServiceUri\n" +
			"unless --metadata-service-uri is given.\n" +
			"With -o json: {\"bookieId\", \"instanceId\", \"directories\": [...]}.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelError}))
			cfg, err := f.load(o.env, log)
			if err != nil {
				return err
			}
			id, err := cfg.BookieID(cfg.BookiePort)
			if err != nil {
				return WithHint(err, "the bookie id comes from advertisedAddress and bookiePort in the configuration")
			}
			ctx := cmd.Context()
			d, err := openBookieMetadata(cmd.Context(), cmd, o, &cfg)
			if err != nil {
				return err
			}
			defer d.Close()
			if _, _, err := d.ReadCookie(ctx, id); err == nil {
				return WithHint(fmt.Errorf("bookie %s already has a cookie in the metadata store: it was initialised before", id),
					"to start it afresh, reset it with `folio shell bookieformat --force` (deletes its data)")
			} else if !errors.Is(err, metadata.ErrNoSuchCookie) {
				return fmt.Errorf("reading the cookie of %s: %w", id, err)
			}
			created, err := server.CheckCookies(ctx, d, &cfg, id)
			if err != nil {
				return cookieHint(fmt.Errorf("initialising bookie %s: %w", id, err))
			}
			if !created {
				return fmt.Errorf("bookie %s was initialised concurrently", id)
			}
			instance, err := d.ReadInstanceID(ctx)
			if err != nil {
				return err
			}
			type view struct {
				BookieID    string   `json:"bookieId"`
				InstanceID  string   `json:"instanceId"`
				Directories []string `json:"directories"`
			}
			v := view{BookieID: string(id), InstanceID: instance, Directories: cfg.AllDirs()}
			return o.Printer(cmd).Print(v, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "initialised bookie %s in cluster %s: cookies written to %d directories and the metadata store\n", id, instance, len(v.Directories))
				return err
			})
		},
	}
	f.register(cmd)
	return cmd
}
