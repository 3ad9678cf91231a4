// Command goclients runs the Go clients a Go programmer would point at a
// llama.cpp server against a running one.
//
// Usage: go run . BASE_URL
//
// Each check goes through a client's own API: sashabaranov/go-openai,
// langchaingo (its openai, ollama, anthropic and llamafile models) and
// Ollama's Go client (github.com/ollama/ollama/api), all pinned in go.mod.
// BASE_URL is a server of stories260K with a chat template in the Hermes
// tool-call format. It prints one JSON line per check, {name, ok, detail},
// and exits 1 when any fails.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	ollama "github.com/ollama/ollama/api"
	goopenai "github.com/sashabaranov/go-openai"
	"github.com/sashabaranov/go-openai/jsonschema"
	"github.com/tmc/langchaingo/embeddings"
	"github.com/tmc/langchaingo/llms"
	lcanthropic "github.com/tmc/langchaingo/llms/anthropic"
	"github.com/tmc/langchaingo/llms/llamafile"
	lcollama "github.com/tmc/langchaingo/llms/ollama"
	lcopenai "github.com/tmc/langchaingo/llms/openai"
)

const prompt = "Once upon a time"

var failed bool

func check(name string, f func(ctx context.Context) (any, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	detail, err := func() (d any, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		return f(ctx)
	}()
	line := map[string]any{"name": name, "ok": err == nil}
	if err != nil {
		failed = true
		line["detail"] = err.Error()
	} else {
		b, _ := json.Marshal(detail)
		line["detail"] = truncate(string(b), 300)
	}
	b, _ := json.Marshal(line)
	fmt.Println(string(b))
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func expect(cond bool, what ...any) error {
	if !cond {
		return fmt.Errorf("expected otherwise: %s", truncate(fmt.Sprint(what...), 1500))
	}
	return nil
}

func main() {
	base := strings.TrimSuffix(os.Args[1], "/")
	goOpenAI(base)
	langchain(base)
	ollamaClient(base)
	if failed {
		os.Exit(1)
	}
}

var weather = &goopenai.FunctionDefinition{
	Name:        "get_weather",
	Description: "The weather in a city",
	Parameters: jsonschema.Definition{
		Type:       jsonschema.Object,
		Properties: map[string]jsonschema.Definition{"city": {Type: jsonschema.String, Enum: []string{"Paris", "London"}}},
		Required:   []string{"city"},
	},
}

func goOpenAI(base string) {
	cfg := goopenai.DefaultConfig("none")
	cfg.BaseURL = base + "/v1"
	c := goopenai.NewClientWithConfig(cfg)
	user := []goopenai.ChatCompletionMessage{{Role: goopenai.ChatMessageRoleUser, Content: prompt}}

	check("go-openai: ListModels", func(ctx context.Context) (any, error) {
		ms, err := c.ListModels(ctx)
		if err != nil {
			return nil, err
		}
		return ms.Models, expect(len(ms.Models) == 1 && ms.Models[0].ID != "", ms)
	})
	check("go-openai: CreateChatCompletion, and the stream adds up to it", func(ctx context.Context) (any, error) {
		req := goopenai.ChatCompletionRequest{Model: "m", Messages: user, MaxCompletionTokens: 8, Seed: ptr(1), Temperature: 0}
		whole, err := c.CreateChatCompletion(ctx, req)
		if err != nil {
			return nil, err
		}
		ch := whole.Choices[0]
		if err := expect(ch.Message.Content != "" && ch.FinishReason == goopenai.FinishReasonLength && whole.Usage.CompletionTokens == 8, whole); err != nil {
			return nil, err
		}
		req.Stream = true
		req.StreamOptions = &goopenai.StreamOptions{IncludeUsage: true}
		st, err := c.CreateChatCompletionStream(ctx, req)
		if err != nil {
			return nil, err
		}
		defer st.Close()
		var text strings.Builder
		var finish goopenai.FinishReason
		var usage *goopenai.Usage
		if err := recvAll(st.Recv, func(r goopenai.ChatCompletionStreamResponse) {
			for _, ch := range r.Choices {
				text.WriteString(ch.Delta.Content)
				if ch.FinishReason != "" {
					finish = ch.FinishReason
				}
			}
			if r.Usage != nil {
				usage = r.Usage
			}
		}); err != nil {
			return nil, err
		}
		return text.String(), expect(text.String() == ch.Message.Content && finish == goopenai.FinishReasonLength && usage != nil && usage.CompletionTokens == 8,
			text.String(), " ", finish, " ", usage)
	})
	check("go-openai: logprobs and n", func(ctx context.Context) (any, error) {
		r, err := c.CreateChatCompletion(ctx, goopenai.ChatCompletionRequest{Model: "m", Messages: user, MaxCompletionTokens: 4, N: 2, LogProbs: true, TopLogProbs: 2, Temperature: 1, Seed: ptr(3)})
		if err != nil {
			return nil, err
		}
		if err := expect(len(r.Choices) == 2, r); err != nil {
			return nil, err
		}
		lp := r.Choices[1].LogProbs
		return lp, expect(lp != nil && len(lp.Content) == 4 && len(lp.Content[0].TopLogProbs) == 2 && lp.Content[0].LogProb <= 0, lp)
	})
	check("go-openai: a required tool call, and its result in the history", func(ctx context.Context) (any, error) {
		tools := []goopenai.Tool{{Type: goopenai.ToolTypeFunction, Function: weather}}
		r, err := c.CreateChatCompletion(ctx, goopenai.ChatCompletionRequest{Model: "m", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "Weather in Paris?"}},
			Tools: tools, ToolChoice: "required", MaxCompletionTokens: 256})
		if err != nil {
			return nil, err
		}
		msg := r.Choices[0].Message
		if err := expect(len(msg.ToolCalls) == 1 && msg.ToolCalls[0].Function.Name == "get_weather" && r.Choices[0].FinishReason == goopenai.FinishReasonToolCalls, r); err != nil {
			return nil, err
		}
		var args struct{ City string }
		if err := json.Unmarshal([]byte(msg.ToolCalls[0].Function.Arguments), &args); err != nil {
			return nil, err
		}
		history := []goopenai.ChatCompletionMessage{{Role: "user", Content: "Weather in Paris?"}, msg,
			{Role: goopenai.ChatMessageRoleTool, ToolCallID: msg.ToolCalls[0].ID, Content: "sunny"}}
		r2, err := c.CreateChatCompletion(ctx, goopenai.ChatCompletionRequest{Model: "m", Messages: history, Tools: tools, MaxCompletionTokens: 8})
		if err != nil {
			return nil, err
		}
		return msg.ToolCalls, expect(len(r2.Choices) == 1 && r2.Usage.PromptTokens > r.Usage.PromptTokens, r2)
	})
	check("go-openai: a streamed tool call", func(ctx context.Context) (any, error) {
		st, err := c.CreateChatCompletionStream(ctx, goopenai.ChatCompletionRequest{Model: "m", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "Weather in Paris?"}},
			Tools: []goopenai.Tool{{Type: goopenai.ToolTypeFunction, Function: weather}}, ToolChoice: goopenai.ToolChoice{Type: goopenai.ToolTypeFunction, Function: goopenai.ToolFunction{Name: "get_weather"}},
			MaxCompletionTokens: 256, Stream: true})
		if err != nil {
			return nil, err
		}
		defer st.Close()
		var name, args string
		var finish goopenai.FinishReason
		if err := recvAll(st.Recv, func(r goopenai.ChatCompletionStreamResponse) {
			for _, ch := range r.Choices {
				for _, tc := range ch.Delta.ToolCalls {
					name += tc.Function.Name
					args += tc.Function.Arguments
				}
				if ch.FinishReason != "" {
					finish = ch.FinishReason
				}
			}
		}); err != nil {
			return nil, err
		}
		return args, expect(name == "get_weather" && json.Valid([]byte(args)) && finish == goopenai.FinishReasonToolCalls, name, args, finish)
	})
	check("go-openai: a JSON schema response format", func(ctx context.Context) (any, error) {
		var person struct {
			Name string `json:"name"`
			Age  int    `json:"age"`
		}
		schema, err := jsonschema.GenerateSchemaForType(person)
		if err != nil {
			return nil, err
		}
		schema.Properties["name"] = jsonschema.Definition{Type: jsonschema.String, Enum: []string{"Tom", "Lily"}}
		r, err := c.CreateChatCompletion(ctx, goopenai.ChatCompletionRequest{Model: "m", Messages: user, MaxCompletionTokens: 64,
			ResponseFormat: &goopenai.ChatCompletionResponseFormat{Type: goopenai.ChatCompletionResponseFormatTypeJSONSchema,
				JSONSchema: &goopenai.ChatCompletionResponseFormatJSONSchema{Name: "person", Schema: schema, Strict: true}}})
		if err != nil {
			return nil, err
		}
		content := r.Choices[0].Message.Content
		return content, schema.Unmarshal(content, &person)
	})
	check("go-openai: JSON mode", func(ctx context.Context) (any, error) {
		r, err := c.CreateChatCompletion(ctx, goopenai.ChatCompletionRequest{Model: "m", Messages: user, MaxCompletionTokens: 200,
			ResponseFormat: &goopenai.ChatCompletionResponseFormat{Type: goopenai.ChatCompletionResponseFormatTypeJSONObject}})
		if err != nil {
			return nil, err
		}
		content := r.Choices[0].Message.Content
		var v map[string]any
		if r.Choices[0].FinishReason == goopenai.FinishReasonStop {
			return content, json.Unmarshal([]byte(content), &v)
		}
		return content, expect(strings.HasPrefix(strings.TrimSpace(content), "{"), content)
	})
	check("go-openai: CreateCompletion, and its stream", func(ctx context.Context) (any, error) {
		req := goopenai.CompletionRequest{Model: "m", Prompt: prompt, MaxTokens: 8, Seed: ptr(1), LogProbs: 2}
		whole, err := c.CreateCompletion(ctx, req)
		if err != nil {
			return nil, err
		}
		ch := whole.Choices[0]
		if err := expect(ch.Text != "" && ch.FinishReason == "length" && whole.Usage.CompletionTokens == 8 && len(ch.LogProbs.Tokens) == 8 && len(ch.LogProbs.TopLogprobs[0]) == 2, whole); err != nil {
			return nil, err
		}
		req.Stream = true
		req.LogProbs = 0
		st, err := c.CreateCompletionStream(ctx, req)
		if err != nil {
			return nil, err
		}
		defer st.Close()
		var text strings.Builder
		if err := recvAll(st.Recv, func(r goopenai.CompletionResponse) {
			for _, ch := range r.Choices {
				text.WriteString(ch.Text)
			}
		}); err != nil {
			return nil, err
		}
		return text.String(), expect(text.String() == ch.Text, text.String(), " != ", ch.Text)
	})
	check("go-openai: CreateEmbeddings", func(ctx context.Context) (any, error) {
		r, err := c.CreateEmbeddings(ctx, goopenai.EmbeddingRequest{Model: "m", Input: []string{"hello", "world"}})
		if err != nil {
			return nil, err
		}
		if err := expect(len(r.Data) == 2 && len(r.Data[0].Embedding) > 0 && r.Data[1].Index == 1, r); err != nil {
			return nil, err
		}
		b64, err := c.CreateEmbeddings(ctx, goopenai.EmbeddingRequest{Model: "m", Input: "hello", EncodingFormat: goopenai.EmbeddingEncodingFormatBase64, Dimensions: 8})
		if err != nil {
			return nil, err
		}
		return len(r.Data[0].Embedding), expect(len(b64.Data) == 1 && len(b64.Data[0].Embedding) == 8, b64)
	})
	check("go-openai: an error is an *APIError", func(ctx context.Context) (any, error) {
		_, err := c.CreateChatCompletion(ctx, goopenai.ChatCompletionRequest{Model: "m", Messages: user, MaxCompletionTokens: 8, N: -1, TopLogProbs: 50, LogProbs: true})
		var apiErr *goopenai.APIError
		if !errors.As(err, &apiErr) {
			return nil, fmt.Errorf("not an APIError: %v", err)
		}
		return apiErr, expect(apiErr.HTTPStatusCode == http.StatusBadRequest && apiErr.Message != "", apiErr)
	})
}

