package chat

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDetectFormat(t *testing.T) {
	want := map[string]Format{
		"Apertus-8B-Instruct.jinja":                           FormatApertus,
		"CohereForAI-c4ai-command-r-plus-tool_use.jinja":      FormatCommandRPlus,
		"deepseek-ai-DeepSeek-V3.2.jinja":                     FormatDeepSeekV32,
		"deepseek-ai-DeepSeek-V4.jinja":                       FormatDeepSeekV32,
		"deepseek-ai-DeepSeek-V4-Flash-0731.jinja":            FormatDeepSeekV32,
		"LFM2-8B-A1B.jinja":                                   FormatLFM2,
		"LFM2.5-8B-A1B.jinja":                                 FormatLFM2,
		"LFM2.5-Instruct.jinja":                               FormatLFM2,
		"Bielik-11B-v3.0-Instruct.jinja":                      FormatHermes2Pro,
		"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": FormatCommandR7B,
		"Cohere2MoE.jinja":                                    FormatCohere2MoE,
		"openbmb-MiniCPM5-1B.jinja":                           FormatMiniCPM5,
		"upstage-Solar-Open-100B.jinja":                       FormatSolarOpen,
		"tencent-Hy3.jinja":                                   FormatHunyuan3,
		"GLM-4.6.jinja":                                       FormatGLM45,
		"GLM-4.7-Flash.jinja":                                 FormatGLM45,
		"Kimi-K2-Instruct.jinja":                              FormatKimiK2,
		"Kimi-K3.jinja":                                       FormatKimiK3,
		"Kimi-K2-Thinking.jinja":                              FormatKimiK2,
		"moonshotai-Kimi-K2.jinja":                            FormatKimiK2,
		"MiMo-VL.jinja":                                       FormatHermes2Pro,
		"Mistral-Small-3.2-24B-Instruct-2506.jinja":           FormatMagistral,
		"mistralai-Ministral-3-14B-Reasoning-2512.jinja":      FormatMagistral,
		"unsloth-mistral-Devstral-Small-2507.jinja":           FormatMagistral,
		"mistralai-Mistral-Nemo-Instruct-2407.jinja":          FormatMistralNemo,
		"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja":           FormatQwen3Coder,
		"NVIDIA-Nemotron-Nano-v2.jinja":                       FormatNemotronV2,
		"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": FormatHermes2Pro,
		"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja":   FormatHermes2Pro,
		"Qwen-QwQ-32B.jinja":                                  FormatHermes2Pro,
		"Qwen-Qwen2.5-7B-Instruct.jinja":                      FormatHermes2Pro,
		"Qwen-Qwen3-0.6B.jinja":                               FormatHermes2Pro,
		"Qwen3-Coder.jinja":                                   FormatQwen3Coder,
		"Qwen3.5-4B.jinja":                                    FormatQwen3Coder,
		"StepFun3.5-Flash.jinja":                              FormatQwen3Coder,
		"Reka-Edge.jinja":                                     FormatHermes2Pro,
		"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja":      FormatDeepSeekR1,
		"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja":      FormatDeepSeekR1,
		"llama-cpp-deepseek-r1.jinja":                         FormatDeepSeekR1,
		"deepseek-ai-DeepSeek-V3.1.jinja":                     FormatDeepSeekV31,
		"fireworks-ai-llama-3-firefunction-v2.jinja":          FormatFireFunctionV2,
		"google-gemma-2-2b-it.jinja":                          FormatContentOnly,
		"google-gemma-4-31B-it.jinja":                         FormatGemma,
		"google-gemma-4-31B-it-interleaved.jinja":             FormatGemma,
		"ibm-granite-granite-3.3-2B-Instruct.jinja":           FormatContentOnly,
		"ibm-granite-granite-4.0.jinja":                       FormatHermes2Pro,
		"meetkai-functionary-medium-v3.1.jinja":               FormatFunctionaryV31,
		"meetkai-functionary-medium-v3.2.jinja":               FormatFunctionaryV32,
		"meta-llama-Llama-3.1-8B-Instruct.jinja":              FormatLlama3x,
		"meta-llama-Llama-3.2-3B-Instruct.jinja":              FormatLlama3x,
		"meta-llama-Llama-3.3-70B-Instruct.jinja":             FormatLlama3x,
		"microsoft-Phi-3.5-mini-instruct.jinja":               FormatContentOnly,
		"openai-gpt-oss-120b.jinja":                           FormatGPTOSS,
		"unsloth-Apriel-1.5.jinja":                            FormatApriel,
		"Apriel-1.6-15b-Thinker-fixed.jinja":                  FormatApriel,
		"ByteDance-Seed-OSS.jinja":                            FormatSeedOSS,
		"MiniMax-M2.jinja":                                    FormatMiniMaxM2,
	}
	dir := templatesDir(t)
	for name, f := range want {
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join(dir, name))
			require.NoError(t, err)
			assert.Equal(t, f.String(), DetectFormat(string(src)).String())
		})
	}
	// Every template is classified without panicking.
	files, err := filepath.Glob(filepath.Join(dir, "*.jinja"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		src, err := os.ReadFile(file)
		require.NoError(t, err)
		assert.NotEmpty(t, DetectFormat(string(src)).String())
	}
}

func TestFormatStrings(t *testing.T) {
	seen := map[string]bool{}
	for f := Format(0); f < formatCount; f++ {
		s := f.String()
		assert.NotContains(t, s, "Format(")
		assert.False(t, seen[s], "duplicate name %s", s)
		seen[s] = true
	}
	assert.Equal(t, "Format(99)", Format(99).String())
}

func TestParseReasoningFormat(t *testing.T) {
	for in, want := range map[string]ReasoningFormat{"none": ReasoningNone, "deepseek": ReasoningDeepSeek, "deepseek-legacy": ReasoningDeepSeek, "auto": ReasoningAuto} {
		got, err := ParseReasoningFormat(in)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	for _, r := range []ReasoningFormat{ReasoningNone, ReasoningDeepSeek, ReasoningAuto} {
		got, err := ParseReasoningFormat(r.String())
		require.NoError(t, err)
		assert.Equal(t, r, got)
	}
	_, err := ParseReasoningFormat("bogus")
	assert.ErrorContains(t, err, "chat: ")
}
