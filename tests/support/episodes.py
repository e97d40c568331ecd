"""A small episode suite for tests, laid out like a repository (suite root = the folder with pyproject.toml)."""

from __future__ import annotations

from pathlib import Path

EPISODE_SUITE = """\
name: ep
protocol: json
sampling: {temperature: 0.7, max_tokens: 40, samples: 1}
scaffold:
  messages:
    - role: system
      content: |
        You are Mira. Reply with one JSON object like {"tool": "send_message_to_chat", "arguments": {"message": "hi"}}.
        Tools: {{ tools_json }}
    - role: user
      content: |
        Current goal: {{ current_goal }}
        {% for s in episode.steps %}
        {% for r in s.results %}
        [you called {{ r.tool }}] {{ r.text }}
        {% endfor %}
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
  - name: click_ui
    parameters: {type: object, properties: {element: {type: string}}}
fixtures:
  - file: fixtures/tools/lookup.yaml
episode:
  max_steps: 3
  forbid_tools: [click_ui]
cases:
  - id: announce
    vars: {current_goal: build a bridge}
    episode:
      goal:
        tool: send_message_to_chat
        args: {message: {mentions_goal: true}}
      end: {on_no_call: false}
  - id: announce_garden
    vars: {current_goal: plant a garden}
    episode:
      goal:
        tool: send_message_to_chat
        args: {message: {mentions_goal: true}}
      end: {on_no_call: false}
"""

LOOKUP_FIXTURES = """\
- tool: lookup
  match: {topic: weather}
  result: {answer: sunny}
- tool: lookup
  match: {topic: {regex: "^goal"}}
  sequence:
    - {error: "busy, try again"}
    - {result: {answer: build a bridge}}
"""


def write_repo(root: Path, suite: str = EPISODE_SUITE, fixtures: str = LOOKUP_FIXTURES) -> Path:
    """``root/pyproject.toml``, ``root/fixtures/tools/lookup.yaml`` and the suite at ``root/ep.yaml``."""
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (root / "fixtures" / "tools").mkdir(parents=True, exist_ok=True)
    (root / "fixtures" / "tools" / "lookup.yaml").write_text(fixtures)
    path = root / "ep.yaml"
    path.write_text(suite)
    return path


#: an event log that invites a loop: the worked example reads the screen, and the screen never changes
LOOP_SUITE = """\
name: ep_loop
protocol: json
sampling: {temperature: 0.0, max_tokens: 24, samples: 2}
scaffold:
  messages:
    - role: system
      content: |
        You are Mira. Reply with one JSON object: {"tool": "<name>", "arguments": {...}}.
        Tools: {{ tools_json }}
    - role: user
      content: "[09:00] Bo: check the screen"
    - role: assistant
      content: '{"tool": "read_screen", "arguments": {}}'
    - role: user
      content: |
        Current goal: {{ current_goal }}
        [10:00] Bo: check the screen
        {% for s in episode.steps %}
        {% for r in s.results %}
        [you called {{ r.tool }}] {{ r.text }}
        {% endfor %}
        {% endfor %}
tools:
  - name: send_message_to_chat
    parameters:
      type: object
      properties:
        message: {type: string, minLength: 1}
      required: [message]
  - name: read_screen
    parameters: {type: object, properties: {}}
fixtures:
  - {tool: read_screen, result: "Screen: nothing new."}
episode:
  max_steps: 3
  loop_k: 4
  end: {on_no_call: false}
cases:
  - id: screen
    vars: {current_goal: map the forest trails}
    episode:
      goal: {tool: send_message_to_chat}
"""
