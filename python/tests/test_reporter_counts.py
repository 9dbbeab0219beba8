"""What the reporter counts in a batch (tokens and samples), without torch: input_ids' elements
and rows, else the first tensor's, as reporter._count documents."""

from shardscope import reporter


class Shaped:
    def __init__(self, *shape):
        self.shape = shape

    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n


def test_input_ids_give_tokens_and_samples():
    assert reporter._count({"attention_mask": Shaped(4, 3), "input_ids": Shaped(4, 16)}) == (64, 4)


def test_without_input_ids_the_first_tensor_counts():
    assert reporter._count({"label": 3, "pixel_values": Shaped(4, 3, 8, 8)}) == (768, 4)


def test_a_tuple_batch_counts_its_first_element():
    assert reporter._count((Shaped(2, 5), Shaped(2))) == (10, 2)


def test_nothing_countable_is_zero():
    assert reporter._count(None) == (0, 0)
    assert reporter._count({"text": "hello"}) == (0, 0)
    assert reporter._count(Shaped()) == (0, 0)


def test_what_is_not_known_is_not_sent():
    # #45 point 10: a script that gives no gradient norm, has no optimizer the reporter can see and
    # no countable batch sends none of those (they were sent as 0 and drawn as flat zeros).
    fields = reporter._step_fields(step=3, epoch=0, loss=1.5, lr=None, grad_norm=None, tokens=0, samples=0,
                                   counted=False, step_time=0.5, skipped=False)
    assert fields == {"step": 3, "epoch": 0, "loss": 1.5, "local_loss": 1.5, "skipped": False, "step_time": 0.5}
    given = reporter._step_fields(step=3, epoch=0, loss=1.5, lr=0.01, grad_norm=0.0, tokens=64, samples=4,
                                  counted=True, step_time=0.5, skipped=False)
    assert given["lr"] == 0.01 and given["grad_norm"] == 0.0  # a real 0 is sent
    assert (given["tokens"], given["samples"], given["tokens_per_s"]) == (64, 4, 128.0)
