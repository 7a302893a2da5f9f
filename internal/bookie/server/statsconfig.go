package server

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// PrometheusProviderClass is BookKeeper's Prometheus stats provider, the
// statsProviderClass value that asks for a metrics listener.
const PrometheusProviderClass = "org.apache.bookkeeper.stats.prometheus.PrometheusMetricsProvider"

// Defaults of BookKeeper's Prometheus provider.
const (
	DefaultPrometheusStatsAddress = "0.0.0.0"
	DefaultPrometheusStatsPort    = 8000
)

// StatsConfig says where metrics are served. With the admin HTTP server
// (httpServerEnabled=true) they are on its /metrics and nothing else
// listens. Without it, and only when ProviderClass names BookKeeper's
// Prometheus provider, a listener on PrometheusAddress:PrometheusPort
// serves /metrics, as a Java bookie's provider does; otherwise no metrics
// listener is opened, so that two bookies on one host never fight over a
// default port.
type StatsConfig struct {
	// ProviderClass is statsProviderClass. Any value is accepted (Java's
	// providers have no Folio equivalent beyond Prometheus); only
	// PrometheusProviderClass opens a listener.
	ProviderClass string
	// PrometheusAddress and PrometheusPort are prometheusStatsHttpAddress
	// and prometheusStatsHttpPort (0.0.0.0 and 8000; port 0 picks a free
	// port, for tests).
	PrometheusAddress string
	PrometheusPort    int
	// LatencyRollover is prometheusStatsLatencyRolloverSeconds: the window
	// the latency quantiles describe (package opstats); zero means
	// opstats.DefaultRollover (60 s, as in Java).
	LatencyRollover time.Duration
}

// wantsListener reports whether a metrics listener should be opened when
// the admin HTTP server is off.
func (s StatsConfig) wantsListener() bool {
	return strings.TrimSpace(s.ProviderClass) == PrometheusProviderClass
}

func (s StatsConfig) validate() error {
	if s.PrometheusPort < 0 || s.PrometheusPort > 65535 {
		return fmt.Errorf("config key prometheusStatsHttpPort: %d is not a port", s.PrometheusPort)
	}
	return nil
}

// metricsServer serves /metrics of a registry on its own listener (the
// Prometheus provider's).
type metricsServer struct {
	ln  net.Listener
	srv *http.Server
}

func startMetricsServer(s StatsConfig, reg prometheus.Gatherer, onErr func(error)) (*metricsServer, error) {
	addr := net.JoinHostPort(s.PrometheusAddress, strconv.Itoa(s.PrometheusPort))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listener on %s (prometheusStatsHttpAddress, prometheusStatsHttpPort): %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	m := &metricsServer{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			onErr(err)
		}
	}()
	return m, nil
}
