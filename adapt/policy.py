"""``hetune adapt learn`` / ``evaluate``: a REINFORCE policy that decides where to deepen a model.

State: features of the model's structure and of the time left, never layer names: per deepenable
block (layers, log2 width, log10 parameters), for the whole model (conv / linear / batch-norm /
other layer counts, depth, log10 parameters), the age of each block's newest layer (so two orders of
the same deepenings differ), the fraction of the budget left, its logarithm, a half period of sine
and cosine of it (mostly monotonic, so a scenario outside the learned times left is not met by a
feature that turns back), and the decision index. Layers of an unseen kind only change the counts.

Learning: batched REINFORCE over the table(s), reward = the sequence's accuracy standardised per
table, a per-state moving-average baseline, a softmax temperature annealed from 4 to 0.3 and an
entropy bonus (0.2 at first) decaying to 0; Adam, each update's gradient norm clipped at 5
(``learn``'s ``clip``). Greedy play (argmax) is what evaluate reports. The alternatives tried for
each choice, with their measurements, are in bench/ADAPT-HISTORY.md.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from hetune.adapt.tables import SEQUENCES, Table, read_table
from hetune.adapt.net2net import NOTHING, SMALL_MODELS, SmallCNN, deepened, prefixes
from hetune.sim.errors import ConfigError
from hetune.sim.tomlfile import atomic_write_json

FEATURES = 27
NO_ADAPTATION = (NOTHING, NOTHING, NOTHING)


def _block_stats(group: nn.Module) -> list[float]:
    layers = [m for m in group.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    width = max([getattr(m, "out_channels", getattr(m, "out_features", 1)) for m in layers] or [1])
    params = sum(p.numel() for p in group.parameters())
    return [float(len(layers)), math.log2(width), math.log10(params + 1)]


def structure_features(model: nn.Module) -> list[float]:
    """Features of a model's structure (16 numbers), from its modules' types, shapes and sizes."""
    leaves = [m for m in model.modules() if not list(m.children())]
    conv = sum(isinstance(m, nn.Conv2d) for m in leaves)
    lin = sum(isinstance(m, nn.Linear) for m in leaves)
    bn = sum(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in leaves)
    other = len(leaves) - conv - lin - bn
    params = sum(p.numel() for p in model.parameters())
    blocks: list[float] = []
    if isinstance(model, SmallCNN):
        for g in (model.g0, model.g1, model.g2):
            blocks += _block_stats(g)
    else:
        blocks = [0.0] * 9
    return blocks + [float(conv), float(lin), float(bn), float(other), float(conv + lin),
                     math.log10(params + 1), float(len(leaves))]


def layer_age_features(history: tuple[int, ...] | list[int]) -> list[float]:
    """Per deepenable block, 1 / (decisions since a layer was last added to it), 0 if never (3 numbers).

    Two orders of the same deepenings give the same structure (deepen 0 then 1, or 1
    then 0); the age of each block's newest layer tells them apart, so the policy can
    choose differently after each (their training histories, and outcomes, differ).
    """
    ages = []
    for block in range(3):
        last = [k for k, a in enumerate(history) if a == block]
        ages.append(1.0 / (len(history) - last[-1]) if last else 0.0)
    return ages


def state_features(model: nn.Module, time_left: float, total: float, step: int,
                   history: tuple[int, ...] | list[int] = ()) -> list[float]:
    """The full state: structure (16), layer ages (3), time left (4), decision one-hot (3), bias (1).

    Args:
        model: the model as it is now (deepened by ``history``).
        time_left: seconds left in the budget.
        total: the budget, seconds.
        step: the decision index (0, 1, 2).
        history: the actions taken at the earlier decisions.
    """
    frac = max(0.0, min(1.0, time_left / total)) if total > 0 else 0.0
    # the log spreads out the small times left, where one epoch more or less matters most
    # (+ 0.05 keeps it finite, -3.0, when the budget is spent); a half period of sin/cos
    # adds curvature without turning back the way higher harmonics do
    time = [frac, math.log(frac + 0.05), math.sin(math.pi * frac), math.cos(math.pi * frac)]
    onehot = [1.0 if step == i else 0.0 for i in range(3)]
    return structure_features(model) + layer_age_features(history) + time + onehot + [1.0]


class Policy(nn.Module):
    """MLP from state features to 4 action logits."""

    def __init__(self, features: int = FEATURES, hidden: int = 64) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                                 nn.Linear(hidden, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class TableStates:
    """Precomputed states of every decision prefix of a table (1 + 4 + 16 states) and standardised rewards."""

    def __init__(self, table: Table) -> None:
        self.table = table
        total = next(iter(table.rows.values())).total_time
        if table.model not in SMALL_MODELS:
            raise ConfigError(table.source, "model", f"unknown base model {table.model!r} "
                              f"(known: {', '.join(SMALL_MODELS)})")
        feats = []
        for depth in range(3):
            for prefix in prefixes(depth):
                rows = [r for r in table.rows.values() if r.actions[:depth] == prefix]
                t_left = float(np.mean([r.times_left[depth] for r in rows]))
                feats.append(state_features(deepened(table.model, prefix), t_left, total, depth, prefix))
        self.x = torch.tensor(feats, dtype=torch.float32)  # rows: [root, a1 (4), a1*4+a2 (16)]
        acc = np.array([table.rows[s].acc for s in SEQUENCES])
        std = acc.std() or 1.0
        self.reward = torch.tensor((acc - acc.mean()) / std, dtype=torch.float32)  # index a1*16+a2*4+a3

    def state_index(self, step: int, actions: torch.Tensor) -> torch.Tensor:
        if step == 0:
            return torch.zeros(len(actions), dtype=torch.long)
        if step == 1:
            return 1 + actions[:, 0]
        return 5 + actions[:, 0] * 4 + actions[:, 1]


def learn(tables: list[Table], episodes: int = 20_000, seed: int = 0, batch: int = 32,
          lr: float = 3e-3, temperature: tuple[float, float] = (4.0, 0.3),
          entropy: float = 0.2, init: Policy | None = None,
          clip: float = 5.0) -> tuple[Policy, list[dict[str, float]]]:
    """Train a policy on one or more tables; returns it and the objective per update.

    Args:
        tables: scenario tables (several train one policy across scenarios).
        episodes: episodes in all.
        seed: seed of initialisation and sampling.
        batch: episodes per update.
        lr: Adam learning rate.
        temperature: softmax temperature at the first and at the last update (annealed geometrically).
        entropy: weight of the entropy bonus at the first update (decays linearly to 0).
        init: start from this policy's weights (fine-tuning one learned on other tables), else from
            a fresh initialisation. The schedule is the same: 2,000 episodes from another scenario's
            policy ranked in the top 3 in 36 of 40 runs, against 28 from scratch, and starting the
            temperature at 1 or 0.5 instead of 4 gave 31 and 16 (bench/bench_adapt.py --finetune).
        clip: largest gradient norm of an update (0 = none). At the low temperatures of the
            end of the schedule one unlucky batch can push the policy onto a bad sequence for
            good: on a convnet3 table (results/adapt6, early-middle, 4 repeats) an update of norm
            34 made seed 4 play the 54th of 64 sequences from then on (seeds 1 and 2: 18th, 9th).
            Updates on the convnet2 tables stay below 2 (99th percentile 0.6-0.9), so 5 cuts
            only such spikes and leaves every convnet2 result as it was; 1 fixed convnet3 too
            but moved some convnet2 leave-one-out and held-out ranks by seed noise.
    """
    threads = torch.get_num_threads()
    # a 64-unit MLP gains nothing from intra-op threads, and on a busy host they spin-wait
    # for each other (measured: 1.5 s with one thread, 4-56 s with two while other jobs ran)
    torch.set_num_threads(1)
    try:
        return _learn(tables, episodes, seed, batch, lr, temperature, entropy, init, clip)
    finally:
        torch.set_num_threads(threads)


def _learn(tables: list[Table], episodes: int, seed: int, batch: int, lr: float,
           temps: tuple[float, float], entropy0: float, init: Policy | None,
           clip: float) -> tuple[Policy, list[dict[str, float]]]:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    states = [TableStates(t) for t in tables]
    x_all = torch.cat([st.x for st in states])  # every table's 21 states, stacked
    offset = torch.tensor([i * len(states[0].x) for i in range(len(states))])
    reward_all = torch.stack([st.reward for st in states])  # (tables, 64)
    policy = Policy()
    if init is not None:
        policy.load_state_dict(init.state_dict())  # a copy: the policy given is left as it was
    opt = torch.optim.Adam(policy.parameters(), lr=lr)
    updates = max(1, episodes // batch)
    # a baseline per state (the running mean return from it), not one number: the
    # advantage of a late decision is then measured against its own subtree, which
    # tells apart third actions whose outcomes differ by a fraction of the table's spread
    baseline = torch.zeros(len(x_all))
    history = []
    for u in range(updates):
        frac = u / max(1, updates - 1)
        temperature = temps[0] * (temps[1] / temps[0]) ** frac  # geometric from temps[0] to temps[1]
        entropy_coef = entropy0 * (1.0 - frac)
        which = torch.randint(len(states), (batch,), generator=gen)
        actions = torch.zeros(batch, 3, dtype=torch.long)
        logps, visited = [], []
        entropy = torch.zeros(batch)
        for step in range(3):
            s_idx = offset[which] + states[0].state_index(step, actions)
            dist = torch.distributions.Categorical(logits=policy(x_all[s_idx]) / temperature)
            a = torch.multinomial(dist.probs, 1, generator=gen).squeeze(1)
            actions[:, step] = a
            logps.append(dist.log_prob(a))
            visited.append(s_idx)
            entropy = entropy + dist.entropy()
        reward = reward_all[which, actions[:, 0] * 16 + actions[:, 1] * 4 + actions[:, 2]]
        objective = torch.zeros(batch)
        for s_idx, lp in zip(visited, logps):
            objective = objective + (reward - baseline[s_idx]) * lp
            # move each visited state's baseline 10% of the way to its batch-mean return
            sums = torch.zeros(len(x_all)).index_add_(0, s_idx, reward)
            counts = torch.zeros(len(x_all)).index_add_(0, s_idx, torch.ones(batch))
            seen = counts > 0
            baseline[seen] += 0.1 * (sums[seen] / counts[seen] - baseline[seen])
        loss = -objective.mean() - entropy_coef * entropy.mean()
        opt.zero_grad()
        loss.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(policy.parameters(), clip)
        opt.step()
        history.append({"update": u, "episodes": (u + 1) * batch, "mean_reward": float(reward.mean()),
                        "temperature": temperature})
    return policy, history


@torch.no_grad()
def greedy(policy: Policy, table: Table) -> tuple[int, int, int]:
    """The policy's greedy action sequence on a table."""
    st = TableStates(table)
    actions = torch.zeros(1, 3, dtype=torch.long)
    for step in range(3):
        actions[0, step] = int(policy(st.x[st.state_index(step, actions)]).argmax(1)[0])
    return tuple(int(a) for a in actions[0])  # type: ignore[return-value]