func langchain(base string) {
	getWeather := llms.Tool{Type: "function", Function: &llms.FunctionDefinition{
		Name: "get_weather", Description: "The weather in a city",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string", "enum": []string{"Paris", "London"}}}, "required": []string{"city"}},
	}}
	models := []struct {
		name string
		new  func() (llms.Model, error)
	}{
		{"openai", func() (llms.Model, error) {
			return lcopenai.New(lcopenai.WithBaseURL(base+"/v1"), lcopenai.WithToken("none"), lcopenai.WithModel("m"))
		}},
		{"ollama", func() (llms.Model, error) { return lcollama.New(lcollama.WithServerURL(base), lcollama.WithModel("m")) }},
		{"anthropic", func() (llms.Model, error) {
			return lcanthropic.New(lcanthropic.WithBaseURL(base+"/v1"), lcanthropic.WithToken("none"), lcanthropic.WithModel("m"))
		}},
		{"llamafile", func() (llms.Model, error) {
			os.Setenv("LLAMAFILE_HOST", base)
			return llamafile.New()
		}},
	}
	for _, m := range models {
		llm, err := m.new()
		check("langchaingo/"+m.name+": GenerateFromSinglePrompt, and streaming adds up to it", func(ctx context.Context) (any, error) {
			if err != nil {
				return nil, err
			}
			// llamafile's model sends no temperature 0 and no seed 0 (omitempty): a seed and top_k 1 make it greedy.
			whole, err := llms.GenerateFromSinglePrompt(ctx, llm, prompt, llms.WithMaxTokens(8), llms.WithTemperature(0), llms.WithSeed(7), llms.WithTopK(1))
			if err != nil {
				return nil, err
			}
			var chunks strings.Builder
			streamed, err := llms.GenerateFromSinglePrompt(ctx, llm, prompt, llms.WithMaxTokens(8), llms.WithTemperature(0), llms.WithSeed(7), llms.WithTopK(1),
				llms.WithStreamingFunc(func(_ context.Context, chunk []byte) error { chunks.Write(chunk); return nil }))
			if err != nil {
				return nil, err
			}
			return whole, expect(whole != "" && streamed == whole && chunks.String() == whole, whole, " | ", streamed, " | ", chunks.String())
		})
		if m.name == "llamafile" {
			continue
		}
		if m.name == "openai" {
			// Of the three, only langchaingo's openai model sends a tool choice.
			check("langchaingo/openai: a required tool call", func(ctx context.Context) (any, error) {
				if err != nil {
					return nil, err
				}
				r, err := llm.GenerateContent(ctx, []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, "Weather in Paris?")},
					llms.WithTools([]llms.Tool{getWeather}), llms.WithToolChoice("required"), llms.WithMaxTokens(256))
				if err != nil {
					return nil, err
				}
				ch := r.Choices[0]
				return ch.ToolCalls, expect(len(ch.ToolCalls) == 1 && ch.ToolCalls[0].FunctionCall.Name == "get_weather" &&
					json.Valid([]byte(ch.ToolCalls[0].FunctionCall.Arguments)) && ch.StopReason == "tool_calls", ch)
			})
		}
		if m.name != "ollama" { // langchaingo's ollama model sends no tools
			check("langchaingo/"+m.name+": tools in the prompt, a call and its result in the history", func(ctx context.Context) (any, error) {
				if err != nil {
					return nil, err
				}
				question := []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, "Weather in Paris?")}
				plain, err := llm.GenerateContent(ctx, question, llms.WithMaxTokens(1))
				if err != nil {
					return nil, err
				}
				withTools, err := llm.GenerateContent(ctx, question, llms.WithTools([]llms.Tool{getWeather}), llms.WithMaxTokens(1))
				if err != nil {
					return nil, err
				}
				call := llms.ToolCall{ID: "call_1", Type: "function", FunctionCall: &llms.FunctionCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}}
				history := append(question,
					llms.MessageContent{Role: llms.ChatMessageTypeAI, Parts: []llms.ContentPart{call}},
					llms.MessageContent{Role: llms.ChatMessageTypeTool, Parts: []llms.ContentPart{llms.ToolCallResponse{ToolCallID: call.ID, Name: "get_weather", Content: "sunny"}}})
				after, err := llm.GenerateContent(ctx, history, llms.WithTools([]llms.Tool{getWeather}), llms.WithMaxTokens(1))
				if err != nil {
					return nil, err
				}
				counts := []int{promptTokens(plain), promptTokens(withTools), promptTokens(after)}
				return counts, expect(counts[0] > 0 && counts[1] > counts[0] && counts[2] > counts[1], counts)
			})
		}
		if m.name == "anthropic" {
			continue // langchaingo's anthropic model has no JSON mode
		}
		check("langchaingo/"+m.name+": JSON mode", func(ctx context.Context) (any, error) {
			if err != nil {
				return nil, err
			}
			r, err := llm.GenerateContent(ctx, []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, prompt)}, llms.WithJSONMode(), llms.WithMaxTokens(48))
			if err != nil {
				return nil, err
			}
			content := r.Choices[0].Content
			return content, expect(strings.HasPrefix(strings.TrimSpace(content), "{"), content)
		})
	}
	check("langchaingo: embeddings through openai and ollama", func(ctx context.Context) (any, error) {
		var sizes []int
		for _, m := range models {
			if m.name == "anthropic" || m.name == "llamafile" {
				continue // no embeddings; llamafile's reads its own server's shape, not llama.cpp's
			}
			llm, err := m.new()
			if err != nil {
				return nil, err
			}
			e, err := embeddings.NewEmbedder(llm.(embeddings.EmbedderClient))
			if err != nil {
				return nil, err
			}
			vs, err := e.EmbedDocuments(ctx, []string{"hello", "world"})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", m.name, err)
			}
			if err := expect(len(vs) == 2 && len(vs[0]) > 0, m.name, vs); err != nil {
				return nil, err
			}
			sizes = append(sizes, len(vs[0]))
		}
		return sizes, nil
	})
}

