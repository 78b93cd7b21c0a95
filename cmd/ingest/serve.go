package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/dashboard"
	"github.com/ingest-engine/ingest/httpapi"
	"github.com/ingest-engine/ingest/metrics"
	"github.com/ingest-engine/ingest/runtime"
)

// This file is what `ingest run` serves besides the pipeline: the HTTP
// server (metrics, API, dashboard; package httpapi), the live status line
// on a terminal or periodic progress logs (progress.go), and the log format.

// defaultHTTPAddr is where `ingest run` serves HTTP unless --http says
// otherwise.
const defaultHTTPAddr = "127.0.0.1:8080"

// logFormat is the value of --log-format: text or json.
type logFormat string

func (f *logFormat) String() string { return string(*f) }
func (f *logFormat) Type() string   { return "text|json" }

// Set implements pflag.Value: an unknown format is a usage error.
func (f *logFormat) Set(s string) error {
	if s != "text" && s != "json" {
		return fmt.Errorf("log format %q: use text or json", s)
	}
	*f = logFormat(s)
	return nil
}

// serving holds run's flags for what it serves, and once started, the
// server and the progress display.
type serving struct {
	httpAddr string
	format   logFormat
	// status is the live status line when stderr is a terminal, nil else.
	status *statusLine
}

// flags registers run's flags for what it serves on f.
func (s *serving) flags(f *pflag.FlagSet) {
	s.format = "text"
	f.StringVar(&s.httpAddr, "http", defaultHTTPAddr,
		`address of the HTTP server for /metrics, the API and the dashboard ("" disables it; port 0 picks a free port)`)
	f.Var(&s.format, "log-format", "format of the log on stderr: text or json")
}

// output returns where the log goes: stderr itself, or, when stderr is a
// terminal, stderr under the live status line (log records appear above
// it). stdoutSink says whether a sink prints records to stdout: when stdout
// is the same terminal, those records would land on the status line, so
// there is none and progress is logged as without a terminal.
func (s *serving) output(stderr, stdout io.Writer, stdoutSink bool) io.Writer {
	if !isTerminal(stderr) || stdoutSink && sameFile(stdout, stderr) {
		return stderr
	}
	s.status = &statusLine{w: stderr, width: terminalColumns(stderr.(*os.File))}
	return s.status
}

// sameFile reports whether a and b are the same open file (the same
// terminal, for two ttys).
func sameFile(a, b io.Writer) bool {
	fa, ok1 := a.(*os.File)
	fb, ok2 := b.(*os.File)
	if !ok1 || !ok2 {
		return false
	}
	sa, err1 := fa.Stat()
	sb, err2 := fb.Stat()
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// logHandler returns the log handler of --log-format writing to w.
func (s *serving) logHandler(w io.Writer, o *slog.HandlerOptions) slog.Handler {
	if s.format == "json" {
		return slog.NewJSONHandler(w, o)
	}
	return slog.NewTextHandler(w, o)
}

// start starts the HTTP server (unless --http is "") and the progress
// display for job, and returns the function that stops both. A busy port is
// an error that names the address and the flag.
func (s *serving) start(job *runtime.Job, p *config.Pipeline, log *slog.Logger) (stop func(), err error) {
	stopHTTP := func() {}
	if s.httpAddr != "" {
		if stopHTTP, err = serveHTTP(s.httpAddr, job, p, log); err != nil {
			return nil, err
		}
	}
	stopProgress := startProgress(job, s.status, log)
	return func() {
		stopProgress()
		stopHTTP()
	}, nil
}

// serveHTTP listens on addr and serves the API for job until the returned
// function is called.
func serveHTTP(addr string, job *runtime.Job, p *config.Pipeline, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("the HTTP server cannot listen on %s: %w; choose another address with --http ADDR, or disable the server with --http \"\"", addr, err)
	}
	delivery := p.Delivery()
	token := httpapi.Token(p.HTTPToken)
	srv := &http.Server{
		Handler: httpapi.New(job, httpapi.Options{Token: token, Delivery: &delivery, Dashboard: dashboard.Handler(),
			Collectors: []prometheus.Collector{metrics.NewBadRecordCollector(p.Stream.Name(), p.Stream.BadRecordCounts)}}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	url := "http://" + ln.Addr().String()
	log.Info("HTTP server listening: metrics at /metrics, API at /api/v1/, dashboard at /", "url", url)
	if token == "" {
		log.Info("HTTP API: POST endpoints (trigger a checkpoint, stop) are disabled; set http.token in the pipeline file or " + httpapi.TokenEnv + " to enable them")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("HTTP server failed", "url", url, "err", err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
		}
		<-done
	}, nil
}
