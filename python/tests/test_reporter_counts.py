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
