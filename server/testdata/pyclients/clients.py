"""The official Python clients against a running server.

Usage: clients.py BASE_URL

Runs each check with OpenAI's, Anthropic's and Ollama's Python clients and
OpenAI's Agents SDK (pinned in requirements.txt) against BASE_URL, a server of
stories260K with a chat template in the Hermes tool-call format, and prints
one JSON line per check: {"name", "ok", "detail"}. Exits 1 when any fails.
The checks use the clients' own helpers (stream accumulators, parse with a
pydantic model, the agent runner), which read more of an answer's shape
than the raw endpoints' tests do.
"""

import asyncio
import json
import sys
import traceback

import anthropic
import ollama
import openai
import pydantic
from agents import (Agent, ModelSettings, OpenAIChatCompletionsModel,
                    OpenAIResponsesModel, Runner, function_tool,
                    set_tracing_disabled)

BASE = sys.argv[1].rstrip("/")
oai = openai.OpenAI(base_url=BASE + "/v1", api_key="none", max_retries=0)
ant = anthropic.Anthropic(base_url=BASE, api_key="none", max_retries=0)
oll = ollama.Client(host=BASE)
set_tracing_disabled(True)

PROMPT = "Once upon a time"
CITY = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}},
        "required": ["city"], "additionalProperties": False}
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city.",
                                            "parameters": CITY, "strict": True}}
RWEATHER = {"type": "function", "name": "get_weather", "description": "Weather of a city.",
            "parameters": CITY, "strict": True}
AWEATHER = {"name": "get_weather", "description": "Weather of a city.", "input_schema": CITY}


class Person(pydantic.BaseModel):
    name: str = pydantic.Field(max_length=8)
    age: int = pydantic.Field(ge=0, le=99)


class Pet(pydantic.BaseModel):
    """Without constraints: Anthropic's SDK moves a schema's length and
    range limits into descriptions before sending it."""
    name: str
    legs: int


results = []


def check(name):
    def wrap(f):
        try:
            detail = f()
            if asyncio.iscoroutine(detail):
                detail = asyncio.run(detail)
            results.append({"name": name, "ok": True, "detail": repr(detail)[:300]})
        except Exception as ex:  # a failed check, not the end of the run
            results.append({"name": name, "ok": False,
                            "detail": "".join(traceback.format_exception(ex))[-1500:]})
        return f
    return wrap


def user(text):
    return [{"role": "user", "content": text}]


# OpenAI chat completions.

@check("openai/chat: create")
def _():
    r = oai.chat.completions.create(model="m", messages=user(PROMPT), max_tokens=8, temperature=0)
    c = r.choices[0]
    assert c.finish_reason == "length", c
    assert isinstance(c.message.content, str) and c.message.content, c
    assert r.usage.completion_tokens == 8, r.usage
    return c.message.content


@check("openai/chat: a stream adds up to the answer")
def _():
    want = oai.chat.completions.create(model="m", messages=user(PROMPT), max_tokens=8, temperature=0)
    text, usage = "", None
    for ch in oai.chat.completions.create(model="m", messages=user(PROMPT), max_tokens=8, temperature=0,
                                          stream=True, stream_options={"include_usage": True}):
        if ch.choices:
            text += ch.choices[0].delta.content or ""
        if ch.usage:
            usage = ch.usage
    assert text == want.choices[0].message.content, (text, want)
    assert usage and usage.completion_tokens == 8, usage
    return text


@check("openai/chat: the stream helper accumulates a forced tool call")
def _():
    with oai.chat.completions.stream(model="m", messages=user("Weather in Paris?"), tools=[WEATHER],
                                     tool_choice="required", parallel_tool_calls=False,
                                     max_tokens=200, temperature=0) as st:
        for _ in st:
            pass
        c = st.get_final_completion().choices[0]
    assert c.finish_reason == "tool_calls", c
    calls = c.message.tool_calls
    assert len(calls) == 1 and calls[0].function.name == "get_weather", calls
    assert isinstance(calls[0].function.parsed_arguments["city"], str), calls
    return calls[0].function.arguments


