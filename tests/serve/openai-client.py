"""openai-client.py - the official openai Python client against ml-serve
(make check-openai): chat and text completions, whole and streamed, the
usage, stop strings, a seed, logprobs, echo with the prompt's logprobs,
n choices, the model list, and the
client's own errors for a 400 (a bad value, a field not supported) and a
401, and response_format json_object.  Usage: openai-client.py BASE_URL API_KEY"""
import json
import sys
import typing

import openai
import pydantic


def main(base, key):
    client = openai.OpenAI(base_url=base, api_key=key, max_retries=0)
    models = client.models.list()
    model = models.data[0].id
    assert model == "m", model

    messages = [{"role": "user", "content": "Hello there"}]
    chat = client.chat.completions.create(model=model, messages=messages, max_tokens=12,
                                          temperature=0)
    text = chat.choices[0].message.content
    assert chat.object == "chat.completion" and chat.choices[0].finish_reason == "length"
    assert chat.choices[0].message.role == "assistant" and chat.usage.completion_tokens == 12
    assert chat.usage.total_tokens == chat.usage.prompt_tokens + 12

    stream = client.chat.completions.create(model=model, messages=messages, max_tokens=12,
                                            temperature=0, stream=True,
                                            stream_options={"include_usage": True})
    parts, finish, usage = [], None, None
    for chunk in stream:
        assert chunk.object == "chat.completion.chunk"
        if chunk.usage:
            usage = chunk.usage
        for c in chunk.choices:
            parts.append(c.delta.content or "")
            finish = c.finish_reason or finish
    assert "".join(parts) == text, ("".join(parts), text)
    assert finish == "length" and usage.completion_tokens == 12

    done = client.completions.create(model=model, prompt="Once upon a time", max_tokens=10,
                                     temperature=0)
    whole = done.choices[0].text
    assert done.object == "text_completion" and done.usage.prompt_tokens == 5
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model=model, prompt="Once upon a time", max_tokens=10, temperature=0, stream=True)
        if c.choices)
    assert streamed == whole, (streamed, whole)

    stop = whole[3:5]
    cut = client.completions.create(model=model, prompt="Once upon a time", max_tokens=10,
                                    temperature=0, stop=[stop])
    assert cut.choices[0].text == whole.split(stop)[0] and cut.choices[0].finish_reason == "stop"

    a, b = (client.completions.create(model=model, prompt="Seeded", max_tokens=8, seed=7,
                                      temperature=1).choices[0].text for _ in range(2))
    assert a == b

    # logprobs as the client parses them: chat entries and a completion's lists
    lp = client.chat.completions.create(model=model, messages=messages, max_tokens=4,
                                        temperature=0, logprobs=True, top_logprobs=2)
    content = lp.choices[0].logprobs.content
    assert len(content) == 4 and "".join(t.token for t in content) == lp.choices[0].message.content
    assert all(len(t.top_logprobs) == 2 and t.top_logprobs[0].logprob == t.logprob <= 0
               and bytes(t.bytes) == t.token.encode() for t in content), content
    clp = client.completions.create(model=model, prompt="Once upon a time", max_tokens=10,
                                    temperature=0, logprobs=3).choices[0].logprobs
    assert "".join(clp.tokens) == whole and len(clp.token_logprobs) == 10
    assert all(len(m) == 3 for m in clp.top_logprobs) and clp.text_offset[0] == 0

    # echo, as lm-evaluation-harness's local-completions scores a text: the
    # prompt's token ids, echoed with their log-probabilities (the first
    # None), max_tokens 0; and echo before a completion
    ids = [1, 9038, 2501, 263, 931]  # "Once upon a time" with BOS
    sc = client.completions.create(model=model, prompt=[ids], max_tokens=0, echo=True,
                                   logprobs=1, temperature=0).choices[0]
    assert sc.text == "Once upon a time" and sc.finish_reason == "length", sc
    assert sc.logprobs.token_logprobs[0] is None and sc.logprobs.top_logprobs[0] is None
    assert len(sc.logprobs.tokens) == 5 and all(v < 0 for v in sc.logprobs.token_logprobs[1:])
    ec = client.completions.create(model=model, prompt="Once upon a time", max_tokens=10,
                                   temperature=0, echo=True, logprobs=3).choices[0]
    assert ec.text == "Once upon a time" + whole, ec.text
    assert ec.logprobs.token_logprobs[:5] == sc.logprobs.token_logprobs
    assert ec.logprobs.tokens[5:] == clp.tokens and ec.logprobs.token_logprobs[5:] == clp.token_logprobs

    # n choices, each as the request with seed + i would draw it
    many = client.completions.create(model=model, prompt="Seeded", max_tokens=8, seed=7,
                                     temperature=1, n=3)
    assert [c.index for c in many.choices] == [0, 1, 2] and many.choices[0].text == a
    assert many.choices[2].text == client.completions.create(
        model=model, prompt="Seeded", max_tokens=8, seed=9, temperature=1).choices[0].text

    # several prompts in one request (local-completions with batch_size > 1):
    # choice p * n + j continues prompt p, each as its request alone
    batch = client.completions.create(model=model, prompt=[ids, [1, 15043]], max_tokens=0,
                                      echo=True, logprobs=1, temperature=0)
    assert [c.index for c in batch.choices] == [0, 1] and batch.choices[0].logprobs == sc.logprobs
    alone = client.completions.create(model=model, prompt=[[1, 15043]], max_tokens=0, echo=True,
                                      logprobs=1, temperature=0)
    assert batch.choices[1].text == alone.choices[0].text
    assert batch.choices[1].logprobs == alone.choices[0].logprobs
    assert batch.usage.prompt_tokens == 5 + alone.usage.prompt_tokens
    two = client.completions.create(model=model, prompt=["Other", "Seeded"], max_tokens=8, seed=5,
                                    temperature=1, n=2)
    assert [c.index for c in two.choices] == [0, 1, 2, 3]
    assert [c.text for c in two.choices[2:]] == [c.text for c in many.choices[:2]]

    # structured output: json_object holds the text to JSON (an object when
    # the model ends it); json_schema is refused by name, never ignored
    js = client.chat.completions.create(model=model, messages=messages, max_tokens=40,
                                        seed=1, temperature=1.2,
                                        response_format={"type": "json_object"})
    content = js.choices[0].message.content
    assert content.startswith("{"), content
    if js.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(content), dict), content
    # json_schema through the client's parse() with a Pydantic model: every
    # answer is an instance
    class Answer(pydantic.BaseModel):
        ok: bool
        color: typing.Literal["red", "blue"]
        count: typing.Optional[int] = None

    chat_api = getattr(client.chat.completions, "parse", None) or client.beta.chat.completions.parse
    for seed in range(1, 4):
        parsed = chat_api(model=model, messages=messages, max_tokens=60, seed=seed,
                          temperature=1, response_format=Answer)
        assert isinstance(parsed.choices[0].message.parsed, Answer), parsed
    try:
        client.chat.completions.create(
            model=model, messages=messages,
            response_format={"type": "json_schema",
                             "json_schema": {"name": "a", "schema": {"type": "string",
                                                                     "pattern": "a+"}}})
        raise AssertionError("a pattern was accepted")
    except openai.BadRequestError as e:
        assert e.status_code == 400 and e.body["param"] == "response_format", e.body

    tool_calls(client, model)

    try:
        client.chat.completions.create(model=model, messages=messages, temperature=5)
        raise AssertionError("temperature 5 was accepted")
    except openai.BadRequestError as e:
        assert e.status_code == 400 and e.body["param"] == "temperature", e.body
    try:
        openai.OpenAI(base_url=base, api_key="wrong", max_retries=0).models.list()
        raise AssertionError("a wrong key was accepted")
    except openai.AuthenticationError as e:
        assert e.status_code == 401
    print(f"openai {openai.__version__}: chat, completions, streams, stop, seed, logprobs, "
          "echo, n, several prompts, json_object, parse() with a Pydantic model, tool calls, "
          "400 and 401: OK")


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"enum": ["Paris", "Rome"]}},
                   "required": ["city"]}}}


