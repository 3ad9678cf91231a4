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
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/x/llama"
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
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
}

func serve(cfg *config) error {
	switch {
	case cfg.version:
		fmt.Println("server (github.com/x/llama), llama-server v0.4.0 compatible")
		return nil
	case cfg.listDevices:
		devs, err := llama.Devices()
		if err != nil {
			return err
		}
		fmt.Println("Available devices:")
		for _, d := range devs {
			fmt.Printf("  %s: %s (%d MiB, %d MiB free)\n", d.Name, d.Description, d.TotalMemory>>20, d.FreeMemory>>20)
		}
		return nil
	}
	if err := cfg.unsupportedUse(); err != nil {
		return err
	}
	if err := cfg.modelSource(); err != nil {
		return err
	}
	logger := cfg.opts.Logger
	if logger == nil {
		level := slog.LevelInfo
		if cfg.verbose {
			level = slog.LevelDebug
		}
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
		cfg.opts.Logger = logger
	}
	if cfg.verbose {
		llama.SetLogger(logger)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.host, strconv.Itoa(cfg.port)))
	if err != nil {
		return err
	}
	srv, err := server.New(ctx, cfg.opts)
	if err != nil {
		ln.Close()
		return err
	}
	hs := &http.Server{Handler: srv.Handler(), ReadTimeout: cfg.timeout, WriteTimeout: cfg.timeout, ReadHeaderTimeout: 30 * time.Second}
	logger.Info("listening", "addr", "http://"+ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
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
