"""A support-desk episode with a simulated customer, and scripted backends for both roles.

The leader (``scripted_leader``) answers what the event log shows: it reads the ticket, then
messages the customer, then answers each customer reply; the customer (``scripted_customer``)
asks one question, then says the stop phrase. No model, no network: outputs are pure functions
of the prompt and the seed, so two runs with one seed record the same turns.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from leader_eval.sampling.backends.base import SampleRequest
from tests.support.episodes import write_repo
from tests.support.scripted import ScriptedBackend, call

TEAMMATE_SUITE = """\
name: desk
protocol: json
sampling: {temperature: 0.7, max_tokens: 48, samples: 2}
scaffold:
  messages:
    - role: system
      content: |
        You are Mira, a support agent. Reply with one JSON object. Tools: {{ tools_json }}
    - role: user
      content: |
        Ticket: {{ issue }}
        {% for s in episode.steps %}
        {% for r in s.results %}
        [you called {{ r.tool }}] {{ r.text }}
        {% endfor %}
        {% if s.reply %}
        [customer] {{ s.reply }}
        {% endif %}
        {% endfor %}
tools:
  - name: send_message_to_chat
    parameters:
      type: object
      properties:
        message: {type: string, minLength: 1}
      required: [message]
  - name: lookup
    parameters:
      type: object
      properties:
        topic: {type: string}
    returns:
      type: object
      properties: {answer: {type: string}}
      required: [answer]
fixtures:
  - file: fixtures/tools/lookup.yaml
episode:
  max_steps: 4
  user:
    model_role: customer
    persona: You are {{ customer }}, a customer whose order {{ order }} is late.
    instructions: Ask when the order arrives. Once you have a date, thank the agent.
    max_turns: 3
    stop: "###DONE"
cases:
  - id: late_order
    vars: {issue: order late, customer: Ada, order: "A-17"}
    episode:
      goal:
        tool: send_message_to_chat
        args: {message: {contains: Friday}}
  - id: late_parcel
    vars: {issue: parcel late, customer: Bo, order: "B-22"}
    episode:
      goal:
        tool: send_message_to_chat
        args: {message: {contains: Friday}}
"""


def write_desk(root: Path, suite: str = TEAMMATE_SUITE) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    return write_repo(root, suite)


def _leader_pick(prompt: str, seed: int) -> str:
    if "[customer]" not in prompt:
        return call("send_message_to_chat", message="Hello, I am looking into your order.")
    if "[customer] When" in prompt and "arrives Friday" not in prompt:
        return call("send_message_to_chat", message="It arrives Friday.")
    return call("send_message_to_chat", message="Anything else?")


def scripted_leader() -> ScriptedBackend:
    return ScriptedBackend([], model_id="scripted:leader", pick=_leader_pick)


def _customer_pick(prompt: str, seed: int) -> str:
    if "Friday" in prompt:
        return "Thank you! ###DONE"
    return "When does it arrive?"


def scripted_customer(model_id: str = "scripted:customer") -> ScriptedBackend:
    return ScriptedBackend([], model_id=model_id, cache_identity=model_id + "-weights", pick=_customer_pick)


class HangingCustomer(ScriptedBackend):
    """Replies like ``scripted_customer`` until ``after`` replies, then never again (a test kills
    the process while it waits)."""

    def __init__(self, after: int):
        super().__init__(
            [], model_id="scripted:customer", cache_identity="scripted:customer-weights", pick=_customer_pick
        )
        self.after = after

    async def sample(self, request: SampleRequest) -> list[Any]:
        if self.requests >= self.after:
            await asyncio.sleep(3600)
        return await super().sample(request)
