"""Size before start: estimate a simulation's events and memory, and refuse one past the limit.

The estimate is deliberately simple (population x chunks x events per chunk) so it can be made
before anything is built; the constants are measured on the default experiment (gavel-12, 20 trials,
1000 iterations, interval 50) with tracemalloc, over the five shipped strategies.
"""

from __future__ import annotations

from dataclasses import dataclass

from hetune.sim.errors import ConfigError
from hetune.sim.loader import RunInputs

EVENTS_PER_CHUNK = 7  # most measured: 6.9 events per trial and perturbation interval (throughput-proportional)
BYTES_PER_EVENT = 1100  # most measured: 1,021 bytes of peak memory per event (tune-default)
BYTES_PER_DEVICE = 2000  # a worker and its SimPy resources, per device carved
DEFAULT_MAX_EVENTS = 5_000_000  # about 5 GiB: 10,000 trials x 1,000 iterations (the scale benchmark) fit


@dataclass(frozen=True)
class SizeEstimate:
    """What one simulation of an experiment is expected to hold.

    Args:
        events: events in its log.
        memory_bytes: peak memory, bytes.
        devices: devices on the cluster (GPUs, or cores of CPU nodes).
    """

    events: int
    memory_bytes: int
    devices: int


def estimate(inputs: RunInputs) -> SizeEstimate:
    """Estimate one simulation's events and memory from population, iterations and cluster size."""
    info = inputs.experiment.experiment
    interval = min(inputs.experiment.pbt.perturbation_interval, info.checkpoint_interval)
    chunks = -(-info.stop_iterations // interval)
    devices = sum(n.count * (n.gpus or n.cpus) for n in inputs.cluster.nodes)
    events = info.population * chunks * EVENTS_PER_CHUNK + 2 * devices + _fault_events(inputs, devices)
    return SizeEstimate(events, events * BYTES_PER_EVENT + devices * BYTES_PER_DEVICE, devices)


def _fault_events(inputs: RunInputs, devices: int) -> int:
    """Events the experiment's drawn node failures add: two per device and outage, over a horizon
    of every iteration run one after another on the slowest device type, spread over the devices
    (a pessimistic makespan). A trace adds its own length."""
    faults = inputs.experiment.faults
    if not faults.enabled:
        return 0
    info = inputs.experiment.experiment
    step = inputs.calibration.step_time_fn(info.model, info.batch_size, inputs.cluster, inputs.source)
    slowest = max(step(d, 1) for d in {n.device for n in inputs.cluster.nodes})
    horizon_s = info.population * info.stop_iterations * slowest / max(1, devices)
    events = 2 * devices * len(faults.trace)
    for n in inputs.cluster.nodes:
        model = faults.devices.get(n.device)
        if model is not None:
            cycles = horizon_s / (model.mtbf_s + model.replace_s) + 1
            events += int(2 * n.count * (n.gpus or n.cpus) * cycles)
    return events


def check_size(inputs: RunInputs, max_events: int, flag: str = "--max-events") -> SizeEstimate:
    """Raise ConfigError in one line, with the estimate and the flag that lifts the limit, past ``max_events``.

    Args:
        inputs: the loaded experiment.
        max_events: the limit, events per simulation.
        flag: the command-line flag that sets the limit.
    """
    if max_events < 1:
        raise ConfigError(flag, "", f"must be >= 1, got {max_events}")
    est = estimate(inputs)
    if est.events > max_events:
        info = inputs.experiment.experiment
        raise ConfigError(inputs.source, "", f"too large to simulate: about {est.events:,} events and "
                          f"{est.memory_bytes / 2**30:,.1f} GiB ({info.population:,} trials x "
                          f"{info.stop_iterations:,} iterations, {est.devices:,} devices"
                          f"{', node failures of [faults]' if inputs.experiment.faults.enabled else ''}), "
                          f"over the limit of "
                          f"{max_events:,} events; raise it with {flag} N to run anyway")
    return est
