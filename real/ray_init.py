"""Start or join Ray the same way in every subcommand: Ray's log lines out of the user's terminal,
token authentication found as ``ray start --head`` sets it up, and a failure in one line.

Ray 2.60 clusters started with ``ray start --head`` use token authentication, but ``ray.init``
turns it on for a client only when the address is "auto"; with an explicit address a client
without ``RAY_AUTH_MODE=token`` fails with a misleading "cannot connect". So, as Ray does for
"auto": when the mode is unset and a token is available (``RAY_AUTH_TOKEN``,
``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``), token mode is turned on for this process.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

from hetune.real.reach import check_reachable
from hetune.sim.errors import ConfigError

AUTH_HINT = ("if the cluster uses token authentication (Ray 2.60 turns it on for `ray start --head` where the "
             "head has a token), copy its token (`ray get-auth-token` on the head node) to ~/.ray/auth_token "
             "or RAY_AUTH_TOKEN")


def read_token() -> str | None:
    """The Ray authentication token available to this user, as Ray looks for it: ``RAY_AUTH_TOKEN``,
    the file ``RAY_AUTH_TOKEN_PATH`` names, or ``~/.ray/auth_token``; None if none."""
    if os.environ.get("RAY_AUTH_TOKEN", "").strip():
        return os.environ["RAY_AUTH_TOKEN"].strip()
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or str(Path.home() / ".ray" / "auth_token")
    try:
        return Path(path).read_text().strip() or None
    except OSError:
        return None


def token_available() -> bool:
    """Whether a Ray authentication token is available to this user (env or file)."""
    return read_token() is not None


def _enable_token_mode() -> None:
    """Token mode for this process and its children, as Ray does it itself: the environment, and
    Ray's cached configuration and token (read when ray was imported) refreshed."""
    os.environ["RAY_AUTH_MODE"] = "token"
    try:
        from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]  # Ray's C++ layer, no stubs
    except ImportError:  # a Ray without token authentication
        return
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def use_token_auth_if_available(address: str) -> bool:
    """Turn token authentication on for a client of ``address`` when the mode is unset and a token
    is available; returns whether token mode is on."""
    mode = os.environ.get("RAY_AUTH_MODE")
    if mode is not None:  # set by the user: respected
        return mode.lower() == "token"
    if address in ("", "local") or not token_available():
        return False
    _enable_token_mode()
    return True


def token_auth_as_ray_init_does() -> None:
    """Give a cluster this process starts itself (``ray.cluster_utils.Cluster``, the emulated one)
    the authentication a new ``ray.init()`` cluster gets in Ray 2.60: token mode unless
    RAY_AUTH_MODE says otherwise, with ~/.ray/auth_token (made if missing).

    ``Cluster`` starts its nodes with whatever mode the environment holds, while Ray caches the
    mode per process once any ``ray.init()`` ran; setting it up front keeps the nodes, their
    workers and this driver in one mode (a mismatch cancels every trial's actor before it runs).
    """
    try:
        from ray._private.authentication.authentication_token_setup import (
            enable_token_auth_by_default, ensure_token_if_auth_enabled)
    except ImportError:  # a Ray without token authentication
        return
    with quiet_logger("ray._private.authentication.authentication_token_setup"):  # Ray's notice of its default
        if enable_token_auth_by_default():
            ensure_token_if_auth_enabled({}, create_token_if_missing=True)


class quiet_logger:
    """Context: the named logger passes errors only (Ray's notices while hetune starts Ray)."""

    def __init__(self, name: str) -> None:
        self.log = logging.getLogger(name)

    def __enter__(self) -> None:
        self.level = self.log.level
        self.log.setLevel(logging.ERROR)

    def __exit__(self, *exc: Any) -> None:
        self.log.setLevel(self.level)


