// The JavaScript clients against a running server.
//
// Usage: node clients.mjs BASE_URL
//
// Runs each check with the AI SDK (its OpenAI Responses and chat,
// OpenAI-compatible and Anthropic providers, and the community's Ollama
// provider), OpenAI's Node SDK and
// Ollama's JavaScript client (pinned in package-lock.json) against
// BASE_URL, a server of stories260K with a chat template in the Hermes
// tool-call format, and prints one JSON line per check: {name, ok,
// detail}. Exits 1 when any fails. The checks go through the clients' own
// helpers (multi-step tool loops, object streams, zod parsing), which read
// more of an answer's shape than raw requests do.

import { generateText, Output, stepCountIs, streamText, tool } from 'ai';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { createOllama } from 'ollama-ai-provider-v2';
import OpenAI from 'openai';
import { zodFunction, zodResponseFormat, zodTextFormat } from 'openai/helpers/zod';
import { Ollama } from 'ollama';
import { z } from 'zod';

const base = process.argv[2].replace(/\/$/, '');
const results = [];

async function check(name, f) {
  try {
    const detail = await f();
    results.push({ name, ok: true, detail: JSON.stringify(detail ?? null).slice(0, 300) });
  } catch (e) {
    results.push({ name, ok: false, detail: String(e?.stack ?? e).slice(0, 1500) + (e?.responseBody ? '\nbody: ' + String(e.responseBody).slice(0, 500) : '') });
  }
}

function assert(cond, what) {
  if (!cond) throw new Error('assertion failed: ' + JSON.stringify(what));
}

const PROMPT = 'Once upon a time';
const Person = z.object({ name: z.string().max(8), age: z.number().int().min(0).max(99) });
const City = z.object({ city: z.string().max(8) });
const user = (content) => [{ role: 'user', content }];

// The AI SDK, through each provider a llama.cpp user would pick.
const openaiProvider = createOpenAI({ baseURL: base + '/v1', apiKey: 'none' });
const providers = {
  'openai responses': openaiProvider('m'),
  'openai chat': openaiProvider.chat('m'),
  'openai-compatible': createOpenAICompatible({ name: 'llama', baseURL: base + '/v1', apiKey: 'none', supportsStructuredOutputs: true })('m'),
  anthropic: createAnthropic({ baseURL: base + '/v1', apiKey: 'none' })('m'),
};
const rethrow = ({ error }) => { throw error; };

