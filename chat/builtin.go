package chat

import "slices"

// builtinTemplateNames are the names llama.cpp's llama_chat_apply_template
// accepts for its built-in (non-Jinja) chat formats, in the order its
// llama_chat_builtin_templates lists them (sorted), for the pinned v0.4.0.
var builtinTemplateNames = []string{
	"bailing",
	"bailing-think",
	"bailing2",
	"chatglm3",
	"chatglm4",
	"chatml",
	"command-r",
	"deepseek",
	"deepseek-ocr",
	"deepseek2",
	"deepseek3",
	"exaone-moe",
	"exaone3",
	"exaone4",
	"falcon3",
	"gemma",
	"gigachat",
	"glmedge",
	"gpt-oss",
	"granite",
	"granite-4.0",
	"granite-4.1",
	"grok-2",
	"hunyuan-dense",
	"hunyuan-moe",
	"hunyuan-vl",
	"kimi-k2",
	"llama2",
	"llama2-sys",
	"llama2-sys-bos",
	"llama2-sys-strip",
	"llama3",
	"llama4",
	"megrez",
	"minicpm",
	"mistral-v1",
	"mistral-v3",
	"mistral-v3-tekken",
	"mistral-v7",
	"mistral-v7-tekken",
	"monarch",
	"openchat",
	"orion",
	"pangu-embedded",
	"phi3",
	"phi4",
	"rwkv-world",
	"seed_oss",
	"smolvlm",
	"solar-open",
	"vicuna",
	"vicuna-orca",
	"yandex",
	"zephyr",
}

// BuiltinTemplateNames returns the names of llama.cpp's built-in chat
// formats, used when a model carries no Jinja template. The list is a
// copy; callers may change it.
func BuiltinTemplateNames() []string {
	return slices.Clone(builtinTemplateNames)
}

// IsBuiltinTemplate reports whether name is one of llama.cpp's built-in chat
// formats (an exact, case-sensitive match, as llama.cpp matches names).
func IsBuiltinTemplate(name string) bool {
	_, found := slices.BinarySearch(builtinTemplateNames, name)
	return found
}
