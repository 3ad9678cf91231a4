// Command tools runs a tool-calling loop: the model is offered Go
// functions, its output is constrained to a well-formed call by a grammar
// (tool_choice "required" on the first turn), the call is parsed and run,
// its result goes back into the conversation, and the model answers.
//
//	go run ./examples/tools -m model.gguf
//
// Each turn is prepared by package chat as llama-server prepares a chat
// request (chat.Templates.Prepare): the prompt, the grammar of the
// template's tool-call format, and the parser of the answer. Models with a
// chat template are prompted through it and their own tool-call format is
// used; models without one (stories260K) get ChatML and the Hermes
// <tool_call> format, which shows the mechanics even though such a model
// has no idea what a tool is.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/x/llama"
	"github.com/x/llama/chat"
	"github.com/x/llama/engine"
)

// chatML is the template used when a model has none.
const chatML = `{%- if tools %}<|im_start|>system
You can call these tools:
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}Answer with <tool_call>{"name": ..., "arguments": ...}</tool_call>.<|im_end|>
{% endif %}{%- for m in messages %}<|im_start|>{{ m.role }}
{% if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}}</tool_call>{% endfor %}{% else %}{{ m.content }}{% endif %}<|im_end|>
{% endfor %}{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}`

// A tool is a Go function with a JSON Schema for its arguments.
type tool struct {
	chat.Tool
	run func(args json.RawMessage) (string, error)
}

var weatherSchema = json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","maxLength":20}},"required":["city"],"additionalProperties":false}`)

func tools() []tool {
	return []tool{{
		Tool: chat.Tool{Name: "get_weather", Description: "Current weather in a city", Parameters: weatherSchema},
		run: func(args json.RawMessage) (string, error) {
			var a struct {
				City string `json:"city"`
			}
			if err := json.Unmarshal(args, &a); err != nil {
				return "", err
			}
			return fmt.Sprintf(`{"city": %q, "temperature_c": 21, "sky": "sunny"}`, a.City), nil
		},
	}}
}

func main() {
	model := flag.String("m", "", "GGUF model")
	question := flag.String("q", "What is the weather in Paris?", "the user's question")
	seed := flag.Uint("seed", 1, "seed")
	threads := flag.Int("t", 0, "threads (0: all CPUs)")
	flag.Parse()
	// Installing the library is explicit: this program installs it into
	// the cache folder on its first run (with a progress bar on stderr).
	if err := llama.Init(llama.LibraryOptions{Install: true}); err != nil {
		fmt.Fprintln(os.Stderr, "tools:", err)
		os.Exit(1)
	}
	if err := run(context.Background(), os.Stdout, *model, *question, uint32(*seed), *threads); err != nil {
		fmt.Fprintln(os.Stderr, "tools:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, w io.Writer, path, question string, seed uint32, threads int) error {
	m, err := llama.LoadModel(ctx, path, llama.ModelOptions{})
	if err != nil {
		return err
	}
	defer m.Close()
	lctx, err := m.NewContext(llama.ContextOptions{ContextSize: 2048, Threads: threads})
	if err != nil {
		return err
	}
	// The model's template, or ChatML with the Hermes format; package
	// chat prepares each turn as llama-server does (prompt, tool-call
	// grammar, parser of the answer), with no server.
	src, ok := m.ChatTemplate("")
	if !ok {
		src = chatML
	}
	tmpl, err := chat.ParseTemplate(src)
	if err != nil {
		return err
	}
	templates := engine.ChatTemplatesFor(m, chat.NewJinjaRenderer(tmpl))
	ts := tools()
	var decls []chat.Tool
	byName := map[string]tool{}
	for _, t := range ts {
		decls = append(decls, t.Tool)
		byName[t.Name] = t
	}
	msgs := []chat.Message{{Role: chat.RoleUser, Content: question}}
	oneCall := false // one call per turn
	for turn := 0; turn < 4; turn++ {
		choice := chat.ToolChoice{Mode: "required"}
		if turn > 0 {
			choice.Mode = "none" // answer with the tool's result
		}
		plan, err := templates.Prepare(chat.Request{Messages: msgs, Tools: decls, ToolChoice: choice, ParallelToolCalls: &oneCall})
		if err != nil {
			return err
		}
		samplers := []llama.Sampler{llama.TopK(40), llama.Temp(0.7), llama.Dist(seed)}
		if plan.Grammar != "" { // "required": the grammar applies from the first token
			g, err := llama.ParseGrammar(ctx, plan.Grammar, "root")
			if err != nil {
				return err
			}
			samplers = append([]llama.Sampler{g.Sampler()}, samplers...)
		}
		chain, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, samplers...)
		if err != nil {
			return err
		}
		var out strings.Builder
		for p, err := range lctx.Generate(ctx, plan.Prompt, llama.GenerateOptions{MaxTokens: 128, Sampler: chain, Stop: []string{"<|im_end|>"}, RenderSpecial: true}) {
			if err != nil {
				chain.Close()
				return err
			}
			out.WriteString(p.Text)
		}
		chain.Close()
		reply := plan.ParseOutput(out.String())
		msgs = append(msgs, reply)
		if len(reply.ToolCalls) == 0 {
			fmt.Fprintf(w, "assistant: %s\n", reply.Content)
			return nil
		}
		for i, call := range reply.ToolCalls {
			t, ok := byName[call.Name]
			if !ok {
				return fmt.Errorf("model called unknown tool %q", call.Name)
			}
			result, err := t.run(json.RawMessage(call.Arguments))
			if err != nil {
				return fmt.Errorf("tool %s: %w", call.Name, err)
			}
			fmt.Fprintf(w, "call %s(%s) -> %s\n", call.Name, call.Arguments, result)
			id := call.ID
			if id == "" {
				id = fmt.Sprintf("call_%d_%d", turn, i)
				msgs[len(msgs)-1].ToolCalls[i].ID = id
			}
			msgs = append(msgs, chat.Message{Role: chat.RoleTool, ToolCallID: id, Name: call.Name, Content: result})
		}
	}
	return fmt.Errorf("no answer after 4 turns")
}