@check("openai/chat: parse with a pydantic response format")
def _():
    r = oai.chat.completions.parse(model="m", messages=user("A person:"), response_format=Person,
                                   max_tokens=200, temperature=0)
    p = r.choices[0].message.parsed
    assert isinstance(p, Person), r
    return p


@check("openai/chat: allowed_tools limits the calls")
def _():
    tools = [{"type": "function", "function": {"name": n, "parameters": CITY}} for n in ("a", "b", "c")]
    names = set()
    for seed in range(4):
        r = oai.chat.completions.create(
            model="m", messages=user("Weather?"), tools=tools, parallel_tool_calls=False,
            tool_choice={"type": "allowed_tools", "allowed_tools": {
                "mode": "required", "tools": [{"type": "function", "function": {"name": "c"}}]}},
            max_tokens=200, temperature=1, seed=seed)
        names |= {tc.function.name for tc in r.choices[0].message.tool_calls}
    assert names == {"c"}, names
    return names


@check("openai/completions: echo with logprobs scores a text, as evaluation harnesses ask")
def _():
    context, continuation = "Once upon a time,", " there was a little girl"
    n = len(oai.completions.create(model="m", prompt=context, max_tokens=1, echo=True, logprobs=1,
                                   temperature=0).choices[0].logprobs.tokens) - 1
    r = oai.completions.create(model="m", prompt=context + continuation, max_tokens=1, echo=True, logprobs=1,
                               temperature=0)
    lp = r.choices[0].logprobs
    assert lp.token_logprobs[0] is None and all(v < 0 for v in lp.token_logprobs[1:]), lp
    assert r.choices[0].text.startswith(context + continuation), r  # the prompt as it was sent
    score = sum(lp.token_logprobs[n:-1])
    assert score < 0 and len(lp.top_logprobs) == len(lp.tokens), lp
    return score


@check("openai/models: retrieve the listed model")
def _():
    first = oai.models.list().data[0]
    got = oai.models.retrieve(first.id)
    assert got.id == first.id, (got, first)
    return got.id


# OpenAI Responses.

@check("openai/responses: create, cut incomplete by its limit, and input_tokens counts its prompt")
def _():
    r = oai.responses.create(model="m", instructions="Tell a story.", input=PROMPT, max_output_tokens=8,
                             temperature=0)
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens", r
    assert r.output_text, r
    assert r.usage.output_tokens == 8, r.usage
    n = oai.responses.input_tokens.count(model="m", instructions="Tell a story.", input=PROMPT)
    assert n.input_tokens == r.usage.input_tokens, (n, r.usage)
    return r.output_text


@check("openai/responses: the stream helper adds up to the answer")
def _():
    want = oai.responses.create(model="m", input=PROMPT, max_output_tokens=8, temperature=0)
    kinds = []
    with oai.responses.stream(model="m", input=PROMPT, max_output_tokens=8, temperature=0) as st:
        for ev in st:
            kinds.append(ev.type)
        got = st.get_final_response()
    assert got.output_text == want.output_text, (got.output_text, want.output_text)
    assert got.status == want.status == "incomplete", (got.status, want.status)
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed", kinds
    return got.output_text


