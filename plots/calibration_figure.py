"""Calibration figure: step time against batch size, measured points and fitted lines."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hetune.plots.style import LINESTYLES, MARKERS, figure, save
from hetune.sim.throughput import CalibrationConfig


def calibration(cal: CalibrationConfig, out: Path, label: str, pdf: bool = False) -> list[Path]:
    """One panel per model: per device type, measured step times (markers) and the fitted line."""
    models = sorted(cal.models)
    fig, axes = figure(4.0 * len(models), 3.6, ncols=len(models), squeeze=False)
    for ax, model in zip(axes[0], models):
        devices = sorted(cal.models[model])
        for i, dev in enumerate(devices):
            dm = cal.models[model][dev]
            pts = [(s.batch, s.step_time_s) for s in cal.samples if s.model == model and s.device == dev and s.ok]
            top = max([b for b, _ in pts] + [512])
            xs = np.linspace(1, top, 50)
            ax.plot(xs, dm.alpha_s + dm.beta_s_per_sample * xs, color="black", linestyle=LINESTYLES[i % 4],
                    linewidth=1, label=f"{dev} (R²={dm.r2:.2f})")
            if pts:
                bx, by = zip(*pts)
                ax.scatter(bx, by, marker=MARKERS[i % len(MARKERS)], color="0.4", s=16, zorder=3)
        ax.set_xlabel("batch size (samples)")
        ax.set_ylabel("step time (s)")
        ax.set_yscale("log")
        ax.set_title(model)
        ax.legend(fontsize=6)
    fig.suptitle(f"Calibration: {label} (markers measured or published, lines fitted)")
    return save(fig, out, f"{label}-calibration", pdf)