for (const [name, model] of Object.entries(providers)) {
  await check(`ai-sdk/${name}: generateText, and streamText adds up to it`, async () => {
    const whole = await generateText({ model, prompt: PROMPT, maxOutputTokens: 8, temperature: 0, maxRetries: 0 });
    assert(whole.text && whole.finishReason === 'length' && whole.usage.outputTokens === 8, [whole.text, whole.finishReason, whole.usage]);
    const st = streamText({ model, prompt: PROMPT, maxOutputTokens: 8, temperature: 0, maxRetries: 0, onError: rethrow });
    let text = '';
    for await (const d of st.textStream) text += d;
    assert(text === whole.text, [text, whole.text]);
    assert((await st.finishReason) === 'length', await st.finishReason);
    return text;
  });

  await check(`ai-sdk/${name}: a forced tool runs, whole and streamed`, async () => {
    const weather = tool({ description: 'Weather of a city.', inputSchema: City, execute: async () => 'sunny' });
    const whole = await generateText({ model, prompt: 'Weather in Paris?', tools: { weather }, toolChoice: 'required', maxOutputTokens: 200, temperature: 0, maxRetries: 0 });
    assert(whole.toolCalls.length === 1 && whole.toolCalls[0].toolName === 'weather' && typeof whole.toolCalls[0].input.city === 'string', whole.toolCalls);
    assert(whole.toolResults[0]?.output === 'sunny' && whole.finishReason === 'tool-calls', [whole.toolResults, whole.finishReason]);
    const st = streamText({ model, prompt: 'Weather in Paris?', tools: { weather }, toolChoice: { type: 'tool', toolName: 'weather' }, maxOutputTokens: 200, temperature: 0, maxRetries: 0, onError: rethrow });
    for await (const _ of st.fullStream);
    const calls = await st.toolCalls;
    assert(calls.length === 1 && JSON.stringify(calls[0].input) === JSON.stringify(whole.toolCalls[0].input), [calls, whole.toolCalls]);
    return calls[0].input;
  });

  await check(`ai-sdk/${name}: two steps, the tool's result sent back`, async () => {
    const seen = [];
    const weather = tool({ description: 'Weather of a city.', inputSchema: City, execute: async ({ city }) => { seen.push(city); return 'sunny'; } });
    const r = await generateText({
      model, prompt: 'Weather in Paris?', tools: { weather }, stopWhen: stepCountIs(2), maxOutputTokens: 100, temperature: 0, maxRetries: 0,
      prepareStep: ({ stepNumber }) => ({ toolChoice: stepNumber === 0 ? 'required' : 'none' }), include: { requestBody: true },
    });
    assert(r.steps.length === 2 && seen.length === 1 && r.text, [r.steps.length, seen, r.text]);
    assert(r.steps[1].request.body !== undefined, 'the second request');
    return [seen, r.text.slice(0, 40)];
  });

  // (The Anthropic provider makes the output a tool of its own, which the
  // model must call or not: the model's choice, not the server's.)
  if (name !== 'anthropic') await check(`ai-sdk/${name}: tools and an object output`, async () => {
    // Both go in each step: the first must call, the next may call
    // again or answer in the schema (here it answers).
    const seen = [];
    const weather = tool({ description: 'Weather of a city.', inputSchema: City, execute: async ({ city }) => { seen.push(city); return 'sunny'; } });
    const r = await generateText({
      model, output: Output.object({ schema: Person }), prompt: 'Weather in Paris?', tools: { weather }, stopWhen: stepCountIs(3),
      maxOutputTokens: 200, temperature: 0, maxRetries: 0,
      prepareStep: ({ stepNumber }) => ({ toolChoice: stepNumber === 0 ? 'required' : 'auto' }),
    });
    assert(seen.length === 1 && Person.safeParse(r.output).success, [seen, r.output, r.text]);
    return [seen, r.output];
  });

  await check(`ai-sdk/${name}: an object output, whole and streamed the same`, async () => {
    const output = Output.object({ schema: Person });
    const whole = await generateText({ model, output, prompt: 'A person:', maxOutputTokens: 200, temperature: 0, maxRetries: 0 });
    const st = streamText({ model, output, prompt: 'A person:', maxOutputTokens: 200, temperature: 0, maxRetries: 0, onError: rethrow });
    for await (const _ of st.partialOutputStream);
    const streamed = await st.output;
    assert(JSON.stringify(streamed) === JSON.stringify(whole.output), [streamed, whole.output]);
    return whole.output;
  });
}

// The AI SDK's Ollama provider (the community's) sends temperature and
// max_output_tokens beside Ollama's "options": they must count.
const ollamaModel = createOllama({ baseURL: base + '/api' })('m');

await check('ai-sdk/ollama: the settings count, and streamText adds up to generateText', async () => {
  const whole = await generateText({ model: ollamaModel, prompt: PROMPT, maxOutputTokens: 8, temperature: 0, maxRetries: 0 });
  assert(whole.finishReason === 'length' && whole.usage.outputTokens === 8, [whole.finishReason, whole.usage]);
  const st = streamText({ model: ollamaModel, prompt: PROMPT, maxOutputTokens: 8, temperature: 0, maxRetries: 0, onError: rethrow });
  let text = '';
  for await (const d of st.textStream) text += d;
  assert(text === whole.text, [text, whole.text]);
  const obj = await generateText({ model: ollamaModel, output: Output.object({ schema: Person }), prompt: 'A person:', maxOutputTokens: 200, temperature: 0, maxRetries: 0 });
  return [text, obj.output];
});

// OpenAI's Node SDK and its helpers.
const oai = new OpenAI({ baseURL: base + '/v1', apiKey: 'none', maxRetries: 0 });