def init_ray(address: str = "", own: bool = False, **kwargs: Any):
    """``ray.init`` with Ray's own logging kept to errors; returns the ray module.

    Args:
        address: "" or "local" for a new local instance, "auto", "host:port" or "ray://host:port".
        own: the cluster at ``address`` was started by this process (the emulated one-host
            cluster), with the authentication mode of this process's environment: a token file
            left by another cluster must not switch its client to token mode.
        kwargs: more ``ray.init`` arguments (num_cpus, resources, ...).

    Raises:
        ConfigError: in one line, naming what was tried (and authentication when it may be that).
    """
    import ray

    check_reachable(address)
    from hetune.sim import plugins

    if plugins.LOADED and "runtime_env" not in kwargs:  # the user's modules, importable in every worker by name
        kwargs["runtime_env"] = {"py_modules": sorted(p.path for p in plugins.LOADED.values() if p.path)}
    token = use_token_auth_if_available("" if own else address)
    # Joining a cluster, Ray's C++ client prints its retries straight to fd 2: kept for the message.
    # A new local instance is left alone (its processes would inherit the redirection).
    captured = _StderrTo() if address not in ("", "local") and not own else None
    try:
        if captured is None:
            ray.init(address=address or None, log_to_driver=False, logging_level=logging.ERROR, **kwargs)
        else:
            with captured:
                ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR, **kwargs)
    except Exception as exc:  # Ray raises several types for an unreachable or refusing cluster
        text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        auth = "" if token else f"; {AUTH_HINT}"
        said = f"{exc} {captured.text() if captured else ''}".lower()
        if "authentication" in said or "unauthenticated" in said or "invalidauthtoken" in said:
            auth = (f"; authentication failed ({'the token was refused' if token else 'no token here'}): "
                    f"{AUTH_HINT}")
        raise ConfigError("--address", "", f"cannot start or reach Ray at {address or 'local'!r} "
                          f"({type(exc).__name__}: {text}){auth}") from None
    return ray


class _StderrTo:
    """Context: file descriptor 2 goes to a temporary file (what native code prints included); the
    text is kept for the error message. Left as is where fd 2 cannot be redirected."""

    def __enter__(self) -> "_StderrTo":
        import tempfile

        self._file = tempfile.TemporaryFile(mode="w+b")
        self._saved: int | None = None
        try:
            sys.stderr.flush()
            self._saved = os.dup(2)
            os.dup2(self._file.fileno(), 2)
        except (OSError, ValueError):  # no real fd 2 (an embedding host): leave it
            self._saved = None
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._saved is not None:
            os.dup2(self._saved, 2)
            os.close(self._saved)
            self._saved = None

    def text(self) -> str:
        self._file.seek(0)
        return self._file.read().decode("utf-8", "replace")


class TuneOutput:
    """Context: what Ray Tune prints on the driver (its experiment banner, results path and
    TensorBoard hint, which it prints whatever the verbosity) and Ray's log lines go to
    ``log_path`` instead of the terminal; hetune's own status lines go to stderr and stay.

    Args:
        log_path: file that receives Tune's stdout (appended to, so a resumed run keeps both parts).
    """

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path

    def __enter__(self) -> "TuneOutput":
        import contextlib
        import warnings

        self._stack = contextlib.ExitStack()
        fh = self._stack.enter_context(self.log_path.open("a"))
        self._stack.enter_context(contextlib.redirect_stdout(fh))
        self._stack.enter_context(warnings.catch_warnings())
        # reuse_actors stays off on purpose: an exploited trial restarts, as the simulator charges
        warnings.filterwarnings("ignore", message="Consider boosting PBT performance")
        # Ray's own log lines (a trial's failure with its traceback, when a node is lost) go to the
        # same file: the events record the failure, and hetune says in one line if the run fails
        ray_log = logging.getLogger("ray")
        saved = ray_log.handlers[:]
        handler = logging.StreamHandler(fh)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s -- %(message)s"))
        ray_log.handlers = [handler]
        self._stack.callback(setattr, ray_log, "handlers", saved)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stack.close()
