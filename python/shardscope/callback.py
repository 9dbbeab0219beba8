"""A ``transformers`` callback: ``Trainer(..., callbacks=[ShardscopeCallback()])``.

The Trainer calls ``on_log`` on every rank with the loss it has already averaged over the ranks
and the logging interval, so each rank reports the global loss of its logged steps, with the
learning rate and grad norm the Trainer logged; evaluations and checkpoints are reported too.
"""

import os
import time

from .reporter import Reporter

try:
    from transformers import TrainerCallback
except ImportError:  # transformers absent: the class still imports
    TrainerCallback = object


class ShardscopeCallback(TrainerCallback):
    def __init__(self):
        self._reporter = Reporter()
        self._last_time = None
        self._last_step = 0
        self._last_tokens = 0

    def on_train_begin(self, args, state, control, **kwargs):
        self._reporter.phase = "train"
        self._last_time = time.perf_counter()
        self._last_step = state.global_step

    def on_log(self, args, state, control, logs=None, **kwargs):
        logs = logs or {}
        if not isinstance(logs.get("loss"), (int, float)):
            return  # an eval's or the run summary's log
        now = time.perf_counter()
        steps = max(1, state.global_step - self._last_step)
        step_time = (now - self._last_time) / steps if self._last_time is not None else 0.0
        self._last_time, self._last_step = now, state.global_step
        samples = args.per_device_train_batch_size * args.gradient_accumulation_steps
        # With include_num_input_tokens_seen the Trainer counts the tokens of all ranks.
        seen = int(getattr(state, "num_input_tokens_seen", 0) or 0)
        all_tokens = (seen - self._last_tokens) / steps
        self._last_tokens = seen
        world = max(1, self._reporter.world_size)
        # Without include_num_input_tokens_seen the Trainer counts no tokens: none are sent.
        counted = seen > 0
        self._reporter.record_step(state.global_step, logs["loss"], lr=logs.get("learning_rate"),
                                   grad_norm=logs.get("grad_norm"), samples=samples, step_time=step_time,
                                   epoch=int(state.epoch or 0), tokens=int(all_tokens / world) if counted else None,
                                   tokens_per_s=(all_tokens / step_time if step_time > 0 else 0.0) if counted else None)

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        metrics = dict(metrics or {})
        loss = metrics.pop("eval_loss", 0.0)
        self._reporter.eval(loss, step=state.global_step, **metrics)

    def on_save(self, args, state, control, **kwargs):
        path = os.path.join(args.output_dir, "checkpoint-%d" % state.global_step)
        if os.path.isdir(path):
            self._reporter.checkpoint(path, step=state.global_step)
