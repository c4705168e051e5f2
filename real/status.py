"""The original system's status table, printed every report interval while a real run goes."""

from __future__ import annotations

import sys
import time
from typing import Any

from ray.tune import Callback

from hetune.real.recorder import EventLog, trial_index


class StatusCallback(Callback):
    """Per trial: status, device type, node, lr, momentum, batch, iteration, accuracy, run time;
    free CPUs and GPUs; perturbations so far.

    Args:
        log: the run's event log (for devices and exploit counts).
        interval_s: seconds between tables.
        batch_size: samples per iteration.
    """

    def __init__(self, log: EventLog, interval_s: float, batch_size: int) -> None:
        self.log = log
        self.interval_s = interval_s
        self.batch = batch_size
        self._last = time.time()

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        if time.time() - self._last < self.interval_s:
            return
        self._last = time.time()
        import ray

        free = ray.available_resources()
        exploits = sum(1 for e in self.log.events if e["kind"] == "exploit")
        lines = [f"== hetune status at {self.log.now():,.0f} s: free CPUs {free.get('CPU', 0):g}, "
                 f"free GPUs {free.get('GPU', 0):g}, perturbations {exploits}",
                 f"{'trial':>5} {'status':<10}{'device':<10}{'node':<14}{'lr':>9}{'momentum':>9}{'batch':>6}"
                 f"{'iter':>6}{'acc':>7}{'run s':>8}"]
        for t in sorted(trials, key=trial_index):
            r = t.last_result or {}
            st = self.log.state.get(trial_index(t), {})
            lines.append(f"{trial_index(t):>5} {t.status:<10}{str(r.get('device', '-')):<10}"
                         f"{str(r.get('node', '-')):<14}{t.config.get('lr', float('nan')):>9.4g}"
                         f"{t.config.get('momentum', float('nan')):>9.3g}{self.batch:>6}"
                         f"{st.get('iteration', 0):>6}{(st.get('accuracy') or 0):>7.3f}"
                         f"{r.get('time_total_s', 0):>8.0f}")
        print("\n".join(lines), file=sys.stderr, flush=True)
