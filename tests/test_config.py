"""``[tool.mutant-gate]`` in pyproject.toml: found, checked, and always below the flags."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mutant_gate.cli.config import apply_config, subparser
from mutant_gate.cli.main import build_parser
from mutant_gate.engine.errors import BadInput

from .conftest import EXAMPLES, run_cli

CONFIG = """\
[project]
name = "kernels"

[tool.mutant-gate]
operators = ["masks", "boundaries"]
timeout-base = 7
fail_under = 80
writer = "none"
compile-target = ["sm_80", "sm_90"]
diff-oracle = true
tests = ["tests/test_extra.py"]
html = "out/mutants.html"
cache-dir = ".cache/mg"
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    (tmp_path / "kernels").mkdir()
    shutil.copy(EXAMPLES / "vector_add.py", tmp_path / "kernels" / "vector_add.py")
    return tmp_path


def resolve(*argv: str):
    parser = build_parser()
    return apply_config(parser, parser.parse_args(list(argv)), list(argv))


def test_config_sets_defaults(project, monkeypatch, tmp_path_factory):
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))  # found from the kernel's dir
    args = resolve("run", str(project / "kernels" / "vector_add.py"))
    assert args.config == str(project / "pyproject.toml")
    assert args.operators == "masks,boundaries"
    assert args.timeout_base == 7.0
    assert args.fail_under == 80.0
    assert args.writer == "none"
    assert args.compile_target == "sm_80,sm_90"
    assert args.diff_oracle is True
    # paths are relative to the pyproject.toml
    assert args.tests == [str(project / "tests" / "test_extra.py")]
    assert args.html == str(project / "out" / "mutants.html")
    assert args.cache_dir == str(project / ".cache" / "mg")
    assert args.timeout == 120.0  # not in the config: the flag's default


def test_flags_override_config(project):
    args = resolve(
        "run",
        str(project / "kernels" / "vector_add.py"),
        "--operators",
        "arith",
        "--fail-under",
        "10",
        "--tests",
        "mine.py",
        "--timeout-base",
        "2",
    )
    assert args.operators == "arith"
    assert args.fail_under == 10.0
    assert args.tests == ["mine.py"]  # replaced, not added to the config's
    assert args.timeout_base == 2.0
    assert args.writer == "none"  # the rest still from the config


def test_tui_takes_the_same_config_but_not_run_only_keys(project):
    args = resolve("tui", str(project / "kernels" / "vector_add.py"), "--writer", "probe")
    assert args.writer == "probe"
    assert args.operators == "masks,boundaries"
    assert not hasattr(args, "html")  # report flags are `run`'s


def test_no_config_and_explicit_config(project, tmp_path_factory):
    kernel = str(project / "kernels" / "vector_add.py")
    args = resolve("run", kernel, "--no-config")
    assert args.operators is None and args.fail_under is None
    other = tmp_path_factory.mktemp("other") / "custom.toml"
    other.write_text("[tool.mutant-gate]\nseed = 3\n")
    args = resolve("run", kernel, "--config", str(other))
    assert args.seed == 3 and args.operators is None  # only the named file counts
    with pytest.raises(BadInput, match="no such file"):
        resolve("run", kernel, "--config", str(project / "missing.toml"))


def test_the_nearest_table_wins_and_cwd_is_the_fallback(project, monkeypatch, tmp_path_factory):
    # a pyproject.toml without the table is passed over
    (project / "kernels" / "pyproject.toml").write_text('[project]\nname = "inner"\n')
    args = resolve("run", str(project / "kernels" / "vector_add.py"))
    assert args.config == str(project / "pyproject.toml")
    # a kernel outside any configured project: the current directory's config
    lone = tmp_path_factory.mktemp("lone")
    shutil.copy(EXAMPLES / "vector_add.py", lone / "k.py")
    monkeypatch.chdir(project / "kernels")
    args = resolve("run", str(lone / "k.py"))
    assert args.config == str(project / "pyproject.toml")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("bogus = 1", "unknown key 'bogus' in [tool.mutant-gate]"),
        (
            "timeout-bse = 3",
            "unknown key 'timeout-bse' in [tool.mutant-gate] (did you mean 'timeout-base'?)",
        ),
        ('timeout = "fast"', "timeout: expected a number, got 'fast'"),
        ("jobs = 1.5", "jobs: expected a whole number, got 1.5"),
        ('writer = "gpt"', "writer: 'gpt' is not one of none, probe, llm"),
        ('stage2 = "yes"', "stage2: expected true or false"),
        ("tests = [1]", "tests: expected a list of strings"),
        ("config = 'x.toml'", "unknown key 'config'"),
    ],
)
def test_bad_config_is_one_line_naming_the_key(tmp_path, line, message):
    shutil.copy(EXAMPLES / "vector_add.py", tmp_path / "k.py")
    (tmp_path / "pyproject.toml").write_text(f"[tool.mutant-gate]\n{line}\n")
    with pytest.raises(BadInput) as info:
        resolve("run", str(tmp_path / "k.py"))
    assert message in str(info.value)
    assert str(tmp_path / "pyproject.toml") in str(info.value)


def test_unknown_key_from_the_command_line(tmp_path):
    shutil.copy(EXAMPLES / "vector_add.py", tmp_path / "k.py")
    (tmp_path / "pyproject.toml").write_text("[tool.mutant-gate]\nfail-undr = 90\n")
    proc = run_cli("run", "k.py", cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "unknown key 'fail-undr'" in lines[0] and "did you mean 'fail-under'" in lines[0]
    assert not (tmp_path / ".mutant-gate").exists()  # nothing ran


def test_invalid_toml_is_bad_input(tmp_path):
    shutil.copy(EXAMPLES / "vector_add.py", tmp_path / "k.py")
    (tmp_path / "pyproject.toml").write_text("[tool.mutant-gate\n")
    with pytest.raises(BadInput, match="not valid TOML"):
        resolve("run", str(tmp_path / "k.py"))


def test_cache_commands_take_the_cache_dir_from_config(project, monkeypatch):
    monkeypatch.chdir(project)
    parser = build_parser()
    args = apply_config(parser, parser.parse_args(["cache", "ls"]), ["cache", "ls"])
    assert args.cache_dir == str(project / ".cache" / "mg")
    args = apply_config(
        parser, parser.parse_args(["cache", "ls", "--cache-dir", "x"]), ["cache", "ls"]
    )
    assert args.cache_dir == "x"


def test_the_ci_example_uses_real_keys_and_flags():
    """examples/ci: the config table is valid and the workflow's flags exist (not run here)."""
    import yaml

    ci = EXAMPLES / "ci"
    args = resolve(
        "run", str(EXAMPLES / "vector_add.py"), "--config", str(ci / "tool-mutant-gate.toml")
    )
    assert args.fail_under == 80.0 and "masks" in args.operators
    workflow = yaml.safe_load((ci / "mutant-gate.yml").read_text())
    script = "\n".join(
        step.get("run", "") for step in workflow["jobs"]["mutants"]["steps"]
    ).replace("\\\n", " ")
    command = next(line for line in script.splitlines() if "mutant-gate run" in line)
    flags = {word for word in command.split() if word.startswith("--")}
    assert {"--changed-since", "--junit", "--html", "--stryker", "--markdown"} <= flags
    known = {s for a in subparser(build_parser(), "run")._actions for s in a.option_strings}
    assert flags <= known
