"""Shardscope's side inside a user's training script.

Two lines give per-rank live charts in the Shardscope workbench::

    reporter = shardscope.Reporter(accelerator)
    ...
    reporter.step(loss, batch)          # after optimizer.step(), on every rank

or, with Accelerate's trackers (``Accelerator.log`` runs on the main process only, so the
per-rank series still come from ``reporter.step``)::

    accelerator = Accelerator(log_with=[shardscope.ShardscopeTracker()])

or, with ``transformers.Trainer``: ``Trainer(..., callbacks=[shardscope.ShardscopeCallback()])``.

Under ``shardscope launch --script`` every rank sends events (the engine's protocol, one JSON
object per line) to the launcher through a named pipe. Outside it nothing is sent and the calls
cost next to nothing.
"""

from .reporter import Reporter, current_reporter
from .tracker import ShardscopeTracker, register
from .callback import ShardscopeCallback

__all__ = ["Reporter", "current_reporter", "ShardscopeTracker", "ShardscopeCallback", "register"]

register()
