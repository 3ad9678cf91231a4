package chat

// BuiltinJinja returns the Jinja source equivalent to llama.cpp's built-in
// (non-Jinja) chat format name, for the common names of
// BuiltinTemplateNames, and whether there is one. Resolver.For uses them
// for a template given by name, so that these formats support tools; the
// other names render through Resolver.Native.
func BuiltinJinja(name string) (string, bool) {
	src, ok := builtinJinja[name]
	return src, ok
}

// builtinJinja are the sources of BuiltinJinja (never written).
var builtinJinja = map[string]string{
	// chatml is, character for character, the template llama.cpp v0.4.0
	// falls back to (and reports in /props) for a model without one.
	"chatml": "{%- for message in messages -%}\n" +
		"  {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}\n" +
		"{%- endfor -%}\n" +
		"{%- if add_generation_prompt -%}\n" +
		"  {{- '<|im_start|>assistant\n' -}}\n" +
		"{%- endif -%}",

	"llama2": `{%- if messages[0]['role'] == 'system' -%}
{%- set system = messages[0]['content'] -%}{%- set loop_messages = messages[1:] -%}
{%- else -%}{%- set system = '' -%}{%- set loop_messages = messages -%}{%- endif -%}
{%- for message in loop_messages -%}
{%- if message['role'] == 'user' -%}
{%- if loop.first and system -%}
{{- '[INST] <<SYS>>\n' + system + '\n<</SYS>>\n\n' + message['content'] + ' [/INST]' -}}
{%- else -%}
{{- '[INST] ' + message['content'] + ' [/INST]' -}}
{%- endif -%}
{%- elif message['role'] == 'assistant' -%}
{{- message['content'] + '</s>' -}}
{%- endif -%}
{%- endfor -%}`,

	"llama3": `{%- for message in messages -%}
{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
{%- endif -%}`,

	"mistral-v1": `{%- for message in messages -%}
{%- if message['role'] == 'system' -%}
{{- ' [INST] ' + message['content'] + '\n\n' -}}
{%- elif message['role'] == 'user' -%}
{{- ' [INST] ' + message['content'] + ' [/INST]' -}}
{%- else -%}
{{- ' ' + message['content'] + '</s>' -}}
{%- endif -%}
{%- endfor -%}`,

	"mistral-v3": `{%- for message in messages -%}
{%- if message['role'] == 'system' -%}
{{- '[INST] ' + message['content'] + '\n\n' -}}
{%- elif message['role'] == 'user' -%}
{{- '[INST] ' + message['content'] + '[/INST]' -}}
{%- else -%}
{{- ' ' + message['content'] + '</s>' -}}
{%- endif -%}
{%- endfor -%}`,

	"mistral-v7": `{%- for message in messages -%}
{%- if message['role'] == 'system' -%}
{{- '[SYSTEM_PROMPT] ' + message['content'] + '[/SYSTEM_PROMPT]' -}}
{%- elif message['role'] == 'user' -%}
{{- '[INST] ' + message['content'] + '[/INST]' -}}
{%- else -%}
{{- ' ' + message['content'] + '</s>' -}}
{%- endif -%}
{%- endfor -%}`,

	"phi3": `{%- for message in messages -%}
{{- '<|' + message['role'] + '|>\n' + message['content'] + '<|end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|assistant|>\n' -}}
{%- endif -%}`,

	"phi4": `{%- for message in messages -%}
{{- '<|im_start|>' + message['role'] + '<|im_sep|>' + message['content'] + '<|im_end|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant<|im_sep|>' -}}
{%- endif -%}`,

	"gemma": `{%- set system = '' -%}
{%- for message in messages -%}
{%- if message['role'] == 'system' -%}
{%- set system = system + message['content'] + '\n\n' -%}
{%- else -%}
{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}
{{- '<start_of_turn>' + role + '\n' -}}
{%- if system and role == 'user' -%}{{- system -}}{%- set system = '' -%}{%- endif -%}
{{- message['content'] | trim + '<end_of_turn>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<start_of_turn>model\n' -}}
{%- endif -%}`,

	"zephyr": `{%- for message in messages -%}
{{- '<|' + message['role'] + '|>\n' + message['content'] + '<|endoftext|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|assistant|>\n' -}}
{%- endif -%}`,

	"deepseek": `{%- for message in messages -%}
{%- if message['role'] == 'user' -%}
{{- '### Instruction:\n' + message['content'] + '\n' -}}
{%- elif message['role'] == 'assistant' -%}
{{- '### Response:\n' + message['content'] + '\n<|EOT|>\n' -}}
{%- else -%}
{{- message['content'] -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '### Response:\n' -}}
{%- endif -%}`,

	"deepseek2": `{%- for message in messages -%}
{%- if message['role'] == 'system' -%}
{{- message['content'] + '\n\n' -}}
{%- elif message['role'] == 'user' -%}
{{- 'User: ' + message['content'] + '\n\n' -}}
{%- elif message['role'] == 'assistant' -%}
{{- 'Assistant: ' + message['content'] + eos_token -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- 'Assistant:' -}}
{%- endif -%}`,

	"deepseek3": `{%- for message in messages -%}
{%- if message['role'] == 'system' -%}
{{- message['content'] + '\n\n' -}}
{%- elif message['role'] == 'user' -%}
{{- '<｜User｜>' + message['content'] -}}
{%- elif message['role'] == 'assistant' -%}
{{- '<｜Assistant｜>' + message['content'] + '<｜end▁of▁sentence｜>' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<｜Assistant｜>' -}}
{%- endif -%}`,

	"vicuna": `{%- for message in messages -%}
{%- if message['role'] == 'system' -%}
{{- message['content'] + '\n' -}}
{%- elif message['role'] == 'user' -%}
{{- 'USER: ' + message['content'] + '\n' -}}
{%- elif message['role'] == 'assistant' -%}
{{- 'ASSISTANT: ' + message['content'] + '</s>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- 'ASSISTANT:' -}}
{%- endif -%}`,

	"openchat": `{{- bos_token -}}
{%- for message in messages -%}
{%- if message['role'] == 'system' -%}
{{- message['content'] + '<|end_of_turn|>' -}}
{%- elif message['role'] == 'user' -%}
{{- 'GPT4 Correct User: ' + message['content'] + '<|end_of_turn|>' -}}
{%- elif message['role'] == 'assistant' -%}
{{- 'GPT4 Correct Assistant: ' + message['content'] + '<|end_of_turn|>' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- 'GPT4 Correct Assistant:' -}}
{%- endif -%}`,

	"command-r": `{%- for message in messages -%}
{%- set role = {'system': 'SYSTEM', 'user': 'USER', 'assistant': 'CHATBOT'}[message['role']] -%}
{{- '<|START_OF_TURN_TOKEN|><|' + role + '_TOKEN|>' + message['content'] | trim + '<|END_OF_TURN_TOKEN|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' -}}
{%- endif -%}`,

	"falcon3": `{%- for message in messages -%}
{{- '<|' + message['role'] + '|>\n' + message['content'] + '\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|assistant|>\n' -}}
{%- endif -%}`,

	"granite": `{%- for message in messages -%}
{{- '<|start_of_role|>' + message['role'] + '<|end_of_role|>' + message['content'] + '<|end_of_text|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|start_of_role|>assistant<|end_of_role|>' -}}
{%- endif -%}`,

	"monarch": `{{- bos_token -}}
{%- for message in messages -%}
{{- ('' if loop.first else bos_token) + message['role'] + '\n' + message['content'] + eos_token -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- bos_token + 'assistant\n' -}}
{%- endif -%}`,
}