def save_policy(policy: Policy, out: Path, meta: dict[str, Any]) -> str:
    """Write policy.pt and policy.json into ``out``; returns the weights' sha256."""
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / ".policy.pt.tmp"
    torch.save(policy.state_dict(), tmp)
    tmp.replace(out / "policy.pt")
    digest = hashlib.sha256((out / "policy.pt").read_bytes()).hexdigest()
    atomic_write_json(out / "policy.json", dict(meta, sha256=digest, features=FEATURES))
    return digest


def load_policy(path: Path) -> tuple[Policy, str]:
    """Load exactly the policy in ``path`` (a folder from learn); returns it and its sha256."""
    f = path / "policy.pt"
    if not f.is_file():
        raise ConfigError(str(path), "", "no policy.pt here (a folder written by `hetune adapt learn`)")
    state = torch.load(f, weights_only=True)
    features = int(state["net.0.weight"].shape[1]) if "net.0.weight" in state else -1
    if features != FEATURES:  # e.g. a policy learned before the state gained features
        raise ConfigError(str(f), "", f"policy takes {features} state features, this hetune builds {FEATURES}: "
                          "learn it again with `hetune adapt learn`")
    policy = Policy()
    policy.load_state_dict(state)
    policy.eval()
    return policy, hashlib.sha256(f.read_bytes()).hexdigest()


