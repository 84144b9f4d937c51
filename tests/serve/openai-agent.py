"""openai-agent.py - an agent framework from PyPI (the OpenAI Agents SDK,
pip install openai-agents) running a tool-using loop against ml-serve to
completion: the first turn must call the tool (tool_choice required),
the SDK runs it and sends the result, and the model's later turns (auto:
a call or an answer, in our JSON form for the Llama 2 template) end the
run.  A random model decides at random, but the same way every time (the
seed is fixed and generation bit-identical): with seed 3 it answers after
one call.  Usage: openai-agent.py BASE_URL API_KEY"""
import sys
import typing

import agents
from agents import (Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, function_tool,
                    set_tracing_disabled)
from openai import AsyncOpenAI

CALLED = []


@function_tool
def get_weather(city: typing.Literal["Paris", "Rome"]) -> str:
    """The weather in a city (a choice of two, so that a random model's
    arguments end)."""
    CALLED.append(city)
    return f"21 C and sunny in {city}"


def main(base, key):
    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=base, api_key=key, max_retries=0)
    agent = Agent(name="weather", instructions="Answer questions about the weather.",
                  tools=[get_weather],
                  model=OpenAIChatCompletionsModel(model="m", openai_client=client),
                  model_settings=ModelSettings(tool_choice="required", max_tokens=200,
                                               extra_args={"seed": 3}))
    result = Runner.run_sync(agent, "What is the weather in Paris?", max_turns=10)
    assert CALLED, f"the tool was never called: {result.raw_responses}"
    assert isinstance(result.final_output, str), result
    print(f"openai-agents {agents.__version__}: {len(CALLED)} tool call(s), then a final "
          "answer: OK")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
