package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/foliodb/folio/client"
)

// Write a ledger, slowly, and tail it from a second handle while it is
// written. It needs a running cluster (`folio standalone`), so it has no
// Output comment: `go test` compiles it but does not run it. The README's
// tour runs it as a program.
func ExampleClient() {
	ctx := context.Background()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: "etcd://127.0.0.1:2379/ledgers"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	password := []byte("secret")
	w, err := c.CreateLedger(ctx, client.LedgerOptions{
		EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, // the defaults
		Password: password,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ledger", w.ID())

	tailed := make(chan error, 1)
	go func() { tailed <- tail(ctx, c, w.ID(), password) }()

	for i := range 100 {
		if _, err := w.Append(ctx, fmt.Appendf(nil, "event %d", i)); err != nil {
			log.Fatal(err) // the outcome of a failed append is unknown
		}
		time.Sleep(100 * time.Millisecond) // a slow writer, to watch the tail
	}
	if err := w.Close(ctx); err != nil {
		log.Fatal(err)
	}
	if err := <-tailed; err != nil {
		log.Fatal(err)
	}
}

// tail prints a ledger's entries as they become readable (up to its last
// add confirmed, which trails the writer by one entry until the next append
// or the close) until the ledger is closed and fully read. The open does
// not recover the ledger, so the writer is not disturbed.
func tail(ctx context.Context, c *client.Client, id int64, password []byte) error {
	r, err := c.OpenLedger(ctx, id, client.OpenOptions{Password: password})
	if err != nil {
		return err
	}
	defer r.Close()
	next := int64(0)
	for {
		lac, err := r.ReadLastAddConfirmed(ctx)
		if err != nil {
			return err
		}
		if lac >= next {
			for e, err := range r.Entries(ctx, next, lac) {
				if err != nil {
					return err
				}
				fmt.Printf("entry %d: %s\n", e.ID, e.Payload)
			}
			next = lac + 1
		}
		if r.IsClosed() && next > lac {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Recover a ledger whose writer died: the open fences it on its bookies, so
// the old writer can add nothing more, and closes it at its true end.
func ExampleClient_OpenLedger_recovery() {
	ctx := context.Background()
	c, err := client.New(ctx, client.Config{MetadataServiceURI: "etcd://127.0.0.1:2379/ledgers"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	const id = 42 // a ledger id from `folio shell listledgers`
	r, err := c.OpenLedger(ctx, id, client.OpenOptions{Password: []byte("secret"), Recovery: true})
	if err != nil {
		log.Fatal(err)
	}
	last, err := r.ReadLastAddConfirmed(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ledger", id, "closed at entry", last)
}
