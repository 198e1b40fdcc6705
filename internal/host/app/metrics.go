package app

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metricsServer serves /metrics, and /debug/pprof/ when asked, on a
// listener apart from the API, so neither is public where the API is.
type metricsServer struct {
	ln  net.Listener
	srv *http.Server
}

func (a *App) listenMetrics() (*metricsServer, error) {
	ln, err := net.Listen("tcp", a.cfg.MetricsAddr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.Registry, promhttp.HandlerOpts{}))
	if a.cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	m := &metricsServer{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.cfg.Logger.Error("metrics listener", "err", err)
		}
	}()
	a.metricsAddr = ln.Addr()
	a.cfg.Logger.Info("metrics listening", "addr", ln.Addr().String(), "pprof", a.cfg.Pprof)
	return m, nil
}

func (m *metricsServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = m.srv.Shutdown(ctx)
}

// MetricsAddr is the bound address of the metrics listener once Run has
// opened it; nil when /metrics is served on the API address.
func (a *App) MetricsAddr() net.Addr { return a.metricsAddr }
