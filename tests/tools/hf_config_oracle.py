"""What transformers makes of config.json files: the reference for tst_hf_model_config.

Usage: hf_config_oracle.py MODEL_DIR...  Prints one JSON object, model dir -> resolved fields
(the names of engine/recipe/hf_model_config.h), or {"error": "..."} where transformers refuses
the file. Runs offline on the project venv's transformers (a local folder, nothing downloaded).
"""
import json
import sys

from transformers import AutoConfig


def resolved(config):
    family = config.model_type
    gpt2 = family == "gpt2"
    layers = config.num_hidden_layers
    out = {
        "model_type": family,
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "intermediate_size": (config.n_inner or 4 * config.n_embd) if gpt2 else config.intermediate_size,
        "num_hidden_layers": layers,
        "num_attention_heads": config.num_attention_heads,
        "num_key_value_heads": config.num_attention_heads if gpt2 else config.num_key_value_heads,
        # What the attention modules use (Qwen2 reads head_dim with a fallback).
        "head_dim": config.hidden_size // config.num_attention_heads if gpt2
        else getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads,
        "max_position_embeddings": config.max_position_embeddings,
        "hidden_act": config.activation_function if gpt2 else config.hidden_act,
        "norm_eps": config.layer_norm_epsilon if gpt2 else config.rms_norm_eps,
        "initializer_range": config.initializer_range,
        "tie_word_embeddings": config.tie_word_embeddings,
        "bos_token_id": config.bos_token_id,
        "pad_token_id": config.pad_token_id,
        "eos_token_ids": [] if config.eos_token_id is None
        else list(config.eos_token_id) if isinstance(config.eos_token_id, (list, tuple)) else [config.eos_token_id],
    }
    if gpt2:
        out["sliding_windows"] = [None] * layers
        out["attention_dropout"] = config.attn_pdrop
        return out
    rope = dict(config.rope_parameters or {})
    out["rope"] = {
        "type": rope.get("rope_type"),
        "theta": rope.get("rope_theta"),
        "factor": rope.get("factor"),
        "low_freq_factor": rope.get("low_freq_factor"),
        "high_freq_factor": rope.get("high_freq_factor"),
        "original_max_position_embeddings": rope.get("original_max_position_embeddings"),
    }
    out["attention_dropout"] = config.attention_dropout
    if family == "mistral":
        out["sliding_windows"] = [config.sliding_window] * layers
    elif family == "qwen2":
        out["sliding_windows"] = [config.sliding_window if t == "sliding_attention" else None
                                  for t in config.layer_types]
    else:
        out["sliding_windows"] = [None] * layers
    return out


def main(dirs):
    result = {}
    for d in dirs:
        try:
            result[d] = resolved(AutoConfig.from_pretrained(d))
        except Exception as e:  # transformers refuses the file: the test expects us to refuse it too
            result[d] = {"error": f"{type(e).__name__}: {e}"}
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
