package client_test

import (
	"context"
	"fmt"
	"log"

	"github.com/foliodb/folio/client"
)

// Read a ledger's metadata: its ensembles, quorums, state and the custom
// metadata given at create. Like ExampleClient it needs a running cluster,
// so `go test` compiles it without running it.
func ExampleClient_LedgerMetadata() {
	ctx := context.Background()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: "etcd://127.0.0.1:2379/ledgers"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	w, err := c.CreateLedger(ctx, client.LedgerOptions{CustomMetadata: map[string][]byte{"owner": []byte("wal-1")}})
	if err != nil {
		log.Fatal(err)
	}
	md, err := c.LedgerMetadata(ctx, w.ID())
	if err != nil {
		log.Fatal(err) // errors.Is(err, client.ErrNoSuchLedger) for an unknown id
	}
	fmt.Println(md.State(), md.EnsembleSize(), md.WriteQuorumSize(), md.AckQuorumSize())
	fmt.Printf("owner %s, created %v\n", md.CustomMetadata()["owner"], md.Ctime())
	for _, e := range md.Ensembles() {
		fmt.Println("from entry", e.FirstEntryID, "on", e.Bookies)
	}
}

// Follow a ledger's metadata until its writer closes it: each ensemble
// change, then the CLOSED value with the ledger's last entry and length.
func ExampleClient_WatchLedgerMetadata() {
	ctx := context.Background()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: "etcd://127.0.0.1:2379/ledgers"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	const ledgerID = 42
	for md, err := range c.WatchLedgerMetadata(ctx, ledgerID) {
		if err != nil {
			log.Fatal(err) // deleted (ErrNoSuchLedger), ctx ended, or the store failed
		}
		fmt.Println(md.State(), len(md.Ensembles()), "ensembles")
		if md.IsClosed() {
			fmt.Println("closed at entry", md.LastEntryID(), "with", md.Length(), "bytes")
		}
	}
}

// List every ledger of the cluster, in ascending id order, without loading
// all ids into memory.
func ExampleClient_ListLedgers() {
	ctx := context.Background()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: "etcd://127.0.0.1:2379/ledgers"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	n := 0
	for id, err := range c.ListLedgers(ctx) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(id)
		n++
	}
	fmt.Println(n, "ledgers")
}