func ollamaClient(base string) {
	u, err := url.Parse(base)
	if err != nil {
		panic(err)
	}
	c := ollama.NewClient(u, http.DefaultClient)
	no := false
	opts := map[string]any{"num_predict": 8, "temperature": 0, "seed": 1}
	check("ollama: Version, List, Show, ListRunning", func(ctx context.Context) (any, error) {
		v, err := c.Version(ctx)
		if err != nil {
			return nil, err
		}
		list, err := c.List(ctx)
		if err != nil {
			return nil, err
		}
		if err := expect(len(list.Models) == 1, list); err != nil {
			return nil, err
		}
		show, err := c.Show(ctx, &ollama.ShowRequest{Model: list.Models[0].Name})
		if err != nil {
			return nil, err
		}
		ps, err := c.ListRunning(ctx)
		if err != nil {
			return nil, err
		}
		return v, expect(show.Details.Format == "gguf" && len(ps.Models) == 1, show.Details, ps)
	})
	check("ollama: Chat, and its stream adds up to it", func(ctx context.Context) (any, error) {
		msgs := []ollama.Message{{Role: "user", Content: prompt}}
		var whole ollama.ChatResponse
		if err := c.Chat(ctx, &ollama.ChatRequest{Model: "m", Messages: msgs, Options: opts, Stream: &no}, func(r ollama.ChatResponse) error { whole = r; return nil }); err != nil {
			return nil, err
		}
		var text strings.Builder
		var last ollama.ChatResponse
		if err := c.Chat(ctx, &ollama.ChatRequest{Model: "m", Messages: msgs, Options: opts}, func(r ollama.ChatResponse) error {
			text.WriteString(r.Message.Content)
			last = r
			return nil
		}); err != nil {
			return nil, err
		}
		return whole.Message.Content, expect(whole.Done && whole.DoneReason == "length" && whole.EvalCount == 8 && text.String() == whole.Message.Content && last.Done, whole, " | ", text.String())
	})
	check("ollama: Generate with its context carried on", func(ctx context.Context) (any, error) {
		var first ollama.GenerateResponse
		if err := c.Generate(ctx, &ollama.GenerateRequest{Model: "m", Prompt: prompt, Raw: true, Options: opts, Stream: &no}, func(r ollama.GenerateResponse) error { first = r; return nil }); err != nil {
			return nil, err
		}
		if err := expect(first.Response != "" && len(first.Context) > 0, first); err != nil {
			return nil, err
		}
		var next ollama.GenerateResponse
		if err := c.Generate(ctx, &ollama.GenerateRequest{Model: "m", Prompt: " and", Context: first.Context, Raw: true, Options: opts, Stream: &no}, func(r ollama.GenerateResponse) error { next = r; return nil }); err != nil {
			return nil, err
		}
		return next.Response, expect(next.PromptEvalCount > 0 && len(next.Context) > len(first.Context), next)
	})
	check("ollama: tools in the prompt, a call and its result in the history", func(ctx context.Context) (any, error) {
		props := ollama.NewToolPropertiesMap()
		props.Set("city", ollama.ToolProperty{Type: ollama.PropertyType{"string"}, Enum: []any{"Paris", "London"}})
		tools := ollama.Tools{{Type: "function", Function: ollama.ToolFunction{Name: "get_weather", Description: "The weather in a city",
			Parameters: ollama.ToolFunctionParameters{Type: "object", Properties: props, Required: []string{"city"}}}}}
		question := []ollama.Message{{Role: "user", Content: "Weather in Paris?"}}
		args := ollama.NewToolCallFunctionArguments()
		args.Set("city", "Paris")
		history := append(question,
			ollama.Message{Role: "assistant", ToolCalls: []ollama.ToolCall{{Function: ollama.ToolCallFunction{Name: "get_weather", Arguments: args}}}},
			ollama.Message{Role: "tool", ToolName: "get_weather", Content: "sunny"})
		var counts []int
		for _, req := range []*ollama.ChatRequest{{Messages: question}, {Messages: question, Tools: tools}, {Messages: history, Tools: tools}} {
			req.Model, req.Stream, req.Options = "m", &no, map[string]any{"num_predict": 1}
			var r ollama.ChatResponse
			if err := c.Chat(ctx, req, func(x ollama.ChatResponse) error { r = x; return nil }); err != nil {
				return nil, err
			}
			counts = append(counts, r.PromptEvalCount)
		}
		return counts, expect(counts[0] > 0 && counts[1] > counts[0] && counts[2] > counts[1], counts)
	})
	check("ollama: a JSON schema format", func(ctx context.Context) (any, error) {
		var r ollama.ChatResponse
		schema := json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","maxLength":8},"age":{"type":"integer","minimum":0,"maximum":99}},"required":["name","age"]}`)
		if err := c.Chat(ctx, &ollama.ChatRequest{Model: "m", Messages: []ollama.Message{{Role: "user", Content: prompt}}, Format: schema, Options: map[string]any{"num_predict": 64}, Stream: &no}, func(x ollama.ChatResponse) error { r = x; return nil }); err != nil {
			return nil, err
		}
		var v struct {
			Name string
			Age  int
		}
		return r.Message.Content, json.Unmarshal([]byte(r.Message.Content), &v)
	})
	check("ollama: Embed", func(ctx context.Context) (any, error) {
		r, err := c.Embed(ctx, &ollama.EmbedRequest{Model: "m", Input: []string{"hello", "world"}})
		if err != nil {
			return nil, err
		}
		return len(r.Embeddings[0]), expect(len(r.Embeddings) == 2 && len(r.Embeddings[0]) > 0, r)
	})
	check("ollama: an error is a StatusError", func(ctx context.Context) (any, error) {
		err := c.Chat(ctx, &ollama.ChatRequest{Model: "m", Messages: []ollama.Message{{Role: "wizard", Content: prompt}}, Stream: &no}, func(ollama.ChatResponse) error { return nil })
		var se ollama.StatusError
		if !errors.As(err, &se) {
			return nil, fmt.Errorf("not a StatusError: %v", err)
		}
		return se, expect(se.StatusCode == http.StatusBadRequest && se.ErrorMessage != "", se)
	})
}

// promptTokens is the prompt's size in a langchaingo answer, whichever
// provider's name for it the answer uses.
func promptTokens(r *llms.ContentResponse) int {
	info := r.Choices[0].GenerationInfo
	n := 0
	for _, k := range []string{"PromptTokens", "InputTokens", "CacheReadInputTokens", "CacheCreationInputTokens"} {
		if v, ok := info[k].(int); ok {
			n += v
		}
	}
	return n
}

func ptr[T any](v T) *T { return &v }

// recvAll reads a go-openai stream to its end, handing each chunk to each.
func recvAll[T any](recv func() (T, error), each func(T)) error {
	for {
		r, err := recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		each(r)
	}
}
