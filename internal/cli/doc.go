// Package cli is the `folio` command tree: cobra wiring and output formatting
// only. Every operation it offers lives in a package below it (admin, client,
// metadata, bookie, standalone); nothing imports cli.
//
// Conventions of every `folio shell` command (DESIGN.md §1):
//   - the metadata store comes from --metadata-service-uri, else the
//     FOLIO_METADATA_SERVICE_URI environment variable, else
//     etcd://127.0.0.1:2379/ledgers; its TLS and user from
//     --metadata-tls-ca/--metadata-tls-cert/--metadata-tls-key,
//     --metadata-user and --metadata-password-file, else the
//     FOLIO_METADATA_SERVICE_* variables of the same bookie keys
//     (metadatasec.go);
//   - results print as human tables by default and as JSON with -o json
//     (ledger and entry ids as exact integers, never floats or strings);
//   - exit code 0 on success, 1 when the operation failed, 2 on a usage error;
//   - errors are one line that says what failed, optionally followed by a
//     hint that says what to do; never a stack trace.
package cli
