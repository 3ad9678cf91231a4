package chat_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"strings"

	"github.com/x/llama"
	"github.com/x/llama/chat"
	"github.com/x/llama/engine"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/sampling"
)

// hermesChatML is ChatML that offers tools and writes calls in the Hermes
// <tool_call> format, for a model (stories260K) that has no template.
const hermesChatML = `{%- if tools %}<|im_start|>system
You can call these tools:
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}Answer with <tool_call>{"name": ..., "arguments": ...}</tool_call>.<|im_end|>
{% endif %}{%- for m in messages %}<|im_start|>{{ m.role }}
{% if m.tool_calls %}{% for tc in m.tool_calls %}<tool_call>
{{ {"name": tc.function.name, "arguments": tc.function.arguments} | tojson }}
</tool_call>{% endfor %}{% else %}{{ m.content }}{% endif %}<|im_end|>
{% endfor %}{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}`

// A tool call in process, as llama-server makes it: the conversation and
// its tools are rendered with the template, the tool-call grammar of the
// template's format constrains the engine's generation, and the output is
// parsed into the call, streamed as deltas and whole.
func ExampleTemplates_Prepare() {
	ctx := context.Background()
	model, err := llama.LoadModel(ctx, testenv.MustModel("stories260K.gguf"), llama.ModelOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer model.Close()
	eng, err := engine.New(model, engine.Options{Parallel: 1, Context: llama.ContextOptions{ContextSize: 1024, Threads: 1}})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()

	tmpl, err := chat.ParseTemplate(hermesChatML)
	if err != nil {
		log.Fatal(err)
	}
	templates := chat.ForModelWith(model, chat.NewJinjaRenderer(tmpl))
	plan, err := templates.Prepare(chat.Request{
		Messages: []chat.Message{{Role: chat.RoleUser, Content: "What is the weather in Paris?"}},
		Tools: []chat.Tool{{
			Name:       "get_weather",
			Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"enum":["Paris","Rome"]}},"required":["city"]}`),
		}},
		ToolChoice:        chat.ToolChoice{Mode: "required"}, // the model must call
		ParallelToolCalls: new(bool),                         // once
	})
	if err != nil {
		log.Fatal(err)
	}
	req := &engine.Request{Params: sampling.Defaults(), NPredict: 256, SlotID: -1}
	req.Params.Temperature = 0 // greedy
	if err := req.SetChat(model, plan); err != nil {
		log.Fatal(err)
	}

	stream := plan.NewStream()
	var text, args strings.Builder
	for ev, err := range eng.Generate(ctx, req) {
		if err != nil {
			log.Fatal(err)
		}
		text.WriteString(ev.Text)
		for _, call := range stream.Push(ev.Text).ToolCalls {
			args.WriteString(call.ArgumentsDelta)
		}
	}
	for _, call := range stream.Finish(false).ToolCalls {
		args.WriteString(call.ArgumentsDelta)
	}
	fmt.Println("streamed arguments:", args.String())

	msg := plan.ParseOutput(text.String())
	for _, call := range msg.ToolCalls {
		fmt.Printf("call %s(%s)\n", call.Name, call.Arguments)
	}
	// Output:
	// streamed arguments: { "city" : "Paris" }
	// call get_weather({ "city" : "Paris" })
}