@check("openai/responses: the stream helper accumulates a forced function call")
def _():
    with oai.responses.stream(model="m", input="Weather in Paris?", tools=[RWEATHER], tool_choice="required",
                              parallel_tool_calls=False, max_output_tokens=200, temperature=0) as st:
        for _ in st:
            pass
        r = st.get_final_response()
    calls = [i for i in r.output if i.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather", r.output
    assert isinstance(json.loads(calls[0].arguments)["city"], str), calls
    return calls[0].arguments


@check("openai/responses: parse with a pydantic text format")
def _():
    r = oai.responses.parse(model="m", input="A person:", text_format=Person, max_output_tokens=200,
                            temperature=0)
    assert isinstance(r.output_parsed, Person), r
    return r.output_parsed


@check("openai/responses: allowed_tools limits the calls")
def _():
    tools = [{"type": "function", "name": n, "parameters": CITY} for n in ("a", "b", "c")]
    r = oai.responses.create(model="m", input="Weather?", tools=tools, parallel_tool_calls=False,
                             tool_choice={"type": "allowed_tools", "mode": "required",
                                          "tools": [{"type": "function", "name": "b"}]},
                             max_output_tokens=200, temperature=0)
    names = [i.name for i in r.output if i.type == "function_call"]
    assert names == ["b"], r.output
    return names


# Anthropic Messages (the SDK has no temperature argument any more: it goes
# in the body).

T0 = {"temperature": 0}


@check("anthropic: create, and a stream adds up to it")
def _():
    m = ant.messages.create(model="m", max_tokens=8, system="Tell a story.", messages=user(PROMPT), extra_body=T0)
    assert m.stop_reason == "max_tokens" and m.content[0].type == "text", m
    assert m.usage.output_tokens == 8, m.usage
    with ant.messages.stream(model="m", max_tokens=8, system="Tell a story.", messages=user(PROMPT),
                             extra_body=T0) as st:
        got = st.get_final_message()
    assert got.content[0].text == m.content[0].text, (got, m)
    n = ant.messages.count_tokens(model="m", system="Tell a story.", messages=user(PROMPT))
    assert n.input_tokens == m.usage.input_tokens + (m.usage.cache_read_input_tokens or 0), (n, m.usage)
    return m.content[0].text


@check("anthropic: a forced tool, whole and streamed")
def _():
    out = []
    for stream in (False, True):
        kw = dict(model="m", max_tokens=200, messages=user("Weather in Paris?"), tools=[AWEATHER],
                  tool_choice={"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
                  extra_body=T0)
        if stream:
            with ant.messages.stream(**kw) as st:
                m = st.get_final_message()
        else:
            m = ant.messages.create(**kw)
        uses = [b for b in m.content if b.type == "tool_use"]
        assert m.stop_reason == "tool_use" and len(uses) == 1, m
        assert uses[0].name == "get_weather" and isinstance(uses[0].input["city"], str), uses
        out.append(uses[0].input)
    assert out[0] == out[1], out
    return out[0]


@check("anthropic: parse with a pydantic output format")
def _():
    m = ant.messages.parse(model="m", max_tokens=200, messages=user("A pet:"), output_format=Pet,
                           extra_body=T0)
    assert isinstance(m.parsed_output, Pet), m
    return m.parsed_output


@check("anthropic: a text document is read")
def _():
    q = {"type": "text", "text": "What color is the sky?"}
    doc = {"type": "document", "title": "Notes",
           "source": {"type": "text", "media_type": "text/plain", "data": "The sky is green."}}
    same = {"type": "text", "text": "Notes\n\nThe sky is green."}
    count = lambda *blocks: ant.messages.count_tokens(
        model="m", messages=[{"role": "user", "content": list(blocks)}]).input_tokens
    assert count(doc, q) == count(same, q) > count(q), (count(doc, q), count(same, q), count(q))
    return count(doc, q)


# Ollama's Python client (Ollama's API, which many apps speak).

O0 = {"num_predict": 8, "temperature": 0}


@check("ollama: list, show and ps describe the served model")
def _():
    name = oll.list().models[0].model
    info = oll.show(name)
    assert "completion" in info.capabilities, info
    assert info.modelinfo["general.architecture"] == "llama", info.modelinfo
    assert [m.model for m in oll.ps().models] == [name], oll.ps()
    return name


@check("ollama: chat, and a stream adds up to it")
def _():
    r = oll.chat(model="m", messages=user(PROMPT), options=O0)
    assert r.done_reason == "length" and r.eval_count == 8 and r.message.content, r
    parts = list(oll.chat(model="m", messages=user(PROMPT), options=O0, stream=True))
    assert "".join(p.message.content for p in parts) == r.message.content, parts
    assert parts[-1].done and parts[-1].eval_count == 8, parts[-1]
    return r.message.content


@check("ollama: generate, streamed alike, and its context continues it")
def _():
    g = oll.generate(model="m", prompt=PROMPT, options=O0)
    parts = list(oll.generate(model="m", prompt=PROMPT, options=O0, stream=True))
    assert "".join(p.response for p in parts) == g.response, (parts, g)
    assert parts[-1].context == g.context, (parts[-1].context, g.context)
    more = oll.generate(model="m", prompt=" and", context=g.context, options=O0)
    alone = oll.generate(model="m", prompt=" and", options=O0)
    assert more.prompt_eval_count == len(g.context) + alone.prompt_eval_count, (more, alone)
    return g.response


@check("ollama: format with a pydantic schema, and format json")
def _():
    r = oll.chat(model="m", messages=user("A person:"), format=Person.model_json_schema(),
                 options={"num_predict": 200, "temperature": 0})
    p = Person.model_validate_json(r.message.content)
    r = oll.chat(model="m", messages=user("A person:"), format="json",
                 options={"num_predict": 200, "temperature": 0})
    assert r.done_reason == "stop" and isinstance(json.loads(r.message.content), dict), r
    return p


@check("ollama: a tool call and its result in the history, and logprobs")
def _():
    msgs = user("Weather in Paris?") + [
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "get_weather",
                                                                          "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "content": "sunny", "tool_name": "get_weather"}]
    r = oll.chat(model="m", messages=msgs, options=O0, logprobs=True, top_logprobs=2)
    alone = oll.chat(model="m", messages=msgs[:1], options=O0)
    assert r.prompt_eval_count > alone.prompt_eval_count, (r, alone)
    assert len(r.logprobs) == 8 and all(len(lp.top_logprobs) == 2 for lp in r.logprobs), r.logprobs
    return r.message.content


# OpenAI's Agents SDK, over Responses and over chat completions.

calls = []


@function_tool
def get_weather(city: str) -> str:
    """Weather of a city."""
    calls.append(city)
    return "sunny"


def model(api, client):
    if api == "responses":
        return OpenAIResponsesModel(model="m", openai_client=client)
    return OpenAIChatCompletionsModel(model="m", openai_client=client)


def async_client():
    """A client of its own for a check: each check runs in an event loop of
    its own, which a client's connections belong to."""
    return openai.AsyncOpenAI(base_url=BASE + "/v1", api_key="none", max_retries=0)


for api in ("responses", "chat"):
    for stream in (False, True):
        how = "streamed" if stream else "whole"

        async def run(agent, stream=stream):
            if stream:
                r = Runner.run_streamed(agent, "Weather in Paris?", max_turns=2)
                async for _ in r.stream_events():
                    pass
                return r.final_output
            return (await Runner.run(agent, "Weather in Paris?", max_turns=2)).final_output

        @check(f"agents/{api}: a tool runs, {how}")
        async def _(api=api, run=run):
            calls.clear()
            async with async_client() as client:
                agent = Agent(name="a", instructions="Use tools.", tools=[get_weather], model=model(api, client),
                              tool_use_behavior="stop_on_first_tool",
                              model_settings=ModelSettings(tool_choice="required", parallel_tool_calls=False,
                                                           max_tokens=200, temperature=0))
                out = await run(agent)
            assert out == "sunny" and len(calls) == 1, (out, calls)
            return calls

        @check(f"agents/{api}: tools and a typed output, {how}")
        async def _(api=api, stream=stream):
            # Both go in each request: the first must call, the next may
            # call again or answer in the type (here it answers).
            calls.clear()
            async with async_client() as client:
                agent = Agent(name="c", instructions="Use tools, then describe a person.", tools=[get_weather],
                              model=model(api, client), output_type=Person,
                              model_settings=ModelSettings(tool_choice="required", parallel_tool_calls=False,
                                                           max_tokens=200, temperature=0))
                if stream:
                    r = Runner.run_streamed(agent, "Weather in Paris?", max_turns=3)
                    async for _ in r.stream_events():
                        pass
                    out = r.final_output
                else:
                    out = (await Runner.run(agent, "Weather in Paris?", max_turns=3)).final_output
            assert len(calls) == 1, (out, calls)
            assert isinstance(out, Person), out
            return {"calls": calls, "out": out.model_dump()}

        @check(f"agents/{api}: a typed output, {how}")
        async def _(api=api, run=run):
            async with async_client() as client:
                agent = Agent(name="b", instructions="Describe a person.", model=model(api, client), output_type=Person,
                              model_settings=ModelSettings(max_tokens=200, temperature=0))
                out = await run(agent)
            assert isinstance(out, Person), out
            return out


for r in results:
    print(json.dumps(r))
sys.exit(0 if all(r["ok"] for r in results) else 1)
