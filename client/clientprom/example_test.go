package clientprom_test

import (
	"context"
	"fmt"
	"log"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/client/clientprom"
	"github.com/foliodb/folio/client/foliotest"
)

// Record a client's metrics in a Prometheus registry (in a program,
// usually prometheus.DefaultRegisterer, served by promhttp).
func ExampleNew() {
	cluster, err := foliotest.New()
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()

	ctx := context.Background()
	reg := prometheus.NewRegistry()
	c, err := client.New(ctx, client.Config{
		MetadataServiceURI: cluster.URI(),
		Metrics:            clientprom.New(reg),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	w, err := c.CreateLedger(ctx, client.LedgerOptions{Password: []byte("secret")})
	if err != nil {
		log.Fatal(err)
	}
	for range 5 {
		if _, err := w.Append(ctx, []byte("event")); err != nil {
			log.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		log.Fatal(err)
	}

	families, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if s := m.GetSummary(); s != nil && s.GetSampleCount() > 0 {
				fmt.Println(f.GetName(), m.GetLabel()[0].GetName(), m.GetLabel()[0].GetValue(), s.GetSampleCount())
			}
		}
	}
	// Output:
	// bookkeeper_client_ADD_ENTRY success true 5
	// bookkeeper_client_LEDGER_CREATE success true 1
}
