package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/client/foliotest"
)

// Create a ledger, append to it, close it, and read it back. The cluster
// is foliotest's in-process one, so `go test` runs this example; against
// a real cluster, MetadataServiceURI is its etcd (etcd://host:2379/ledgers).
func Example() {
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

	// Three bookies, each entry on two of them, acknowledged by both.
	password := []byte("secret")
	w, err := c.CreateLedger(ctx, client.LedgerOptions{
		EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2,
		Password: password,
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, event := range []string{"created", "paid", "shipped"} {
		id, err := w.Append(ctx, []byte(event))
		if err != nil {
			log.Fatal(err) // the outcome of a failed append is unknown
		}
		fmt.Println("appended entry", id)
	}
	// Closing records the ledger's end in its metadata: readers see
	// exactly these entries.
	if err := w.Close(ctx); err != nil {
		log.Fatal(err)
	}

	r, err := c.OpenLedger(ctx, w.ID(), client.OpenOptions{Password: password})
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
	// appended entry 0
	// appended entry 1
	// appended entry 2
	// entry 0: created
	// entry 1: paid
	// entry 2: shipped
}

// Pipeline appends: AppendAsync returns at once and the futures complete
// in entry order, so many appends can be in flight.
func ExampleWriteHandle_AppendAsync() {
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

	w, err := c.CreateLedger(ctx, client.LedgerOptions{Password: []byte("secret")})
	if err != nil {
		log.Fatal(err)
	}
	var futures []*client.AppendFuture
	for i := range 100 {
		futures = append(futures, w.AppendAsync(fmt.Appendf(nil, "record %d", i)))
	}
	for _, f := range futures {
		if _, err := f.Wait(ctx); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("last add confirmed:", w.LastAddConfirmed())
	if err := w.Close(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// last add confirmed: 99
}

// Once the client is closed every operation fails with ErrClientClosed,
// on the client and on the handles it opened.
func ExampleClient_Close() {
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
	password := []byte("secret")
	w, err := c.CreateLedger(ctx, client.LedgerOptions{Password: password})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := w.Append(ctx, []byte("first")); err != nil {
		log.Fatal(err)
	}
	r, err := c.OpenLedger(ctx, w.ID(), client.OpenOptions{Password: password})
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Close(); err != nil {
		log.Fatal(err)
	}

	_, err = c.CreateLedger(ctx, client.LedgerOptions{Password: password})
	fmt.Println("create:", errors.Is(err, client.ErrClientClosed), client.Code(err))
	_, err = w.Append(ctx, []byte("late"))
	fmt.Println("append:", errors.Is(err, client.ErrClientClosed))
	_, err = c.OpenLedger(ctx, w.ID(), client.OpenOptions{Password: password})
	fmt.Println("open:", errors.Is(err, client.ErrClientClosed))
	err = c.DeleteLedger(ctx, w.ID())
	fmt.Println("delete:", errors.Is(err, client.ErrClientClosed))
	_, err = r.ReadUnconfirmed(ctx, 0, 0)
	fmt.Println("read:", errors.Is(err, client.ErrClientClosed))
	_, err = r.ReadLastAddConfirmed(ctx)
	fmt.Println("read LAC:", errors.Is(err, client.ErrClientClosed))
	_, err = r.ReadLastAddConfirmedAndEntry(ctx, 1, time.Second)
	fmt.Println("long poll:", errors.Is(err, client.ErrClientClosed))
	tailed := 0
	for _, err := range r.Tail(ctx, 0) { // yields the error, then ends
		tailed++
		fmt.Println("tail:", errors.Is(err, client.ErrClientClosed), tailed)
	}
	err = w.Force(ctx)
	fmt.Println("force:", errors.Is(err, client.ErrClientClosed))
	err = w.Close(ctx)
	fmt.Println("close ledger:", errors.Is(err, client.ErrClientClosed))
	// Output:
	// create: true -19
	// append: true
	// open: true
	// delete: true
	// read: true
	// read LAC: true
	// long poll: true
	// tail: true 1
	// force: true
	// close ledger: true
}
