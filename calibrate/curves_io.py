"""Learning curves read for the skills fit (calibrate/skills_fit.py ``Curve``).

``digits_runs``: the ``runs.json`` that ``bench/bench_digits.py`` writes (results/digits/): each run
at momentum 0.9 and batch 8 with its seed, a constant lr (``const``) or that lr divided by 10 from
``drop_at`` on (``drop``), and its readings.
"""

from __future__ import annotations

import json
from pathlib import Path

from hetune.calibrate.skills_fit import Curve


def digits_runs(path: str | Path, kinds: tuple[str, ...] = ("const", "drop")) -> list[Curve]:
    """The runs of a digits ``runs.json`` whose kind is in ``kinds``, named ``<kind>-lr<lr>[-at<drop>]-s<seed>``."""
    data = json.loads(Path(path).read_text())
    setup = data["meta"]["setup"]
    m, batch = float(setup["momentum"]), int(setup["batch"])
    out = []
    for r in data["runs"]:
        if r["kind"] not in kinds:
            continue
        # older files state the horizon and the drop once, in the setup
        n, lr = int(r.get("iterations", setup["iterations"])), float(r["lr"])
        if r["kind"] == "drop":
            at = int(r.get("drop_at", setup["drop_at"]))
            segs: tuple[tuple[float, float, int], ...] = ((lr, m, at), (lr / 10, m, n))
            name = f"drop-lr{lr:g}-at{at}-s{r['seed']}"
        else:
            segs = ((lr, m, n),)
            name = f"const-lr{lr:g}-s{r['seed']}"
        out.append(Curve(name, int(r["seed"]), segs, tuple((int(i), float(a)) for i, a, *_ in r["readings"]), batch))
    return out