await check('openai-node/chat: parse with a zod response format', async () => {
  const r = await oai.chat.completions.parse({ model: 'm', messages: user('A person:'), response_format: zodResponseFormat(Person, 'person'), max_tokens: 200, temperature: 0 });
  const p = r.choices[0].message.parsed;
  assert(Person.safeParse(p).success, p);
  return p;
});

await check('openai-node/chat: the stream helper accumulates a forced zod tool call', async () => {
  const st = oai.chat.completions.stream({ model: 'm', messages: user('Weather?'), tools: [zodFunction({ name: 'weather', parameters: City })], tool_choice: 'required', parallel_tool_calls: false, max_tokens: 200, temperature: 0 });
  for await (const _ of st);
  const c = (await st.finalChatCompletion()).choices[0];
  const calls = c.message.tool_calls;
  assert(c.finish_reason === 'tool_calls' && calls.length === 1 && typeof calls[0].function.parsed_arguments.city === 'string', c);
  return calls[0].function.parsed_arguments;
});

await check('openai-node/chat: runTools calls the function and sends its result', async () => {
  const seen = [];
  const runner = oai.chat.completions.runTools({
    model: 'm', messages: user('Weather?'), max_tokens: 100, temperature: 0, tool_choice: 'required',
    tools: [{ type: 'function', function: { name: 'weather', parameters: z.toJSONSchema(City), parse: JSON.parse, function: async ({ city }) => { seen.push(city); return 'sunny'; } } }],
  }, { maxChatCompletions: 2 });
  await runner.done();
  const roles = runner.messages.map((m) => m.role);
  assert(seen.length >= 1 && roles.includes('tool'), [seen, roles]);
  return roles;
});

await check('openai-node/responses: parse with a zod text format', async () => {
  const r = await oai.responses.parse({ model: 'm', input: 'A person:', text: { format: zodTextFormat(Person, 'person') }, max_output_tokens: 200, temperature: 0 });
  assert(Person.safeParse(r.output_parsed).success, r.output_parsed);
  return r.output_parsed;
});

await check('openai-node/responses: the stream helper adds up to the answer', async () => {
  const whole = await oai.responses.create({ model: 'm', input: PROMPT, max_output_tokens: 8, temperature: 0 });
  const st = oai.responses.stream({ model: 'm', input: PROMPT, max_output_tokens: 8, temperature: 0 });
  const kinds = [];
  for await (const ev of st) kinds.push(ev.type);
  const got = await st.finalResponse();
  assert(got.output_text === whole.output_text, [got.output_text, whole.output_text]);
  assert(kinds[0] === 'response.created' && kinds.at(-1) === 'response.completed', kinds);
  return got.output_text;
});

// Ollama's JavaScript client.
const oll = new Ollama({ host: base });
const O0 = { num_predict: 8, temperature: 0 };

await check('ollama-js: list and show describe the served model', async () => {
  const name = (await oll.list()).models[0].model;
  const info = await oll.show({ model: name });
  assert(info.capabilities.includes('completion') && info.model_info['general.architecture'] === 'llama', info);
  return name;
});

await check('ollama-js: chat, and a stream adds up to it', async () => {
  const whole = await oll.chat({ model: 'm', messages: user(PROMPT), options: O0 });
  let text = '';
  let last;
  for await (const part of await oll.chat({ model: 'm', messages: user(PROMPT), options: O0, stream: true })) {
    text += part.message.content;
    last = part;
  }
  assert(text === whole.message.content && whole.done_reason === 'length' && last.done && last.eval_count === 8, [text, whole, last]);
  return text;
});

await check('ollama-js: format with a zod schema', async () => {
  const r = await oll.chat({ model: 'm', messages: user('A person:'), format: z.toJSONSchema(Person), options: { num_predict: 200, temperature: 0 } });
  return Person.parse(JSON.parse(r.message.content));
});

for (const r of results) console.log(JSON.stringify(r));
process.exit(results.every((r) => r.ok) ? 0 : 1);
