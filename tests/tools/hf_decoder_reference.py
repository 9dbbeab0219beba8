#!/usr/bin/env python3
"""The reference for the engine's Hugging Face decoders (tests/engine/tst_decoder_models).

Creates tiny random models of each family with the project venv's `transformers` (seeded, no
downloads) and saves each with save_pretrained into OUT/<case>/; beside the weights it writes
OUT/<case>/reference.safetensors holding fixed inputs and what transformers computes from them in
fp32: "input_ids" [2, T], "targets" [2, T], "logits", "loss" (cross entropy of the logits against
the targets, as the engine's loss), and "grad.<key>" for every parameter's gradient of that loss,
by its state-dict key. Prints a JSON list of the cases.

    python hf_decoder_reference.py --out DIR [--max-shard-size 20KB] [--case NAME]
    python hf_decoder_reference.py --check-export DIR --reference OUT/<case>/reference.safetensors
    python hf_decoder_reference.py --check-adapter DIR --base OUT/<case> --engine-logits logits.safetensors
    python hf_decoder_reference.py --check-tokenizer EXPORT --source TOKENIZER_DIR
"""
import argparse
import json
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM, Qwen2Config,
                          Qwen2ForCausalLM)

SEQ = 16
VOCAB = 300  # above 256, so byte-level text fits too

COMMON = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
              max_position_embeddings=128, initializer_range=0.2)

# Each case: what it exercises, the class and its config.
CASES = {
    # GQA (2 kv heads for 4 query heads), untied head, default RoPE.
    "llama_gqa": (LlamaForCausalLM, LlamaConfig, dict(COMMON, num_key_value_heads=2, tie_word_embeddings=False,
                                                     rms_norm_eps=1e-6)),
    # Tied head, Llama 3 RoPE scaling, an explicit head_dim other than hidden/heads, all biases,
    # a padding token (its embedding row gets no gradient).
    "llama3_tied": (LlamaForCausalLM, LlamaConfig,
                    dict(COMMON, num_key_value_heads=1, head_dim=32, tie_word_embeddings=True, attention_bias=True,
                         mlp_bias=True, pad_token_id=3, rope_theta=500000.0,
                         rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                           original_max_position_embeddings=32))),
    # Qwen2's q/k/v biases, GQA, untied.
    "qwen2_bias": (Qwen2ForCausalLM, Qwen2Config, dict(COMMON, num_key_value_heads=2, tie_word_embeddings=False,
                                                      rope_theta=1000000.0)),
    # Mistral with a window longer than the sequence, linear RoPE scaling.
    "mistral_linear": (MistralForCausalLM, MistralConfig,
                       dict(COMMON, num_key_value_heads=2, sliding_window=64, tie_word_embeddings=False,
                            rope_scaling=dict(rope_type="linear", factor=2.0))),
}


def make_case(name, out, max_shard_size):
    model_class, config_class, kwargs = CASES[name]
    torch.manual_seed(sum(map(ord, name)))  # stable across processes, unlike hash()
    config = config_class(**kwargs)
    config._attn_implementation = "sdpa"
    model = model_class(config).float().train()
    folder = os.path.join(out, name)
    model.save_pretrained(folder, max_shard_size=max_shard_size)

    generator = torch.Generator().manual_seed(7)
    ids = torch.randint(0, VOCAB, (2, SEQ), generator=generator)
    ids[0, 2] = kwargs.get("pad_token_id") or 0
    targets = torch.randint(0, VOCAB, (2, SEQ), generator=generator)
    logits = model(input_ids=ids).logits
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1))
    loss.backward()
    tensors = {"input_ids": ids, "targets": targets, "logits": logits.detach().contiguous(),
               "loss": loss.detach().reshape(1)}
    for key, parameter in model.named_parameters():
        tensors["grad." + key] = parameter.grad.detach().contiguous()
    save_file(tensors, os.path.join(folder, "reference.safetensors"))
    return {"case": name, "dir": folder, "parameters": [k for k, _ in model.named_parameters()]}


def check_export(folder, reference):
    """Loads an engine export with from_pretrained and compares its logits with the reference's."""
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    expected = load_file(reference)
    with torch.no_grad():
        logits = model(input_ids=expected["input_ids"]).logits
    return {"class": type(model).__name__,
            "max_logit_difference": (logits - expected["logits"]).abs().max().item()}


def check_adapter(adapter, base, engine_logits):
    """Loads an engine LoRA adapter with PeftModel.from_pretrained on `base` and compares its logits
    with the engine's (a safetensors file with "input_ids" and "logits"); also compares the
    adapter's keys with those PEFT itself saves for the same LoraConfig."""
    from peft import LoraConfig, PeftModel, get_peft_model, get_peft_model_state_dict
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32), adapter).eval()
    expected = load_file(engine_logits)
    with torch.no_grad():
        logits = model(input_ids=expected["input_ids"]).logits
    ours = set(load_file(os.path.join(adapter, "adapter_model.safetensors")))
    fresh = get_peft_model(AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32),
                           LoraConfig.from_pretrained(adapter))
    peft_keys = set(get_peft_model_state_dict(fresh))
    return {"max_logit_difference": (logits - expected["logits"]).abs().max().item(),
            "keys_missing": sorted(peft_keys - ours), "keys_extra": sorted(ours - peft_keys)}


def check_tokenizer(folder, source):
    """Loads the tokenizer of an engine export with AutoTokenizer.from_pretrained (as a user of the
    export would) and compares its ids with those of the tokenizer the run trained with."""
    from transformers import AutoTokenizer
    exported, original = AutoTokenizer.from_pretrained(folder), AutoTokenizer.from_pretrained(source)
    texts = ["The quick brown fox jumps over the lazy dog.", "Café, naïve — 3:45 pm; we'll see.", ""]
    return {"class": type(exported).__name__,
            "same_ids": all(exported(t)["input_ids"] == original(t)["input_ids"] for t in texts),
            "decoded": exported.decode(exported(texts[0])["input_ids"], skip_special_tokens=True)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--max-shard-size", default="5GB")
    parser.add_argument("--case", action="append", help="only these cases (default: all)")
    parser.add_argument("--check-export", metavar="DIR", help="instead: load DIR with from_pretrained and compare "
                        "its logits on --reference's input_ids with the reference's")
    parser.add_argument("--reference", help="a reference.safetensors (with --check-export)")
    parser.add_argument("--check-adapter", metavar="DIR", help="instead: load the LoRA adapter DIR with PEFT on --base "
                        "and compare its logits with --engine-logits")
    parser.add_argument("--base", help="the base model folder (with --check-adapter)")
    parser.add_argument("--engine-logits", help="safetensors with input_ids and logits (with --check-adapter)")
    parser.add_argument("--check-tokenizer", metavar="DIR", help="instead: load DIR's tokenizer with AutoTokenizer and "
                        "compare its ids with --source's")
    parser.add_argument("--source", help="the tokenizer folder the run trained with (with --check-tokenizer)")
    args = parser.parse_args()
    if args.check_tokenizer:
        print(json.dumps(check_tokenizer(args.check_tokenizer, args.source)))
        return
    if args.check_adapter:
        print(json.dumps(check_adapter(args.check_adapter, args.base, args.engine_logits)))
        return
    if args.check_export:
        print(json.dumps(check_export(args.check_export, args.reference)))
        return
    os.makedirs(args.out, exist_ok=True)
    cases = [make_case(name, args.out, args.max_shard_size) for name in (args.case or CASES)]
    print(json.dumps(cases))


if __name__ == "__main__":
    main()