def evaluate(policy_dir: Path, table_path: str, model: str = "") -> dict[str, Any]:
    """Greedy play on a table: the sequence, its accuracy and rank, the best sequence, the no-adaptation rank.

    Also how far the pick is below the best (``gap_to_best``, accuracy in [0, 1]) and that gap's
    standard error from the table's repeats (``gap_se``; None when the table has no ``acc_runs`` or
    ``acc_se``): with ``within_noise`` (gap <= 2 standard errors), whether the table can tell the
    pick from its best at all, which a rank alone does not say when a table's top is flat.
    """
    policy, digest = load_policy(policy_dir)
    table = read_table(table_path, model)
    seq = greedy(policy, table)
    best = table.best()
    gap, se = table.gap(best.actions, seq)
    known = not math.isnan(se)
    return {"policy": str(policy_dir), "policy_sha256": digest, "table": table_path,
            "sequence": list(seq), "accuracy": table.rows[seq].acc, "rank": table.rank(seq),
            "best_sequence": list(best.actions), "best_accuracy": best.acc,
            "gap_to_best": round(gap, 6), "gap_se": round(se, 6) if known else None,
            "within_noise": gap <= 2 * se if known else None,
            "no_adaptation_rank": table.rank(NO_ADAPTATION), "sequences": len(table.rows)}
