// Command server serves a GGUF model over llama.cpp's REST API (OpenAI and
// Anthropic compatible endpoints, native completion, embeddings, rerank,
// infill, slots, metrics, LoRA, several models), built from package server.
// It takes llama-server's command-line flags with the same meanings and
// defaults wherever they apply, so it can stand in for llama-server:
//
//	go run ./examples/server -m ../shared/models/stories260K.gguf --port 8080
//
// SIGINT or SIGTERM stops it gracefully: in-flight requests finish first.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/x/llama"
	"github.com/x/llama/hub"
	"github.com/x/llama/server"
)

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Getenv, os.Stdout)
	if errors.Is(err, errHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(2)
	}
	if err := serve(cfg); err != nil {
		msg := err.Error()
		if !strings.HasPrefix(msg, "server: ") {
			msg = "server: " + msg
		}
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(1)
	}
}

func serve(cfg *config) error {
	switch {
	case cfg.version:
		fmt.Println("server (github.com/x/llama), llama-server v0.4.0 compatible")
		return nil
	case cfg.cacheList:
		return printCacheList(os.Stdout)
	}
	// Installing the library is explicit: this program installs it into
	// the cache folder on its first run (with a progress bar on stderr).
	if err := llama.Init(llama.LibraryOptions{Install: true, NUMA: cfg.numa}); err != nil {
		return err
	}
	switch {
	case cfg.listDevices:
		return printDevices(os.Stdout)
	}
	logger := cfg.opts.Logger
	if logger == nil {
		level := slog.LevelInfo
		if cfg.verbose {
			level = slog.LevelDebug
		}
		var out io.Writer = os.Stderr
		tty := isTerminal(os.Stderr)
		if cfg.logFile != "" {
			f, err := os.OpenFile(cfg.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				return fmt.Errorf("--log-file: %w", err)
			}
			defer f.Close()
			out, tty = io.MultiWriter(os.Stderr, f), false // no escape codes in the file by default
		}
		logger = slog.New(cfg.logFormat.newLogHandler(out, tty, level))
		cfg.opts.Logger = logger
	}
	// llama.cpp's own warnings and errors (a device left out, a failed
	// allocation, a CUDA error) reach the log by default; its info and
	// debug lines with -v.
	if cfg.verbose {
		llama.SetLogger(logger)
	} else {
		llama.SetLogger(slog.New(minLevel{logger.Handler(), slog.LevelWarn}))
	}
	if p := cfg.threads.prio; p != nil {
		// As llama-server: --prio also sets the process's priority (a
		// warning, not a failure, when it may not).
		if err := setProcessPriority(*p); err != nil {
			logger.Warn("could not set the process priority", "prio", *p, "err", err)
		}
	}
	// Bad certificate files fail here, before the model loads.
	tlsConf, err := cfg.tlsConfig()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cfg.modelSource(ctx, os.Stderr); err != nil {
		return err
	}

	// As llama-server, a host ending in ".sock" is a Unix socket.
	network, addr := "tcp", net.JoinHostPort(cfg.host, strconv.Itoa(cfg.port))
	if strings.HasSuffix(cfg.host, ".sock") {
		network, addr = "unix", cfg.host
	}
	var lc net.ListenConfig
	if cfg.reusePort && network == "tcp" {
		lc.Control = reusePort
	}
	ln, err := lc.Listen(ctx, network, addr)
	if err != nil {
		return err
	}
	ln = limitConns(ln, cfg.maxConns, cfg.maxConnsPerClient)
	srv, err := server.New(ctx, cfg.opts)
	if err != nil {
		ln.Close()
		return err
	}
	// -to bounds each write (Options.WriteTimeout), as llama-server's
	// per-socket timeouts: http.Server's WriteTimeout would bound the
	// whole response and cut a long stream.
	hs := &http.Server{Handler: cfg.handler(srv.Handler()), ReadTimeout: cfg.timeout, ReadHeaderTimeout: 30 * time.Second, TLSConfig: tlsConf}
	hs.RegisterOnShutdown(srv.AbortToolCalls)
	scheme := "http"
	switch {
	case network == "unix":
		scheme = "unix"
	case tlsConf != nil:
		scheme = "https"
	}
	logger.Info("listening", "addr", scheme+"://"+ln.Addr().String()+cfg.apiPrefix)
	for _, w := range cfg.startupWarnings(network) {
		logger.Warn(w)
	}
	errc := make(chan error, 1)
	go func() {
		if tlsConf != nil {
			errc <- hs.ServeTLS(ln, "", "")
			return
		}
		errc <- hs.Serve(ln)
	}()
	select {
	case err = <-errc:
	case <-ctx.Done():
		logger.Info("shutting down")
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = hs.Shutdown(sctx)
		cancel()
	}
	if cerr := srv.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// startupWarnings are the risks of the configuration, logged at start:
// router mode, as llama-server's list of features not to expose to
// untrusted environments (its list also names the tools and the MCP
// proxy), and, beyond llama-server, a TCP listener on an address other
// than the loopback with no API key, which serves anyone who can reach
// the port.
func (c *config) startupWarnings(network string) []string {
	out := slices.Clone(c.warnings)
	if c.opts.Model == "" && (c.opts.ModelsDir != "" || c.opts.ModelsPreset != "") {
		out = append(out, "router mode is enabled: do not expose the server to untrusted environments")
	}
	if network == "tcp" && len(c.opts.APIKeys) == 0 && !loopbackHost(c.host) {
		out = append(out, "listening on "+c.host+" without an API key: anyone who can reach the port can use the server (set --api-key or --api-key-file, or listen on 127.0.0.1)")
	}
	return out
}

// loopbackHost reports whether host (a name or an address) is the
// loopback interface.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// handler puts the API under --api-prefix. (--path is served by the
// server itself: Options.UIPath.)
func (c *config) handler(api http.Handler) http.Handler {
	if p := strings.TrimRight(c.apiPrefix, "/"); p != "" {
		mux := http.NewServeMux()
		mux.Handle(p+"/", http.StripPrefix(p, api))
		return mux
	}
	return api
}

// tlsConfig reads --ssl-cert-file and --ssl-key-file (PEM): with both the
// server speaks HTTPS only, as llama-server. One without the other is an
// error here, where llama-server would silently serve plain HTTP.
func (c *config) tlsConfig() (*tls.Config, error) {
	if c.sslKey == "" && c.sslCert == "" {
		return nil, nil
	}
	if c.sslKey == "" || c.sslCert == "" {
		return nil, errors.New("HTTPS needs both --ssl-key-file and --ssl-cert-file")
	}
	cert, err := tls.LoadX509KeyPair(c.sslCert, c.sslKey)
	if err != nil {
		return nil, fmt.Errorf("--ssl-cert-file %s, --ssl-key-file %s: %w", c.sslCert, c.sslKey, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// printCacheList prints the models of the hub cache as llama-server's
// --cache-list does.
func printCacheList(w io.Writer) error {
	models, err := hub.CachedModels("")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "number of models in cache: %d\n", len(models))
	for i, m := range models {
		fmt.Fprintf(w, "%4d. %s\n", i+1, m)
	}
	return nil
}

// printDevices lists the devices -dev may name, as llama-server's
// --list-devices does: those other than the CPU, with their memory. A
// device the build was checked on has its verdict on the next line
// ("usable: ..." or "refused: ..." with the ways out; see
// llama.CheckDevices).
func printDevices(w io.Writer) error {
	checks, err := llama.CheckDevices()
	if err != nil {
		return err
	}
	// A GPU build whose backend does not load (no Vulkan loader, no CUDA
	// runtime) or finds no device lists none: say why.
	errs, err := llama.GPUBackendErrors()
	if err != nil {
		return err
	}
	writeDevices(w, checks, errs)
	return nil
}

func writeDevices(w io.Writer, checks []llama.DeviceCheck, notes []error) {
	fmt.Fprintln(w, "Available devices:")
	n := 0
	for _, d := range checks {
		if d.Type == "cpu" {
			continue
		}
		fmt.Fprintf(w, "  %s: %s (%d MiB, %d MiB free)\n", d.Name, d.Description, d.TotalMemory>>20, d.FreeMemory>>20)
		var le *llama.Error
		switch {
		case errors.As(d.Err, &le):
			fmt.Fprintf(w, "    refused: %s\n", le.Msg)
		case d.Err != nil:
			fmt.Fprintf(w, "    refused: %v\n", d.Err)
		case d.How != "":
			fmt.Fprintf(w, "    usable: %s\n", d.How)
		}
		n++
	}
	if n == 0 {
		fmt.Fprintln(w, "  (none)")
	}
	for _, e := range notes {
		fmt.Fprintf(w, "  note: %v\n", e)
	}
}

// minLevel passes the records of at least a level to a handler.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}
