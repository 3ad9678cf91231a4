package server

import (
	"testing"

	"github.com/x/llama/server/internal/openai"
	"github.com/x/llama/server/internal/wire"
)

// FuzzGenerationRequest feeds arbitrary bodies to the request parsers of
// the generation endpoints: they must answer with an error or a task,
// never panic.
func FuzzGenerationRequest(f *testing.F) {
	for _, seed := range []string{
		`{"prompt":"Once upon a time","n_predict":4}`,
		`{"prompt":[1,2,"x",[3]],"logit_bias":{"12":false},"samplers":"kpt"}`,
		`{"prompt":["a",["b",5]],"logit_bias":[["x",1],[3,false]],"lora":[{"id":0,"scale":1}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"required"}`,
		`{"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":{}}}]}],"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"integer"}}}}`,
		`{"json_schema":{"type":"array","items":{"$ref":"#"}},"grammar":null,"stop":["a"],"seed":-1}`,
	} {
		f.Add(seed)
	}
	s, _ := newTestServer(f, Options{})
	inst := defaultInstance(f, s)
	f.Fuzz(func(t *testing.T, body string) {
		var c completionBody
		if wire.Decode([]byte(body), &c) != nil {
			return
		}
		_, _ = parseCompletionRequest(&c, inst)
		var o openai.CompletionBody
		_ = wire.Decode([]byte(body), &o)
		_, _ = parseOAICompletion(&o, inst)
		var ch openai.ChatBody
		_ = wire.Decode([]byte(body), &ch)
		_, _, _, _ = oaiChatRequest(inst, &ch, false)
		var rb respBody
		_ = wire.Decode([]byte(body), &rb)
		if req, err := rb.respToChat(inst.Server.mediaMarker); err == nil && oaiToChat(inst, &rb.ChatBody, req) == nil {
			_, _, _, _ = inst.startChat(req)
		}
	})
}
