"""An Accelerate tracker: ``Accelerator(log_with=[ShardscopeTracker()])``, or ``log_with="shardscope"``
where Accelerate has ``register_tracker_class`` (1.15 and later; ``import shardscope`` registers it).

``Accelerator.log`` runs on the main process only, whatever a tracker says, so the values it logs
become rank 0's series; the tracker starts the reporter on every rank where it is made, and per-rank
steps come from ``Reporter.step``. When the script reports steps itself, logged values whose names
say eval (``eval_loss``, ``val/loss``) still become eval events and the rest are left to the
reporter, so no step is counted twice.
"""

from .reporter import Reporter

try:
    from accelerate.tracking import GeneralTracker
except ImportError:  # accelerate absent: the class still imports, for the Trainer callback alone
    GeneralTracker = object

_LOSS_KEYS = ("loss", "train_loss", "train/loss", "training_loss")
_LR_KEYS = ("lr", "learning_rate", "train/lr", "train/learning_rate")
_GRAD_NORM_KEYS = ("grad_norm", "train/grad_norm")


def _first(values, keys):
    return next((values[k] for k in keys if isinstance(values.get(k), (int, float))), None)


def _is_eval_key(key):
    lowered = key.lower()
    return lowered.startswith(("eval", "val", "valid", "test"))


class ShardscopeTracker(GeneralTracker):
    name = "shardscope"
    requires_logging_directory = False
    main_process_only = False

    def __init__(self, run_name=None, **kwargs):
        if GeneralTracker is not object:
            super().__init__()
        self.run_name = run_name
        self._reporter = Reporter()
        self._script_steps = None

    @property
    def tracker(self):
        return self._reporter

    def store_init_configuration(self, values):
        self._reporter.log("hyperparameters: " + ", ".join("%s=%s" % kv for kv in sorted(values.items())))

    def log(self, values, step=None, **kwargs):
        reporter = self._reporter
        numbers = {k: v for k, v in values.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        evals = {k: v for k, v in numbers.items() if _is_eval_key(k)}
        if evals:
            loss_key = next((k for k in evals if k.lower().endswith("loss")), None)
            loss = evals.pop(loss_key) if loss_key else 0.0
            reporter.eval(loss, step=step, **{k.replace("/", "_"): v for k, v in evals.items()})
        if self._script_steps is None:
            # Whether the script calls Reporter.step: then its steps are the series.
            self._script_steps = reporter.steps > 0
        loss = _first(numbers, _LOSS_KEYS)
        if loss is None or self._script_steps:
            return
        reporter.record_step(step if step is not None else reporter.steps + 1, loss, lr=_first(numbers, _LR_KEYS),
                             grad_norm=_first(numbers, _GRAD_NORM_KEYS))

    def finish(self):
        pass


def register():
    """Registers the tracker by name where Accelerate allows it (1.15 and later)."""
    try:
        from accelerate.tracking import LOGGER_TYPE_TO_CLASS, register_tracker_class
    except ImportError:
        return False
    if LOGGER_TYPE_TO_CLASS.get(ShardscopeTracker.name) is ShardscopeTracker:
        return True
    register_tracker_class(ShardscopeTracker)
    return True
