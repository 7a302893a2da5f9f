package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// serveMetrics serves GET /metrics of reg on addr until ctx ends (the
// `folio autorecovery` daemon's --metrics-address). It returns once the
// listener is bound; stop waits for the server to shut down.
func serveMetrics(ctx context.Context, addr string, reg *prometheus.Registry, log *slog.Logger) (stop func(), err error) {
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, WithHint(fmt.Errorf("metrics address %s: %w", addr, err), "choose a free --metrics-address, or \"\" to serve none")
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("serving metrics", "address", l.Addr().String())
	return func() { <-done }, nil
}
