package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/client/foliotest"
)

// Write with explicit entry ids, out of order, under a chosen ledger id.
// Each entry is sent as soon as it is written, but entries are
// acknowledged in id order: entry 2 completes only after 0 and 1.
func ExampleClient_CreateLedgerAdv() {
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

	password := []byte("secret")
	w, err := c.CreateLedgerAdv(ctx, client.LedgerOptions{LedgerID: 4242, Password: password})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ledger", w.ID())
	second := w.WriteAtAsync(2, []byte("third"))
	first := w.WriteAtAsync(1, []byte("second"))
	if err := w.WriteAt(ctx, 0, []byte("first")); err != nil {
		log.Fatal(err)
	}
	for _, f := range []*client.AppendFuture{first, second} {
		id, err := f.Wait(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("acknowledged entry", id)
	}
	// An id already written is refused; the ledger goes on.
	err = w.WriteAt(ctx, 1, []byte("again"))
	fmt.Println("rewrite entry 1:", errors.Is(err, client.ErrDuplicateEntryID), client.Code(err))
	fmt.Println("last add confirmed:", w.LastAddConfirmed())
	if err := w.Close(ctx); err != nil {
		log.Fatal(err)
	}

	// The id is taken now.
	_, err = c.CreateLedgerAdv(ctx, client.LedgerOptions{LedgerID: 4242, Password: password})
	fmt.Println("create 4242 again:", errors.Is(err, client.ErrLedgerExists))

	r, err := c.OpenLedger(ctx, 4242, client.OpenOptions{Password: password})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	entries, err := r.Read(ctx, 0, 2)
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range entries {
		fmt.Printf("entry %d: %s\n", e.ID, e.Payload)
	}
	// Output:
	// ledger 4242
	// acknowledged entry 1
	// acknowledged entry 2
	// rewrite entry 1: true -22
	// last add confirmed: 2
	// create 4242 again: true
	// entry 0: first
	// entry 1: second
	// entry 2: third
}
