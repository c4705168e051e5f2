"""Does a calibration describe the host a real run uses? One line when it does not.

A calibration's timings belong to the host (and software) they were measured on: a file
measured elsewhere, or published, predicts another machine. ``validate`` says so before it
starts, ``compare`` in its report and fidelity.json.
"""

from __future__ import annotations

import platform
from typing import Any


def this_host() -> dict[str, str]:
    """Host name and the versions a calibration records (torch, ray, python)."""
    out = {"host": platform.node(), "python": platform.python_version()}
    try:
        import torch
        out["torch"] = torch.__version__
    except ImportError:
        pass
    try:
        import ray
        out["ray"] = ray.__version__
    except ImportError:
        pass
    return out


def calibration_note(provenance: dict[str, Any], where: str, host: dict[str, str] | None = None) -> str | None:
    """None when ``provenance`` was measured on ``host`` (default: this one) with its versions, else one line.

    Args:
        provenance: the calibration file's [provenance] table.
        where: the calibration file, for the message.
        host: the run's host and versions (``this_host()`` of the machine that ran it).
    """
    host = host or this_host()
    measured_on = provenance.get("host")
    if not isinstance(measured_on, str) or not measured_on:
        return (f"{where} records no measuring host (published or fitted rows): its timings do not describe "
                f"{host['host']!r}; run hetune calibrate here to predict runs on it")
    if measured_on != host["host"]:
        return (f"{where} was measured on host {measured_on!r}, not on {host['host']!r}: its timings describe "
                f"that host; run hetune calibrate here to predict runs on this one")
    differ = [f"{k} {provenance[k]} there, {host[k]} here" for k in ("torch", "ray", "python")
              if k in provenance and k in host and str(provenance[k]) != host[k]]
    if differ:
        return f"{where} was measured on this host with other software ({'; '.join(differ)})"
    return None
