package chat

import (
	"encoding/json"
	"fmt"
	"testing"
)

// BenchmarkPrepare measures a chat's preparation on a thinking template
// (Qwen3's) with many tools: alone, and with a response format, whose
// schema goes into the tools' grammar and whose grammar lets the model
// think first.
func BenchmarkPrepare(b *testing.B) {
	tmpls := realTemplate(b, "Qwen-Qwen3-0.6B.jinja")
	schema := json.RawMessage(`{"type":"object","properties":{"answer":{"type":"integer"},"why":{"type":"string"}},"required":["answer"]}`)
	for _, n := range []int{1, 64, 512} {
		tools := make([]Tool, n)
		for i := range tools {
			tools[i] = Tool{Name: fmt.Sprintf("tool_%d", i), Description: "Looks a thing up.",
				Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}`)}
		}
		for _, withSchema := range []bool{false, true} {
			req := Request{Messages: []Message{{Role: RoleUser, Content: "Weather in Oslo?"}}, Tools: tools}
			name := fmt.Sprintf("tools=%d", n)
			if withSchema {
				req.Schema, name = schema, name+"/schema"
			}
			b.Run(name, func(b *testing.B) {
				for b.Loop() {
					if _, err := tmpls.Prepare(req); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
