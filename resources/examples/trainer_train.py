"""A transformers.Trainer script: a tiny GPT-2 with random weights on a local text, byte-level
(no tokenizer or model is downloaded). Run it from the workbench, or:

    shardscope launch --config_file cpu2.yaml --script resources/examples/trainer_train.py -- --max_steps 10

One line reports it to Shardscope: ``callbacks=[ShardscopeCallback()]``.
"""

import argparse
import os

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

try:
    from shardscope import ShardscopeCallback
except ImportError:
    ShardscopeCallback = None


class ByteWindows(torch.utils.data.Dataset):
    """Windows of `context` bytes of a file, as causal-LM examples (labels = inputs; the model shifts)."""

    def __init__(self, path, context):
        with open(path, "rb") as f:
            data = list(f.read())
        self.windows = [data[i : i + context] for i in range(0, len(data) - context, context)]

    def __len__(self):
        return len(self.windows)

    def __getitem__(self, index):
        ids = torch.tensor(self.windows[index], dtype=torch.long)
        return {"input_ids": ids, "labels": ids}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--max_steps", type=int, default=10)
    parser.add_argument("--data", default=os.path.abspath(__file__), help="a local text file (default: this script)")
    parser.add_argument("--output_dir", default=os.path.join(os.environ.get("SHARDSCOPE_RUN_DIR", "."), "trainer"))
    parser.add_argument("--eval_steps", type=int, default=5)
    args = parser.parse_args()

    config = GPT2Config(vocab_size=256, n_positions=64, n_embd=32, n_layer=2, n_head=2)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config)
    data = ByteWindows(args.data, 32)
    training = TrainingArguments(output_dir=args.output_dir, max_steps=args.max_steps, per_device_train_batch_size=8,
                                 per_device_eval_batch_size=8, learning_rate=3e-3, logging_steps=1,
                                 eval_strategy="steps", eval_steps=args.eval_steps, save_strategy="no",
                                 report_to="none", disable_tqdm=True, dataloader_num_workers=0,
                                 include_num_input_tokens_seen=True)
    trainer = Trainer(model=model, args=training, train_dataset=data, eval_dataset=torch.utils.data.Subset(data, range(16)),
                      callbacks=[ShardscopeCallback()] if ShardscopeCallback else [])
    trainer.train()
    # The process group ends here, while the interpreter is whole. A Gloo group still alive at exit
    # (the DDP wrapper holds one even past destroy_process_group) now and then ends the process
    # with "terminate called without an active exception" (pytorch/pytorch#190489), failing a run
    # that trained to its end. So the wrapped model goes first, then the group.
    accelerator = trainer.accelerator
    accelerator.wait_for_everyone()
    del trainer, model
    accelerator.free_memory()  # its references to the wrapped model, then gc
    accelerator.end_training()


if __name__ == "__main__":
    main()
