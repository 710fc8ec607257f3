#!/usr/bin/env python3
"""Feed the launch commands ``kvstrategies plan`` prints to the installed SGLang's own argparse.

    .ci-venv/bin/python tools/check_printed_commands.py                 # the release installed
    .ci-sglang-0.5.15/bin/python tools/check_printed_commands.py -n 200 --seed 3

Draws ``-n`` random deployments (a seeded draw over the flags the planner takes: presets, GPUs,
TP / EP / DCP / PP / attention DP, KV dtype, page size, MTP and separate EAGLE3 drafts, context
override, the Mamba SSM state dtype), plans each for the installed release
(``--sglang-version``), and parses the printed command and every fix's command with
``ServerArgs.add_cli_args`` (``sglang.srt.server_args``): exactly what ``python -m
sglang.launch_server`` would accept or refuse at its first step. Exit 1 when SGLang refuses a
command, naming it and argparse's message. The recorded flag tables
(``kvstrategies/sglang/tables/flags.py``, ``flag_releases.py``) are the offline side of this
check (``tests/sglang/test_printed_command.py`` pastes printed commands back).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PRESETS = ("llama-3.1-8b", "qwen3-30b-a3b", "deepseek-v3", "minimax-m2.5", "gpt-oss-20b", "llama-3.1-70b",
           "qwen3-next-80b-a3b", "gemma-3-27b")  # fmt: skip
GPUS = ("H100", "H200", "B200", "L40S", "L4", "A100-40GB")
#: an EAGLE3 head's config.json (what a --speculative-draft-model-path folder holds)
EAGLE3_DRAFT = {
    "architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 4096, "intermediate_size": 14336,
    "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 1, "vocab_size": 128256,
    "draft_vocab_size": 32000, "torch_dtype": "bfloat16", "rms_norm_eps": 1e-05, "tie_word_embeddings": False,
    "max_position_embeddings": 2048, "model_type": "llama",
}  # fmt: skip


def sglang_parser() -> tuple[str, argparse.ArgumentParser]:
    """The installed SGLang's release and its server argparse (``ServerArgs.add_cli_args``)."""
    from kvstrategies.sglang.bridge.runtime import install_torchvision_stub

    install_torchvision_stub()  # releases up to 0.5.21 import torchvision from `import sglang`
    from sglang.srt.server_args import ServerArgs
    from sglang.version import __version__

    parser = argparse.ArgumentParser(prog="sglang.launch_server", exit_on_error=False)
    ServerArgs.add_cli_args(parser)
    return str(__version__), parser


def draw(rng: random.Random, release: str, draft_folder: str) -> list[str]:
    """One random ``kvstrategies plan`` argument list for ``release``."""
    tp = rng.choice((1, 2, 4, 8))
    argv = ["plan", rng.choice(PRESETS), "--gpu", rng.choice(GPUS), "--tp", str(tp), "--sglang-version", release]
    for flag, choices in (("--ep-size", (1, 2, 4)), ("--dcp-size", (1, 2)), ("--pp-size", (1, 2)),
                          ("--attn-dp", (1, 2))):  # fmt: skip
        value = min(rng.choice(choices), tp) if flag != "--pp-size" else rng.choice(choices)
        if value != 1:
            argv += [flag, str(value)]
    for flag, choices in (("--kv-cache-dtype", (None, "fp8_e4m3")), ("--page-size", (None, "16", "64")),
                          ("--mamba-ssm-dtype", (None, "bfloat16"))):  # fmt: skip
        value = rng.choice(choices)
        if value is not None:
            argv += [flag, value]
    if rng.random() < 0.2:
        argv += ["--context-length", "262144", "--allow-context-length-override"]
    draft = rng.choice((None, "mtp", "eagle3"))
    if draft == "mtp":
        argv += ["--speculative-algorithm", "EAGLE", "--speculative-num-steps", "2",
                 "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "3"]  # fmt: skip
    elif draft == "eagle3":
        argv += ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", draft_folder]
    return argv


def planned(argv: list[str]) -> dict[str, Any] | None:
    """The plan's JSON document, or None when the planner refuses the deployment."""
    from kvstrategies.cli.app import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*argv, "--json"])
    return json.loads(out.getvalue()) if code == 0 else None


def server_words(command: dict[str, Any]) -> list[str]:
    """The server's own arguments of a printed command (after ``-m sglang.launch_server``)."""
    words: list[str] = command["argv"]
    return words[words.index("sglang.launch_server") + 1:]


def refusal(parser: argparse.ArgumentParser, words: list[str]) -> str | None:
    """argparse's message when SGLang's parser refuses ``words``, else None."""
    try:
        _, unknown = parser.parse_known_args(words)
    except (argparse.ArgumentError, SystemExit) as exc:
        return str(exc)
    return f"unrecognized arguments: {' '.join(unknown)}" if unknown else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=120, help="random deployments to draw (default 120)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the draw (default 1)")
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error("-n must be at least 1")
    release, sglang = sglang_parser()
    rng = random.Random(args.seed)
    plans = fixes = refused_by_planner = 0
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="eagle3-draft-") as folder:
        (Path(folder) / "config.json").write_text(json.dumps(EAGLE3_DRAFT), encoding="utf-8")
        for _ in range(args.n):
            request = draw(rng, release, folder)
            document = planned(request)
            if document is None:
                refused_by_planner += 1
                continue
            plans += 1
            commands = [document["planner"]["sglang_command"]]
            commands += [fix["sglang_command"] for fix in document["planner"]["fixes"]]
            fixes += len(commands) - 1
            for command in commands:
                message = refusal(sglang, server_words(command))
                if message is not None:
                    failures.append(f"{command['text']}\n    planned from: kvstrategies {' '.join(request)}\n"
                                    f"    SGLang {release}'s argparse: {message}")
    for failure in failures:
        print(f"REFUSED {failure}")
    print(f"SGLang {release}'s argparse: {plans + fixes - len(failures)} of {plans + fixes} printed commands "
          f"accepted ({plans} plans, {fixes} fix commands; {refused_by_planner} of {args.n} deployments refused "
          f"by the planner, so no command)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
