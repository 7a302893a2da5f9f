package admin_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/foliodb/folio/admin"
	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/client/foliotest"
)

// List the bookies of a cluster with their disk space. The cluster is
// foliotest's in-process one; against a real cluster the URI is its
// metadata store's (etcd://host:2379/ledgers).
func Example() {
	cluster, err := foliotest.New()
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()

	ctx := context.Background()
	a, err := admin.New(ctx, admin.Config{Client: client.Config{MetadataServiceURI: cluster.URI()}})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()

	bookies, err := a.ListBookies(ctx, admin.ListBookiesOptions{DiskInfo: true})
	if err != nil {
		log.Fatal(err)
	}
	for _, b := range bookies {
		// b.ID is host:port; the ports are free ones, so not printed here.
		fmt.Println(b.State, b.Disk.Err == nil && b.Disk.TotalBytes > 0)
	}
	// Output:
	// writable true
	// writable true
	// writable true
}

// Inspect a ledger: what each bookie of each fragment holds, and what a
// recovery would conclude. Nothing is fenced or written.
func ExampleAdmin_InspectLedger() {
	cluster, err := foliotest.New()
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	ctx := context.Background()
	uri := cluster.URI()
	id := writeExampleLedger(ctx, uri)

	a, err := admin.New(ctx, admin.Config{Client: client.Config{MetadataServiceURI: uri}})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	in, err := a.InspectLedger(ctx, id, admin.InspectLedgerOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("state:", in.State, "last entry:", in.LastEntryID, "recovery:", in.Recovery.Outcome)
	for _, f := range in.Fragments {
		for _, b := range f.Bookies {
			fmt.Printf("entries %d..%d: a bookie holds %d of its %d, missing %d\n",
				f.FirstEntryID, f.LastEntryID, b.Held, b.Expected, b.MissingCount)
		}
	}

	_, err = a.InspectLedger(ctx, id+1000, admin.InspectLedgerOptions{})
	fmt.Println("unknown ledger:", errors.Is(err, admin.ErrNoSuchLedger))
	// Output:
	// state: CLOSED last entry: 2 recovery: closed
	// entries 0..2: a bookie holds 2 of its 2, missing 0
	// entries 0..2: a bookie holds 2 of its 2, missing 0
	// entries 0..2: a bookie holds 2 of its 2, missing 0
	// unknown ledger: true
}

// Ask what recovering a bookie would do, without changing anything: the
// ledgers naming it, and a dry run's plan. Without DryRun the same call
// copies the data to other bookies (Java's recoverBookieData).
func ExampleAdmin_RecoverBookie() {
	cluster, err := foliotest.New()
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	ctx := context.Background()
	uri := cluster.URI()
	id := writeExampleLedger(ctx, uri)

	a, err := admin.New(ctx, admin.Config{Client: client.Config{MetadataServiceURI: uri}})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	bookies, err := a.ListBookies(ctx, admin.ListBookiesOptions{})
	if err != nil {
		log.Fatal(err)
	}
	failed := bookies[0].ID

	on, err := a.LedgersContainingBookies(ctx, failed)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ledgers naming the bookie:", len(on), on[0].LedgerID == id)

	res, err := a.RecoverBookie(ctx, []string{failed}, admin.RecoverBookieOptions{DryRun: true})
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range res.Plan {
		fmt.Printf("ledger %s: fence first %v, fragments to copy %d\n", p.State, p.Fence, len(p.Fragments))
	}
	fmt.Println("copied:", res.Entries)
	// Output:
	// ledgers naming the bookie: 1 true
	// ledger CLOSED: fence first false, fragments to copy 1
	// copied: 0
}

// Switch AutoRecovery off and on cluster-wide, and ask who the auditor is
// (foliotest runs no AutoRecovery, so none is elected).
func ExampleAdmin_DisableAutoRecovery() {
	cluster, err := foliotest.New()
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	ctx := context.Background()
	a, err := admin.New(ctx, admin.Config{Client: client.Config{MetadataServiceURI: cluster.URI()}})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()

	if err := a.DisableAutoRecovery(ctx); err != nil {
		log.Fatal(err)
	}
	on, err := a.IsAutoRecoveryEnabled(ctx)
	fmt.Println("enabled:", on, err)
	if err := a.EnableAutoRecovery(ctx); err != nil {
		log.Fatal(err)
	}
	on, err = a.IsAutoRecoveryEnabled(ctx)
	fmt.Println("enabled:", on, err)

	_, err = a.Auditor(ctx)
	fmt.Println("auditor elected:", !errors.Is(err, admin.ErrNoAuditor))
	n := 0
	for _, err := range a.UnderReplicatedLedgers(ctx, admin.UnderReplicatedOptions{}) {
		if err != nil {
			log.Fatal(err)
		}
		n++
	}
	fmt.Println("under-replicated ledgers:", n)
	// Output:
	// enabled: false <nil>
	// enabled: true <nil>
	// auditor elected: false
	// under-replicated ledgers: 0
}

// writeExampleLedger writes a closed ledger of 3 entries on 3 bookies,
// each entry on 2 of them.
func writeExampleLedger(ctx context.Context, uri string) int64 {
	c, err := client.New(ctx, client.Config{MetadataServiceURI: uri})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: []byte("pw")})
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range []string{"a", "b", "c"} {
		if _, err := w.Append(ctx, []byte(p)); err != nil {
			log.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		log.Fatal(err)
	}
	return w.ID()
}
