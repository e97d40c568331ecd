"""``[tool.leader-eval]`` / ``leader-eval.toml``: found upward from a folder, read with the shared
option table, a bad key or value named with its ``FILE:LINE``, a suite's sampling refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from leader_eval.runs.config_file import ConfigError, find_config, key_line, load_config, read_config

PYPROJECT = """\
[project]
name = "x"

[tool.pytest.ini_options]
leader_eval_model = "local:smollm2"

[tool.leader-eval]
model = "openai:http://127.0.0.1:8000/v1#m"
api-mode = "chat"
concurrency = 8
baseline = "v7"
no-cache = true
suites = ["evals/**/*.yaml"]

[tool.leader-eval.model-roles]
grader = "local:smollm2 --temperature 0"
strict = {model = "openai:http://127.0.0.1:9/v1#j", api-mode = "chat", temperature = 0.5}

[tool.leader-eval.check-functions]
polite = "mychecks.tone:polite"
"""


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # messages name the file relative to the working directory


def _write(folder: Path, text: str, name: str = "pyproject.toml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def _error(path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        read_config(path)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_every_kind_of_setting_is_read_with_its_line(tmp_path: Path) -> None:
    config = read_config(_write(tmp_path, PYPROJECT))
    assert config.values == {
        "model": "openai:http://127.0.0.1:8000/v1#m",
        "api_mode": "chat",
        "concurrency": 8,
        "baseline": "v7",
        "no_cache": True,
    }
    assert config.lines["concurrency"] == 10 and config.lines["model-roles.strict"] == 17
    assert config.suites == ["evals/**/*.yaml"]
    grader = config.trusted.models["grader"]
    assert grader.values == {"model": "local:smollm2", "temperature": 0.0} and grader.source.endswith(":16")
    assert config.trusted.models["strict"].values["api_mode"] == "chat"
    assert config.trusted.checks["polite"].target == "mychecks.tone:polite"


def test_lookup_goes_upward_and_a_leader_eval_toml_wins_in_its_folder(tmp_path: Path) -> None:
    _write(tmp_path, PYPROJECT)
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert find_config(deep) == (tmp_path / "pyproject.toml").resolve()
    # a pyproject.toml without the table (another project's) is passed over
    _write(tmp_path / "a", "[project]\nname = 'inner'\n")
    assert find_config(deep) == (tmp_path / "pyproject.toml").resolve()
    own = _write(tmp_path / "a", 'model = "local:smollm2"\nconcurrency = 2\n', "leader-eval.toml")
    assert find_config(deep) == own.resolve()
    assert read_config(own).values == {"model": "local:smollm2", "concurrency": 2}
    # a malformed pyproject.toml of another tool is not ours to refuse
    _write(tmp_path / "c", "[project\n")
    assert find_config(tmp_path / "c") == (tmp_path / "pyproject.toml").resolve()
    assert load_config(tmp_path / "nothing-here-either") is not None  # still the top one


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("temperature = 0.3", "temperature: not allowed in a configuration file (a suite's own sampling"),
        ("samples = 10", "samples: not allowed in a configuration file"),
        ("seed = 1", "seed: not allowed"),
        ("max-tokens = 64", "max-tokens: not allowed"),
        ("protocol = 'json'", "protocol: not allowed"),
        ("label = 'v7'", "label: not allowed in a configuration file (names one run"),
        ('concurrency = "8"', "concurrency: '8' is a string, not a number (drop the quotes)"),
        ("concurrency = 0", "concurrency: '0' must be an integer >= 1"),
        ("concurrency = true", "concurrency: True is not a number"),
        ("max-error-rate = 2", "max-error-rate: "),
        ("template-gguf = 3", "template-gguf: 3 is not a string (quote it)"),
        ("no-cache = 'yes'", "no-cache: 'yes' is not a boolean"),
        ("baseline = '../x'", "baseline: "),
        ("max_tokens = 64", "max_tokens: unknown key (did you mean max-tokens?)"),
        ("modle = 'x'", "modle: unknown key (did you mean model?)"),
        ("model = ['a', 'b']", "model: one model spec (a string); a matrix is given with --model"),
        ("model = 'gguf:m.gguf --temperature 2'", "model: one model spec, without options"),
        ("suites = 'evals/*.yaml'", "suites: a list of globs"),
    ],
)
def test_a_bad_key_or_value_names_the_file_line_and_key(tmp_path: Path, line: str, expected: str) -> None:
    path = _write(tmp_path, f"[project]\nname = 'x'\n\n[tool.leader-eval]\napi-mode = 'chat'\n{line}\n")
    message = _error(path)
    assert message.startswith("pyproject.toml:6 "), message
    assert expected in message, message


def test_trusted_tables_are_checked_at_their_line(tmp_path: Path) -> None:
    head = "[tool.leader-eval]\nconcurrency = 4\n\n"
    cases = {
        "[tool.leader-eval.model-roles]\ngrader = {model = 'x', temperture = 0}\n": (
            "pyproject.toml:5 model-roles.grader.temperture: not a sampling option (did you mean temperature?)"
        ),
        "[tool.leader-eval.model-roles]\ngrader = 'local:smollm2 --temperature -1'\n": (
            "pyproject.toml:5 model-roles.grader: argument --temperature"
        ),
        "[tool.leader-eval.model-roles]\ngrader = 3\n": "pyproject.toml:5 model-roles.grader: a string",
        "[tool.leader-eval.model-roles]\n'bad name' = 'x'\n": "pyproject.toml:5 model-roles.bad name: 'bad name'",
        "[tool.leader-eval.check-functions]\npolite = 'mychecks.polite'\n": (
            "pyproject.toml:5 check-functions.polite: 'mychecks.polite' is not MODULE:FUNCTION"
        ),
        "[tool.leader-eval]\n": "pyproject.toml:4: not valid TOML: Cannot declare ('tool', 'leader-eval') twice",
    }
    for body, expected in cases.items():
        message = _error(_write(tmp_path, head + body))
        assert message.startswith(expected), (body, message)


def test_key_line_finds_dotted_keys_and_subtables() -> None:
    text = (
        "[tool.leader-eval]\n"
        "model = 'x'\n"
        "model-roles.grader = 'y'\n"
        "\n"
        '[ tool . "leader-eval" . check-functions ]  # checks\n'
        "polite = 'a:b'\n"
        "[tool.other]\nconcurrency = 3\n"
    )
    table = ("tool", "leader-eval")
    assert key_line(text, table, "model") == 2
    assert key_line(text, (*table, "model-roles"), "grader") == 3
    assert key_line(text, table, "check-functions") == 5
    assert key_line(text, (*table, "check-functions"), "polite") == 6
    assert key_line(text, table, "concurrency") == 0


def test_a_huge_or_undecodable_file_is_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "leader-eval.toml"
    path.write_bytes(b"model = '\xff'\n")
    assert _error(path).startswith("leader-eval.toml:1: not UTF-8")
    path.write_text("# " + "x" * (1 << 20) + "\n")
    assert "larger than" in _error(path)
    path.write_text("x = " + "[" * 50_000 + "]" * 50_000 + "\n")  # tomllib recurses per bracket
    assert _error(path) == "leader-eval.toml:1: nests too deeply to read"


def test_the_search_stops_at_the_repository_root(tmp_path: Path) -> None:
    """A file in a folder above a clone (a home directory, a CI workspace) never reaches the
    project: it could point the gate at a weak golden or allow every sample to error."""
    _write(tmp_path, '[tool.leader-eval]\ngolden-dir = "weak"\nmax-error-rate = 1.0\n')
    repo = tmp_path / "clone"
    (repo / ".git").mkdir(parents=True)
    (repo / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert find_config(repo / "src") is None
    assert find_config(tmp_path / "elsewhere") == tmp_path / "pyproject.toml"  # no repository: found


def test_a_cache_identity_cannot_be_promised_by_a_file(tmp_path: Path) -> None:
    message = _error(_write(tmp_path, '[tool.leader-eval]\ncache-id = "my-weights-v1"\n'))
    assert message.startswith("pyproject.toml:2 cache-id: not allowed") and "--cache-id" in message
