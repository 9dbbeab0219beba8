#!/usr/bin/env python3
"""Reference answers from the real Accelerate (pinned in scripts/requirements.txt), for the C++
tests of engine/accelerate and engine/plan. Every expectation the tests compare against comes from Accelerate's own
code run here, never from the code under test.

Usage (prints one JSON object on stdout):
  accelerate_oracle.py load FILE...            load each file with accelerate's load_config_from_file
  accelerate_oracle.py json-check FILE...      json.load each file (DeepSpeed JSON), report errors
  accelerate_oracle.py questionnaire SCRIPTS   drive `accelerate config` with scripted answers;
                                               SCRIPTS is a JSON file {name: [answer lines...]}
  accelerate_oracle.py launch-flags           every option of `accelerate launch`'s parser:
                                               {"flags": [[option strings...], ...]}
  accelerate_oracle.py mesh R S [T]           Accelerate's own device mesh for dp_replicate_size R x
                                               dp_shard_size S x tp_size T (ParallelismConfig.get_device_mesh
                                               on a fake process group of R*S*T ranks, one rank at a time):
                                               {"ranks": [{dim name: [its group's ranks]}, ...]}
  accelerate_oracle.py launch-env CONFIG [FLAG...]
                                               run the real `accelerate launch --config_file CONFIG
                                               FLAG... dump.py` and report each started process's
                                               environment (what Accelerate and torchrun added to
                                               this process's own), plus psutil's physical cores

Values are encoded so that types survive: JSON int/float/bool/str/null/list/object, a dict with
a non-str key as {"__dict__": [[k, v], ...]}, any other Python object as {"__py__": repr(v)},
non-finite floats as {"__float__": "nan"|"inf"|"-inf"}.
"""

import builtins
import contextlib
import io
import json
import math
import os
import sys
import tempfile
from enum import Enum


def norm(v):
    if isinstance(v, Enum):
        return norm(v.value)
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        if math.isnan(v):
            return {"__float__": "nan"}
        if math.isinf(v):
            return {"__float__": "inf" if v > 0 else "-inf"}
        return v
    if isinstance(v, (list, tuple)):
        return [norm(x) for x in v]
    if isinstance(v, dict):
        if all(isinstance(k, str) for k in v):
            return {k: norm(x) for k, x in v.items()}
        return {"__dict__": [[norm(k), norm(x)] for k, x in v.items()]}
    return {"__py__": repr(v)}


def cmd_load(paths):
    import yaml
    from dataclasses import fields
    from accelerate.commands.config.config_args import load_config_from_file

    out = {}
    for path in paths:
        entry = {}
        try:
            with open(path, encoding="utf-8") as f:
                entry["raw"] = norm(json.load(f) if path.endswith(".json") else yaml.safe_load(f))
        except Exception as e:  # noqa: BLE001 - we report what Python says
            entry["raw_error"] = f"{type(e).__name__}: {e}"
            if isinstance(e, json.JSONDecodeError):
                entry["raw_error_line"] = e.lineno
        try:
            cfg = load_config_from_file(path)
            entry["ok"] = True
            entry["kind"] = type(cfg).__name__
            entry["fields"] = {f.name: norm(getattr(cfg, f.name)) for f in fields(cfg)}
            with tempfile.TemporaryDirectory() as d:
                y = os.path.join(d, "c.yaml")
                j = os.path.join(d, "c.json")
                cfg.to_yaml_file(y)
                cfg.to_json_file(j)
                entry["yaml"] = open(y, encoding="utf-8").read()
                entry["json"] = open(j, encoding="utf-8").read()
        except Exception as e:  # noqa: BLE001
            entry["ok"] = False
            entry["error_type"] = type(e).__name__
            entry["error"] = str(e)
        out[path] = entry
    return out


def cmd_json_check(paths):
    out = {}
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                json.load(f)
            out[path] = {"ok": True}
        except json.JSONDecodeError as e:
            out[path] = {"ok": False, "lineno": e.lineno, "colno": e.colno, "msg": e.msg}
    return out


class ScriptedMenu:
    """Stands in for accelerate's BulletMenu in its line mode (the one it uses in Colab): read a
    line; not an integer (an empty line included) -> the default; an index out of range is asked
    again (where Accelerate would crash)."""

    lines = None
    prompts = None

    def __init__(self, prompt=None, choices=()):
        self.prompt = prompt
        self.choices = list(choices)

    def run(self, default_choice=0):
        ScriptedMenu.prompts.append(self.prompt)
        while True:
            line = next(ScriptedMenu.lines)
            try:
                index = int(line)
            except ValueError:
                return default_choice
            if 0 <= index < len(self.choices):
                return index


