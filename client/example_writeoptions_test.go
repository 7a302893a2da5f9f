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

// The writer options Java users set in ClientConfiguration: bound how long
// an append may wait for its ack quorum, tolerate a failed bookie while Qa
// is still met, and bound the ensemble changes of a handle.
// AppendAsyncContext cancels appends that have not been sent yet.
func ExampleWriteHandle_AppendAsyncContext() {
	cluster, err := foliotest.New()
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()

	ctx := context.Background()
	c, err := client.New(ctx, client.Config{
		MetadataServiceURI:    cluster.URI(),
		AddEntryQuorumTimeout: 30 * time.Second, // Java: addEntryQuorumTimeoutSec=30
		DelayEnsembleChange:   true,             // Java: delayEnsembleChange=true
		MaxNumEnsembleChanges: 10,               // Java: maxNumEnsembleChanges=10
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// Each entry on all three bookies, acknowledged by two: with
	// DelayEnsembleChange one bookie may fail without an ensemble change.
	w, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2})
	if err != nil {
		log.Fatal(err)
	}

	// A request whose deadline passed before the append was sent: the
	// append fails and nothing is written.
	expired, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := w.AppendAsyncContext(expired, []byte("too late")).Wait(ctx); errors.Is(err, context.Canceled) {
		fmt.Println("not sent, no entry id taken")
	}

	reqCtx, done := context.WithTimeout(ctx, time.Minute)
	defer done()
	f := w.AppendAsyncContext(reqCtx, []byte("order 17"))
	id, err := f.Wait(ctx)
	if err != nil {
		// ErrAddQuorumTimeout (no ack quorum within 30 s) closed the
		// ledger; like any append error, the outcome is unknown.
		log.Fatal(err)
	}
	fmt.Println("appended entry", id)
	if err := w.Close(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// not sent, no entry id taken
	// appended entry 0
}
