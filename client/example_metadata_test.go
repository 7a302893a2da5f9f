package client_test

import (
	"context"
	"fmt"
	"log"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/client/foliotest"
)

// Read a ledger's metadata: its ensembles, quorums, state and the custom
// metadata given at create.
func ExampleClient_LedgerMetadata() {
	cluster, err := foliotest.New()
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	ctx := context.Background()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: cluster.URI()})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	w, err := c.CreateLedger(ctx, client.LedgerOptions{
		EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2,
		CustomMetadata: map[string][]byte{"owner": []byte("wal-1")},
	})
	if err != nil {
		log.Fatal(err)
	}
	md, err := c.LedgerMetadata(ctx, w.ID())
	if err != nil {
		log.Fatal(err) // errors.Is(err, client.ErrNoSuchLedger) for an unknown id
	}
	fmt.Println(md.State(), md.EnsembleSize(), md.WriteQuorumSize(), md.AckQuorumSize())
	fmt.Printf("owner %s, has ctime %v\n", md.CustomMetadata()["owner"], !md.Ctime().IsZero())
	for _, e := range md.Ensembles() {
		fmt.Println("from entry", e.FirstEntryID, "on", len(e.Bookies), "bookies")
	}
	// Output:
	// OPEN 3 2 2
	// owner wal-1, has ctime true
	// from entry 0 on 3 bookies
}

// Follow a ledger's metadata until its writer closes it: each change,
// then the CLOSED value with the ledger's last entry and length.
func ExampleClient_WatchLedgerMetadata() {
	cluster, err := foliotest.New()
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	ctx := context.Background()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: cluster.URI()})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	w, err := c.CreateLedger(ctx, client.LedgerOptions{})
	if err != nil {
		log.Fatal(err)
	}

	for md, err := range c.WatchLedgerMetadata(ctx, w.ID()) {
		if err != nil {
			log.Fatal(err) // deleted (ErrNoSuchLedger), ctx ended, or the store failed
		}
		fmt.Println(md.State())
		if md.IsClosed() {
			fmt.Println("closed at entry", md.LastEntryID(), "with", md.Length(), "bytes")
			break
		}
		// The writer appends and closes while the watch waits.
		if _, err := w.Append(ctx, []byte("hello")); err != nil {
			log.Fatal(err)
		}
		if err := w.Close(ctx); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// OPEN
	// CLOSED
	// closed at entry 0 with 5 bytes
}

// List every ledger of the cluster, in ascending id order, without loading
// all ids into memory.
func ExampleClient_ListLedgers() {
	cluster, err := foliotest.New()
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	ctx := context.Background()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: cluster.URI()})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	for range 3 {
		if _, err := c.CreateLedger(ctx, client.LedgerOptions{}); err != nil {
			log.Fatal(err)
		}
	}

	n, prev := 0, int64(-1)
	for id, err := range c.ListLedgers(ctx) {
		if err != nil {
			log.Fatal(err)
		}
		if id <= prev {
			log.Fatalf("ledger %d listed after %d", id, prev)
		}
		prev = id
		n++
	}
	fmt.Println(n, "ledgers")
	// Output:
	// 3 ledgers
}