def cmd_questionnaire(script_file):
    from accelerate.commands.config import cluster, config, config_utils

    # Hardware/package probes: a Linux box with CUDA GPUs and every optional package present, so
    # that no branch is refused for a missing package (Shardscope implements these itself).
    for name in ["is_mps_available", "is_npu_available", "is_mlu_available", "is_sdaa_available",
                 "is_musa_available", "is_xpu_available", "is_hpu_available", "is_neuron_available"]:
        setattr(cluster, name, lambda: False)
    for name in ["is_deepspeed_available", "is_transformers_available", "is_fp8_available",
                 "is_transformer_engine_available", "is_msamp_available", "is_torchao_available"]:
        setattr(cluster, name, lambda: True)
    config_utils.BulletMenu = ScriptedMenu

    with open(script_file, encoding="utf-8") as f:
        scripts = json.load(f)
    out = {}
    for name, lines in scripts.items():
        prompts = []
        it = iter(lines)
        ScriptedMenu.lines = it
        ScriptedMenu.prompts = prompts

        def scripted_input(prompt=""):
            prompts.append(prompt)
            try:
                return next(it)
            except StopIteration:
                raise EOFError("script ended") from None

        builtins.input = scripted_input
        entry = {}
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                cfg = config.get_user_input()
            with tempfile.TemporaryDirectory() as d:
                y = os.path.join(d, "c.yaml")
                cfg.to_yaml_file(y)
                entry["yaml"] = open(y, encoding="utf-8").read()
            entry["ok"] = True
        except Exception as e:  # noqa: BLE001
            entry["ok"] = False
            entry["error"] = f"{type(e).__name__}: {e}"
        entry["prompts"] = prompts
        entry["printed"] = printed.getvalue()
        entry["unused_answers"] = len(list(it))
        out[name] = entry
    return out


DUMP_SCRIPT = """
import json, os, sys
rank = os.environ.get("RANK", "0")
with open(os.path.join(sys.argv[1], "env_" + rank + ".json"), "w") as f:
    json.dump(dict(os.environ), f)
"""


def stub_package(root, name, version, files):
    """An installed-looking package: its files ({relative path: text}) and its dist-info."""
    for path, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(root, name, path)), exist_ok=True)
        open(os.path.join(root, name, path), "w").write(text)
    info = os.path.join(root, f"{name}-{version}.dist-info")
    os.makedirs(info)
    open(os.path.join(info, "METADATA"), "w").write(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def cmd_launch_env(config, flags):
    """The environment each process of `accelerate launch` receives. DeepSpeed and torchao are not
    installed here: stub packages (name, version, the one constant the launcher imports) let
    Accelerate's own DeepSpeed launcher run and its fp8 check pass (it only asks whether an fp8
    backend is installed); the ranks start through torchrun as usual and import neither."""
    import subprocess

    import psutil

    config = os.path.abspath(config)
    with tempfile.TemporaryDirectory() as d:
        stub = os.path.join(d, "stub")
        stub_package(stub, "deepspeed", "0.17.0", {
            "__init__.py": "__version__ = '0.17.0'\n",
            "launcher/__init__.py": "",
            "launcher/runner.py": "DEEPSPEED_ENVIRONMENT_NAME = '.deepspeed_env'\n"})
        stub_package(stub, "torchao", "0.13.0", {"__init__.py": "__version__ = '0.13.0'\n"})
        script = os.path.join(d, "dump.py")
        open(script, "w").write(DUMP_SCRIPT)
        out = os.path.join(d, "out")
        os.makedirs(out)
        base = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS",)}
        base["PYTHONPATH"] = stub + (os.pathsep + base["PYTHONPATH"] if base.get("PYTHONPATH") else "")
        cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", config, *flags, script, out]
        proc = subprocess.run(cmd, env=base, capture_output=True, text=True, timeout=300, cwd=d)
        result = {"returncode": proc.returncode, "stderr": proc.stderr[-4000:],
                  "physical_cores": psutil.cpu_count(logical=False), "processes": {}}
        for name in sorted(os.listdir(out)):
            env = json.load(open(os.path.join(out, name)))
            added = {k: v for k, v in env.items() if base.get(k) != v}
            result["processes"][name[len("env_"):-len(".json")]] = added
        return result


def cmd_launch_flags():
    from accelerate.commands.launch import launch_command_parser

    parser = launch_command_parser()
    return {"flags": [list(a.option_strings) for a in parser._actions if a.option_strings]}


def cmd_mesh(replicate, shard, tp=1):
    import torch.distributed as dist
    from accelerate.parallelism_config import ParallelismConfig
    from torch.testing._internal.distributed.fake_pg import FakeStore

    world = replicate * shard * tp
    ranks = []
    for rank in range(world):
        dist.init_process_group("fake", rank=rank, world_size=world, store=FakeStore())
        config = ParallelismConfig(dp_replicate_size=replicate, dp_shard_size=shard, tp_size=tp)
        mesh = config.get_device_mesh("cpu")
        ranks.append({name: dist.get_process_group_ranks(mesh.get_group(name)) for name in mesh.mesh_dim_names})
        dist.destroy_process_group()
    return {"ranks": ranks}


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "load":
        result = cmd_load(args)
    elif cmd == "json-check":
        result = cmd_json_check(args)
    elif cmd == "questionnaire":
        result = cmd_questionnaire(args[0])
    elif cmd == "mesh":
        result = cmd_mesh(*(int(a) for a in args[:3]))
    elif cmd == "launch-flags":
        result = cmd_launch_flags()
    elif cmd == "launch-env":
        result = cmd_launch_env(args[0], args[1:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    json.dump(result, sys.stdout, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
