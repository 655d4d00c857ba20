"""The generated references (docs/gen_reference.py) cover every config key, flag and config file.

A key without its one-line comment, a flag without help, a page not regenerated after either
changed, a file in configs/ missing from docs/reference/configs.md and a command with a
``build_parser`` the generator does not list each fail here.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load_generator():
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "docs/gen_reference.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_reference", module)
    spec.loader.exec_module(module)
    return module


gen = _load_generator()


def test_every_config_key_has_a_meaning():
    keys = list(gen.config_keys())
    assert len(keys) > 50  # the walk reached the sections, lists and mappings
    assert {"ppo.lr", "curriculum.stages[].threshold", "pbt.hyperparameters.<key>.min"} <= {
        k.path for k in keys
    }
    missing = [k.path for k in keys if not k.meaning.strip()]
    assert not missing, (
        f"config keys without a one-line meaning: {missing}; give each field a trailing "
        "# comment in jaxrl/config/ (or a comment block directly above it)"
    )


def test_every_flag_has_help():
    flags = list(gen.cli_flags())
    assert {f.command for f in flags} >= {f"python -m {gen.entry(m)}" for m in gen.CLI_MODULES}
    missing = [f"{f.command} {f.flags}" for f in flags if not f.help.strip()]
    assert not missing, f"flags without help: {missing}"


@pytest.mark.parametrize("page", ["config.md", "cli.md"])
def test_generated_pages_are_current(page):
    path = ROOT / "docs/reference" / page
    fresh = gen.pages()[path]
    assert path.read_text() == fresh, (
        f"docs/reference/{page} is out of date: run python docs/gen_reference.py and commit it"
    )


def test_every_config_file_is_described():
    listed = set(
        re.findall(r"`(configs/[^`]+\.yaml)`", (ROOT / "docs/reference/configs.md").read_text())
    )
    shipped = {str(p.relative_to(ROOT)) for p in (ROOT / "configs").rglob("*.yaml")}
    assert not shipped - listed, (
        f"configs without a line in docs/reference/configs.md: {sorted(shipped - listed)}"
    )
    assert not listed - shipped, (
        f"docs/reference/configs.md lists missing files: {sorted(listed - shipped)}"
    )


def test_every_command_with_a_parser_is_generated():
    defining = {  # bench/ and envs/ install as jaxrl.bench and jaxrl.envs
        ".".join(("jaxrl",) * (folder != "jaxrl") + p.relative_to(ROOT).with_suffix("").parts)
        for folder in ("jaxrl", "bench", "envs")
        for p in (ROOT / folder).rglob("*.py")
        if re.search(r"^def build_parser\(", p.read_text(), re.MULTILINE)
    }
    assert defining, "no module defines build_parser: the scan is broken"
    assert not defining - set(gen.CLI_MODULES), (
        f"modules with build_parser missing from CLI_MODULES in docs/gen_reference.py: "
        f"{sorted(defining - set(gen.CLI_MODULES))}"
    )


def test_every_jaxrl_subcommand_is_generated():
    from jaxrl.commands.cli import COMMANDS

    missing = {c.module for c in COMMANDS.values()} - set(gen.CLI_MODULES)
    assert not missing, f"jaxrl subcommands whose module is not in CLI_MODULES: {sorted(missing)}"
    page = (ROOT / "docs" / "reference" / "cli.md").read_text()
    for name in COMMANDS:
        assert f"`jaxrl {name}`" in page, name


def test_meaning_reads_the_comment_above_a_long_field():
    from jaxrl.config import NetworkConfig, PBTConfig, PPOConfig

    assert gen.field_meaning(PPOConfig, "lr") == "Adam learning rate"
    assert gen.field_meaning(NetworkConfig, "entity_width").startswith("> 0: encode the env's")
    assert gen.field_meaning(PBTConfig, "burn_in_updates").startswith("No event before this update")


def test_readme_is_short_and_runs_the_ci_test_command():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    ci = (ROOT / ".ci/run").read_text().splitlines()
    command = ci[ci.index("# The README's test command:") + 1]
    assert command in readme, f"the README's test command is not .ci/run's: {command}"


def test_every_readme_figure_links_to_its_results_row():
    readme = (ROOT / "README.md").read_text()
    figures = re.findall(r"(\[?)!\[[^\]]*\]\((docs/[^)]+)\)(\]\(docs/results/[^)]+\))?", readme)
    assert figures, "the README shows no figure"
    results = "".join(p.read_text() for p in (ROOT / "docs/results").glob("*.md"))
    for opened, image, link in figures:
        assert opened and link, f"README figure {image} does not link to its results row"
        name = Path(image).name
        assert f"docs/{name}" in results, f"no results row gives the command of {name}"


def test_every_figure_has_a_results_row():
    topics = "".join(
        p.read_text() for p in (ROOT / "docs/results").glob("*.md") if not p.stem.startswith("log")
    )
    figures = [p for ext in ("png", "gif", "svg") for p in (ROOT / "docs").glob(f"*.{ext}")]
    missing = sorted(p.name for p in figures if p.name not in topics)
    assert not missing, (
        f"figures without a row (command, machine, date) in docs/results/: {missing}"
    )
