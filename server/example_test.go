package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/x/llama"
	"github.com/x/llama/engine"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/server"
)

// modelPath is the shared stories260K test model (see internal/testenv).
var modelPath = testenv.MustModel("stories260K.gguf")

// Mount the server under a prefix of an existing mux and call its native
// completion endpoint.
func ExampleServer_Handler() {
	srv, err := server.New(context.Background(), server.Options{
		Model:  modelPath,
		Engine: engine.Options{Parallel: 2, Context: llama.ContextOptions{ContextSize: 1024, Threads: 1}},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hi") })
	mux.Handle("/llm/", http.StripPrefix("/llm", srv.Handler()))
	ts := httptest.NewServer(mux)
	defer ts.Close()

	resp, err := http.Post(ts.URL+"/llm/completion", "application/json",
		strings.NewReader(`{"prompt": "Once upon a time", "n_predict": 12, "temperature": 0}`))
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var out struct {
		Content         string `json:"content"`
		TokensPredicted int    `json:"tokens_predicted"`
		StopType        string `json:"stop_type"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		panic(err)
	}
	fmt.Printf("%q %d %s\n", out.Content, out.TokensPredicted, out.StopType)
	// Output: ", there was a little girl named Lily. She" 12 limit
}

// The OpenAI-compatible chat endpoint, streaming: each SSE event carries a
// chat.completion.chunk.
func ExampleServer_Handler_chatStream() {
	srv, err := server.New(context.Background(), server.Options{
		Model:        modelPath,
		ChatTemplate: "chatml",
		Engine:       engine.Options{Context: llama.ContextOptions{ContextSize: 1024, Threads: 1}},
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(
		`{"messages": [{"role": "user", "content": "Tell me a story"}], "max_tokens": 8, "stream": true, "temperature": 0}`))
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	events := 0
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "data: ") {
			events++
		}
	}
	fmt.Println(resp.Header.Get("Content-Type"), events > 2, strings.HasSuffix(strings.TrimSpace(string(body)), "data: [DONE]"))
	// Output: text/event-stream true true
}
