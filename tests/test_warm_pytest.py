"""The worker runs pytest once before it forks any job: the installed plugins are
loaded there, once, and the process is put back as it was."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    from importlib.metadata import entry_points
    from mutant_gate.engine.harness import runner

    plugins = sorted({ep.module.split(":")[0] for ep in entry_points(group="pytest11")})
    before = {
        "path": list(sys.path), "meta_path": [repr(f) for f in sys.meta_path],
        "env": dict(os.environ), "cwd": os.getcwd(),
        "loaded": [p for p in plugins if p in sys.modules],
    }
    runner.warm_pytest()
    after = {
        "path": list(sys.path), "meta_path": [repr(f) for f in sys.meta_path],
        "env": dict(os.environ), "cwd": os.getcwd(),
        "loaded": [p for p in plugins if p in sys.modules],
        "warm_module": "test_mg_warm" in sys.modules,
    }
    print(json.dumps({"plugins": plugins, "before": before, "after": after}))
    """
)


def test_warm_pytest_loads_the_installed_plugins_and_restores_the_process(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    before, after = data["before"], data["after"]
    # every plugin module pytest would load on a job's first run is loaded now
    assert set(after["loaded"]) == set(data["plugins"])
    assert set(data["plugins"]) - set(before["loaded"]), "no plugin left to load: nothing tested"
    for key in ("path", "meta_path", "env", "cwd"):
        assert after[key] == before[key], key
    assert not after["warm_module"]  # the warm-up's own test module is gone