def tool_calls(client, model):
    """A two-step loop: a call (required), its result, a final answer; and
    the same call streamed, its deltas gathered as a client gathers them."""
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    first = client.chat.completions.create(model=model, messages=messages, tools=[WEATHER],
                                           tool_choice="required", parallel_tool_calls=False,
                                           max_tokens=200, seed=1)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    call = choice.message.tool_calls[0]
    assert call.type == "function" and call.function.name == "get_weather", call
    assert json.loads(call.function.arguments)["city"] in ("Paris", "Rome"), call
    messages.append(choice.message)
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "21 C and sunny"})
    final = client.chat.completions.create(model=model, messages=messages, tools=[WEATHER],
                                           tool_choice="none", max_tokens=20, seed=1)
    assert isinstance(final.choices[0].message.content, str), final
    assert not final.choices[0].message.tool_calls, final
    gathered = {}
    finish = None
    for chunk in client.chat.completions.create(model=model, messages=messages[:1],
                                                tools=[WEATHER], tool_choice="required",
                                                parallel_tool_calls=False, max_tokens=200,
                                                seed=1, stream=True):
        for d in chunk.choices[0].delta.tool_calls or []:
            g = gathered.setdefault(d.index, {"name": "", "arguments": ""})
            g["name"] += d.function.name or ""
            g["arguments"] += d.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert finish == "tool_calls", finish
    assert gathered == {0: {"name": call.function.name, "arguments": call.function.arguments}}, \
        gathered


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
